"""The diff in Markdown, for pull requests and CI summaries. Every string goes through the Markdown report's
``escape`` (one line, no links, HTML, emphasis or table breaks)."""

from __future__ import annotations

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
from tracedoc.render.markdown import escape


def _table(section: Section) -> list[str]:
    lines = [f"## {escape(section.title)}", ""]
    if section.note:
        lines += [escape(section.note), ""]
    if section.rows:
        lines.append("| " + " | ".join(escape(h) or " " for h in section.header) + " |")
        lines.append("|" + "|".join("---:" if i in section.numeric else "---" for i in range(len(section.header)))
                     + "|")
        lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in section.rows]
        lines.append("")
    return lines


def render_markdown(diff: Diff) -> str:
    lines = ["# tracedoc diff", "", escape(sides_line(diff)), "", f"**{escape(verdict_line(diff))}**", ""]
    lines += [line for warning in warning_lines(diff) for line in (f"**{escape(warning)}**", "")]
    if context := context_line(diff):
        lines += [escape(context), ""]
    for section in sections(diff):
        lines += _table(section)
    if cross := cross_rank_lines(diff):
        lines += ["## Across ranks", "", *(f"- {escape(line)}" for line in cross), ""]
    if diff.notes:
        lines += [f"*Note: {escape(n)}*" for n in diff.notes] + [""]
    return "\n".join(lines)
