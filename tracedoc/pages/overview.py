"""Overview page: the headline, where each GPU's time went, the findings ranked by estimated saving, with their
evidence, fixes and what-if projections, filterable by severity, rule and rank; and the inputs that were
analysed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracedoc.measures import COUNT
from tracedoc.pages import attribution, savings
from tracedoc.pages.charts import Section
from tracedoc.pages.fragments import Column, findings_html, headline_html, measured, table_html
from tracedoc.report import Finding, Report

TITLE = "Overview"
ROUTE = "overview"


@dataclass(frozen=True)
class Links:
    """Where the overview's findings and slices of time lie on the timeline (the dashboard's; the HTML report has
    no timeline): a URL or None for each."""

    finding: Callable[[Finding], str | None]
    slice: Callable[[Any, Any], str | None]  # (rank, step or None for the prologue / whole window)


def sections(report: Report, findings: Sequence[Finding] | None = None, links: Links | None = None) -> list[Section]:
    """Headline, where the time went, savings chart and finding cards (``findings``: a filtered subset, numbered as
    in the report); with ``links``, findings, their bars and the slices of time open the timeline where they lie."""
    shown = list(report.findings if findings is None else findings)
    out = [Section("Summary", items=[headline_html(report)])]
    if (time_went := attribution.section(report, links.slice if links else None)) is not None:
        out.append(time_went)
    if not report.findings:
        out.append(Section("Findings", empty="No problems found by the rules that ran."))
    elif not shown:
        out.append(Section("Findings", empty="No finding matches the filters."))
    else:
        chart = savings.savings_chart(report, shown, links.finding if links else None)
        note = savings.note(report, shown)
        if chart is not None:
            out.append(Section("Estimated saving per finding", note=note, items=[chart]))
        elif any(f.impact_ms for f in shown):  # a hang's wait, a health finding's time: the note says why no bar
            out.append(Section("Estimated saving per finding", empty=note))
        # else no box: no finding saves time (memory findings save bytes)
        out.append(Section("Findings", items=[findings_html(report, shown, links.finding if links else None)]))
    inputs = [{"rank": i.rank, "format": i.format, "events": i.events, "path": i.path} for i in report.inputs]
    out.append(Section("Inputs", items=[table_html(inputs, [Column("rank", "rank"), Column("format", "format"),
                                                           measured("events", "events", COUNT),
                                                           Column("path", "path", wide=True)])]))
    return out


def filter_findings(report: Report, severities: Sequence[str], rules: Sequence[str],
                    ranks: Sequence[str]) -> list[Finding]:
    """The findings matching every non-empty filter (a rank filter leaves out findings without a rank)."""
    return [f for f in report.findings
            if (not severities or f.severity in severities) and (not rules or f.rule in rules)
            and (not ranks or str(f.scope.rank) in ranks)]

