"""A report's overview as HTML for notebooks (``Report._repr_html_``): the headline, the findings as a table and
where each GPU's time went, made of the HTML report's escaped fragments (tracedoc.pages.fragments), with its style
scoped to the output so that it leaves the notebook's own look alone. Needs no Bokeh: no charts here.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tracedoc.pages.fragments import STYLE, Column, attribution_table_html, headline_html, number, table_html
from tracedoc.render.base import saving_text, scope_text

if TYPE_CHECKING:
    from tracedoc.report import Report

SCOPE = "div.tracedoc"
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def scoped_style(css: str, scope: str = SCOPE) -> str:
    """``css`` with every selector put under ``scope`` (``body`` becomes the scope itself)."""
    def scoped(match: re.Match[str]) -> str:
        selectors = [s.strip() for s in match.group(1).split(",")]
        inside = ", ".join(scope if s == "body" else f"{scope} {s}" for s in selectors)
        return f"{inside} {{{match.group(2)}}}\n"

    return _RULE.sub(scoped, css)


def report_html(report: Report) -> str:
    """The overview: headline, a table of the findings (ranked by estimated saving) and the attribution table."""
    wall = float(report.summary.get("wall_ms") or 0.0)
    rows = [{"n": i, "severity": f.severity, "rule": f.rule, "where": scope_text(f.scope.to_dict()),
             "saving": saving_text(f.impact_ms, f.impact_pct, wall, f.impact_bytes)
             + (f", part of #{f.part_of}" if f.part_of else ""),
             "title": f.title} for i, f in enumerate(report.findings, 1)]
    parts = [f"<style>{scoped_style(STYLE)}</style>", '<div class="tracedoc">', "<h3>tracedoc report</h3>",
             headline_html(report).markup]
    if rows:
        parts.append(table_html(rows, [Column("n", "#", number(), numeric=True), Column("severity", "severity"),
                                       Column("rule", "rule"), Column("where", "where"),
                                       Column("saving", "est. saving", numeric=True),
                                       Column("title", "finding", wide=True)],
                                highlight=lambda row: row["severity"] == "critical").markup)
    else:
        parts.append('<p class="note">No problems found by the rules that ran.</p>')
    if report.attribution:
        parts += ["<h3>Where the time went</h3>", attribution_table_html(report.attribution).markup]
    parts.append('<p class="note">Tables: <code>report.frames</code>; the events: <code>tracedoc.open_store</code>.'
                 "</p></div>")
    return "".join(parts)
