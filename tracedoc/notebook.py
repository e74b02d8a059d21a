"""A report's overview as HTML for notebooks (``Report._repr_html_``, which this module installs as
``Report.html_view``): the headline, the findings ranked by
estimated saving, each a line that opens (a ``<details>`` element) on its message, evidence, fix and what-if
projection, where each GPU's time went and its memory (peak, growth, live sites, OOMs: what the text and Markdown
reports say of it), made of the HTML report's escaped fragments (tracedoc.pages.fragments),
with its style scoped to the output so that it leaves the notebook's own look alone. Needs no Bokeh: no charts here.
"""

from __future__ import annotations

import re

from tracedoc.pages.fragments import (
    STYLE,
    Column,
    attribution_table_html,
    esc,
    evidence_rows,
    headline_html,
    saving_html,
    table_html,
)
from tracedoc.report import Finding, Report
from tracedoc.words.attribution import part_of_text
from tracedoc.words.findings import scope_text, what_if_text
from tracedoc.words.memory import NOTE, memory_lines

SCOPE = "div.tracedoc"
DETAILS_STYLE = """
details.finding { border-left: 4px solid #888; padding: 0.15rem 0.6rem; margin: 0.3rem 0; }
details.critical { border-left-color: #c0392b; } details.warning { border-left-color: #e67e22; }
details.info { border-left-color: #2e86c1; }
details.finding summary { cursor: pointer; }
"""
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def scoped_style(css: str, scope: str = SCOPE) -> str:
    """``css`` with every selector put under ``scope`` (``body`` becomes the scope itself)."""
    def scoped(match: re.Match[str]) -> str:
        selectors = [s.strip() for s in match.group(1).split(",")]
        inside = ", ".join(scope if s == "body" else f"{scope} {s}" for s in selectors)
        return f"{inside} {{{match.group(2)}}}\n"

    return _RULE.sub(scoped, css)


def finding_details_html(number_: int, finding: Finding, wall_ms: float,
                         projection: dict[str, object] | None = None) -> str:
    """One finding as a line (number, severity, rule, where, saving, title) that opens on its message, evidence, fix
    and what-if projection; every string escaped."""
    shared = f'<p class="note">{esc(part_of_text(finding.part_of))}</p>' if finding.part_of else ""
    after = f'<p class="whatif">{esc(what_if_text(projection))}</p>' if projection else ""
    evidence = table_html(evidence_rows(finding), [Column("name", "evidence"),
                                                   Column("value", "value", numeric=True)]).markup
    return (f'<details class="finding {esc(finding.severity)}"><summary>'
            f'<b>{number_}. {esc(finding.title)}</b> <span class="sev {esc(finding.severity)}">'
            f"{esc(finding.severity)}</span><code>{esc(finding.rule)}</code> · "
            f"{esc(scope_text(finding.scope.to_dict()))} · {saving_html(finding, wall_ms)}</summary>"
            f"<p>{esc(finding.message)}</p>{shared}{evidence}<p><b>Fix:</b> {esc(finding.fix)}</p>{after}"
            "</details>")


def memory_html(report: Report) -> list[str]:
    """The Memory section (words.memory): per GPU, a heading and its lines; none without allocator data."""
    devices = memory_lines(report)
    if not devices:
        return []
    out = ["<h3>Memory</h3>", f'<p class="note">{esc(NOTE)}.</p>']
    for heading, lines in devices:
        out += [f"<h4>{esc(heading)}</h4>", "<ul>", *(f"<li>{esc(line)}</li>" for line in lines), "</ul>"]
    return out


def report_html(report: Report) -> str:
    """The overview: headline, the findings (ranked by estimated saving; each opens on its message and fix), the
    attribution table and the memory section."""
    wall = float(report.summary.get("wall_ms") or 0.0)
    parts = [f"<style>{scoped_style(STYLE + DETAILS_STYLE)}</style>", '<div class="tracedoc">',
             "<h3>tracedoc report</h3>", headline_html(report).markup]
    if report.findings:
        parts.append('<p class="note">Click a finding for what was found, its evidence and the fix.</p>')
        parts += [finding_details_html(i, f, wall, report.what_if_for(i)) for i, f in enumerate(report.findings, 1)]
    else:
        parts.append('<p class="note">No problems found by the rules that ran.</p>')
    if report.attribution:
        parts += ["<h3>Where the time went</h3>", attribution_table_html(report.attribution).markup]
    parts += memory_html(report)
    parts.append('<p class="note">Tables: <code>report.frames</code>; the events: <code>tracedoc.open_store</code>.'
                 "</p></div>")
    return "".join(parts)


Report.html_view = report_html  # what Report._repr_html_ draws with: the report imports no face
