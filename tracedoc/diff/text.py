"""The diff in the terminal (rich). Every cell is a ``Text`` built from ``sanitize.one_line``: kernel names and
paths from traces can neither act on the terminal nor be read as Rich markup."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tracedoc.diff.model import Diff
from tracedoc.diff.sections import (
    Section,
    context_line,
    cross_rank_lines,
    sections,
    sides_line,
    verdict_line,
    warning_lines,
)
from tracedoc.words.sanitize import one_line

_VERDICT_STYLE = {"faster": "bold green", "slower": "bold red"}


def _table(section: Section) -> list[RenderableType]:
    out: list[RenderableType] = [Text(""), Text(one_line(section.title), style="bold")]
    if section.note:
        out.append(Text(one_line(section.note), style="dim"))
    if not section.rows:
        return out
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    for i, head in enumerate(section.header):
        table.add_column(Text(one_line(head)), justify="right" if i in section.numeric else "left",
                         overflow="fold")
    for row in section.rows:
        table.add_row(*(Text(one_line(cell)) for cell in row))
    out.append(table)
    return out


TEXT_NAME_CHARS = 60


def diff_parts(diff: Diff, name_chars: int = TEXT_NAME_CHARS) -> list[RenderableType]:
    """The renderables of the text diff, for a live console (colour) or a file; kernel names cut to
    ``name_chars``."""
    parts: list[RenderableType] = [
        Text.assemble(("tracedoc diff ", "bold"), one_line(sides_line(diff))),
        Text(one_line(verdict_line(diff)), style=_VERDICT_STYLE.get(diff.verdict, "bold")),
        *(Text(one_line(line), style="bold yellow") for line in warning_lines(diff)),
    ]
    if context := context_line(diff):
        parts.append(Text(one_line(context)))
    for section in sections(diff, name_chars):
        parts += _table(section)
    if lines := cross_rank_lines(diff):
        parts += [Text(""), Text("Across ranks", style="bold"), *(Text(one_line(line)) for line in lines)]
    if diff.notes:
        parts += [Text(""), *(Text("note: " + one_line(n), style="dim") for n in diff.notes)]
    return parts


def render_text(diff: Diff, width: int = 160) -> str:
    """The text diff without colour (for --out FILE and tests)."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, highlight=False)
    for part in diff_parts(diff):
        console.print(part)
    return buf.getvalue()
