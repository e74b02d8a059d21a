"""Overview page: the headline, where each GPU's time went, the findings ranked by estimated saving, with their
evidence, fixes and what-if projections, filterable by severity, rule and rank; and the inputs that were
analysed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracedoc.pages import attribution
from tracedoc.pages.charts import Section, hbar_chart, open_on_click, short
from tracedoc.pages.fragments import SEVERITY_COLORS, Column, findings_html, headline_html, number, table_html
from tracedoc.render.base import scope_text
from tracedoc.report import Finding, Report

TITLE = "Overview"
ROUTE = "overview"
MAX_BARS = 20


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
        out += [Section("Estimated saving per finding", note=_saving_note(report, shown),
                        items=[savings_chart(report, shown, links.finding if links else None)]),
                Section("Findings", items=[findings_html(report, shown, links.finding if links else None)])]
    inputs = [{"rank": i.rank, "format": i.format, "events": i.events, "path": i.path} for i in report.inputs]
    out.append(Section("Inputs", items=[table_html(inputs, [Column("rank", "rank"), Column("format", "format"),
                                                           Column("events", "events", number(), numeric=True),
                                                           Column("path", "path", wide=True)])]))
    return out


def savings_chart(report: Report, findings: Sequence[Finding],
                  link: Callable[[Finding], str | None] | None = None) -> Any:
    """One bar per finding (the first MAX_BARS), its estimated saving in ms, coloured by severity; with ``link``, a
    click on a bar opens the timeline where the finding lies."""
    number_of = {id(f): i for i, f in enumerate(report.findings, 1)}
    top = list(findings)[:MAX_BARS]
    labels = [f"{number_of[id(f)]}. {f.rule} · {short(scope_text(f.scope.to_dict()), 40)}"
              + (f" (part of #{f.part_of})" if f.part_of else "") for f in top]
    fig = hbar_chart(labels, [f.impact_ms for f in top], [SEVERITY_COLORS[f.severity] for f in top],
                     "estimated saving (ms)",
                     [("finding", "@y"), ("title", "@title"), ("saving", "@value{0,0.000} ms"),
                      ("of wall time", "@pct{0.0}%"), ("counted by", "@part_of")],
                     extra={"title": [f.title for f in top], "pct": [f.impact_pct for f in top],
                            "part_of": [f"finding #{f.part_of}" if f.part_of else "itself" for f in top],
                            "href": [(link(f) if link else None) or "" for f in top]})
    if link:
        open_on_click(fig)
    return fig


def _saving_note(report: Report, findings: Sequence[Finding]) -> str:
    left = f" (the first {MAX_BARS} of {len(findings)} shown)" if len(findings) > MAX_BARS else ""
    return f"Findings ranked by the time fixing them is estimated to save{left}."


def filter_findings(report: Report, severities: Sequence[str], rules: Sequence[str],
                    ranks: Sequence[str]) -> list[Finding]:
    """The findings matching every non-empty filter (a rank filter leaves out findings without a rank)."""
    return [f for f in report.findings
            if (not severities or f.severity in severities) and (not rules or f.rule in rules)
            and (not ranks or str(f.scope.rank) in ranks)]

