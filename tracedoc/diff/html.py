"""The diff as one self-contained HTML page (no script, no network): the same sections as the text and Markdown
diffs, built from the HTML report's escaped fragments (``tracedoc.pages.fragments``), and the compared rank's step
drawn as two stacked bars of causes, before over after, on one scale."""

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
from tracedoc.pages.fragments import STYLE, Column, cause_color, esc, table_html
from tracedoc.units import fmt_ms
from tracedoc.words.attribution import cause_label

_EXTRA_STYLE = """
p.verdict { font-size: 1.1rem; font-weight: 600; margin: 0.6rem 0 0.2rem; }
p.faster { color: #1e7b34; } p.slower { color: #a61b1b; }
p.caution { color: #8a4b00; font-weight: 600; margin: 0.2rem 0; }
div.bars { margin: 0.4rem 0 0.8rem; max-width: 900px; }
div.bar { display: flex; height: 1.4rem; margin: 0.15rem 0; }
div.bar span { display: block; height: 100%; }
div.barlabel { font-size: 0.8rem; color: #4a5262; }
span.key { display: inline-block; margin-right: 1rem; font-size: 0.8rem; white-space: nowrap; }
span.key i { display: inline-block; width: 0.75em; height: 0.75em; margin-right: 0.3em; border-radius: 2px; }
"""


_VERDICT_CLASS = {"faster": "faster", "slower": "slower"}


def section_html(section: Section, heading: bool = True) -> str:
    """A section's table, under its title and note unless ``heading`` is False (the dashboard draws those)."""
    columns = [Column(str(i), head, numeric=i in section.numeric, wide=i == 0 and head == "kernel")
               for i, head in enumerate(section.header)]
    rows = [{str(i): cell for i, cell in enumerate(row)} for row in section.rows]
    body = table_html(rows, columns).markup if rows else ""
    if not heading:
        return body
    note = f'<p class="note">{esc(section.note)}</p>' if section.note else ""
    return f"<h2>{esc(section.title)}</h2>{note}{body}"


def _bars_html(diff: Diff) -> str:
    """Before and after: the compared rank's mean step, split by cause, on one scale."""
    causes = [c for c in diff.causes if c.before_ms > 0 or c.after_ms > 0]
    if not causes:
        return ""
    order = sorted(causes, key=lambda c: -(c.before_ms + c.after_ms))
    longest = max(sum(c.before_ms for c in causes), sum(c.after_ms for c in causes)) or 1.0
    out = ['<div class="bars">']
    for label, attr in (("before", "before_ms"), ("after", "after_ms")):
        total = sum(getattr(c, attr) for c in causes)
        spans = "".join(
            f'<span style="width:{100.0 * getattr(c, attr) / longest:.3f}%;background:{esc(cause_color(c.cause))}" '
            f'title="{esc(cause_label(c.cause))}: {esc(fmt_ms(getattr(c, attr)))}"></span>'
            for c in order if getattr(c, attr) > 0)
        out.append(f'<div class="barlabel">{esc(label)}: {esc(fmt_ms(total))} per step</div>'
                   f'<div class="bar">{spans}</div>')
    out.append("<div>" + "".join(f'<span class="key"><i style="background:{esc(cause_color(c.cause))}"></i>'
                                 f"{esc(cause_label(c.cause))}</span>" for c in order) + "</div></div>")
    return "".join(out)


def render_html(diff: Diff) -> str:
    parts = [f"<h1>tracedoc diff</h1><p class=\"headline\">{esc(sides_line(diff))}</p>",
             f'<p class="verdict {_VERDICT_CLASS.get(diff.verdict, "")}">{esc(verdict_line(diff))}</p>',
             *(f'<p class="caution">{esc(line)}</p>' for line in warning_lines(diff))]
    if context := context_line(diff):
        parts.append(f'<p class="note">{esc(context)}</p>')
    for section in sections(diff):
        parts.append(section_html(section))
        if section.title.startswith("Where the time went"):
            parts.append(_bars_html(diff))
    if cross := cross_rank_lines(diff):
        parts.append("<h2>Across ranks</h2><ul>" + "".join(f"<li>{esc(line)}</li>" for line in cross) + "</ul>")
    if diff.notes:
        parts.append("".join(f'<p class="note">Note: {esc(n)}</p>' for n in diff.notes))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc('tracedoc diff: ' + sides_line(diff))}</title><style>{STYLE}{_EXTRA_STYLE}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
