"""The Panel views of the pages that have widgets: the overview's filters and the timeline."""

from __future__ import annotations

from typing import Any

import panel as pn

from tracedoc.dashboard.panes import html_pane, sections_view
from tracedoc.pages import overview
from tracedoc.pages.charts import CATEGORY_COLORS
from tracedoc.pages.fragments import Html, esc, message_html
from tracedoc.pages.timeline import DETAIL_MAX, Timeline
from tracedoc.report import SEVERITIES, Report


def overview_view(report: Report) -> Any:
    """The overview: filters above the sections, which redraw when a filter changes."""
    present = {f.severity for f in report.findings}
    severity = pn.widgets.MultiChoice(name="Severity", options=[s for s in SEVERITIES if s in present])
    rule = pn.widgets.MultiChoice(name="Rule", options=sorted({f.rule for f in report.findings}))
    rank = pn.widgets.MultiChoice(name="Rank", options=sorted({str(f.scope.rank) for f in report.findings
                                                               if f.scope.rank is not None}, key=int))

    def draw(severities: list[str], rules: list[str], ranks: list[str]) -> Any:
        return sections_view(overview.sections(report, overview.filter_findings(report, severities, rules, ranks)))

    filters = pn.Row(severity, rule, rank, sizing_mode="stretch_width")
    return pn.Column(filters, pn.bind(draw, severity, rule, rank), sizing_mode="stretch_width")


def timeline_view(timeline: Timeline | None) -> Any:
    """The timeline page, or the sentence saying why there is none."""
    if timeline is None:
        return html_pane(message_html("No timeline: a saved report holds no events. Serve the traces (or their "
                                      "cached store, *.duckdb) to see it."))
    if not timeline.labels:
        return html_pane(message_html("No timeline in these inputs (Nsight Compute profiles and flight-recorder "
                                      "dumps hold no timeline)."))
    keys = "".join(f'<span style="display:inline-block;width:0.8em;height:0.8em;background:{color};'
                   f'margin:0 0.3em 0 1em"></span>{esc(name)}' for name, color in CATEGORY_COLORS.items())
    note = Html(f'<p class="note">Wheel to zoom, drag to pan. Views with more than {DETAIL_MAX:,} intervals are '
                f"rasterized; zoom in further to see each interval and its name on hover.</p><p>{keys}</p>")
    return pn.Column(html_pane(note), pn.pane.HoloViews(timeline.plot(), sizing_mode="stretch_width"),
                     sizing_mode="stretch_width")
