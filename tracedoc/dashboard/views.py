"""The Panel views of the pages that have widgets: the overview's filters (and its links into the timeline) and the
timeline with its choice of ranks."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import panel as pn

from tracedoc.dashboard.panes import html_pane, sections_view
from tracedoc.pages import empty, overview
from tracedoc.pages.charts import CATEGORY_COLORS, CATEGORY_LABELS
from tracedoc.pages.fragments import Html, esc, message_html
from tracedoc.pages.timeline import DETAIL_MAX, EMPTY, MIN_ALPHA, Focus, Timeline
from tracedoc.report import SEVERITIES, Finding, Report

TIMELINE_URL = "./timeline"
ALL = "all"  # what an empty filter shows: it keeps every finding


def timeline_links(timeline: Timeline | None) -> overview.Links | None:
    """Links from the overview's findings and slices of time to where they lie on the timeline (None without one)."""
    if timeline is None or not timeline.lanes:
        return None

    def finding(f: Finding) -> str | None:
        focus = timeline.focus_of(f)
        return TIMELINE_URL + focus.query() if focus else None

    def slice_(rank: Any, step: Any) -> str | None:
        focus = timeline.focus_of_slice(rank, step) if isinstance(rank, int) else None
        return TIMELINE_URL + focus.query() if focus else None

    return overview.Links(finding, slice_)


def overview_view(report: Report, timeline: Timeline | None = None) -> Any:
    """The overview: filters above the sections, which redraw when a filter changes."""
    present = {f.severity for f in report.findings}
    severity = pn.widgets.MultiChoice(name="Severity", options=[s for s in SEVERITIES if s in present],
                                      placeholder=ALL)
    rule = pn.widgets.MultiChoice(name="Rule", options=sorted({f.rule for f in report.findings}), placeholder=ALL)
    rank = pn.widgets.MultiChoice(name="Rank", options=sorted({str(f.scope.rank) for f in report.findings
                                                               if f.scope.rank is not None}, key=int),
                                  placeholder=ALL)
    links = timeline_links(timeline)

    def draw(severities: list[str], rules: list[str], ranks: list[str]) -> Any:
        shown = overview.filter_findings(report, severities, rules, ranks)
        return sections_view(overview.sections(report, shown, links))

    filters = pn.Row(severity, rule, rank, sizing_mode="stretch_width")
    return pn.Column(filters, pn.bind(draw, severity, rule, rank), sizing_mode="stretch_width")


def legend_html() -> Html:
    keys = "".join(f'<span style="white-space:nowrap"><span style="display:inline-block;width:0.8em;height:0.8em;'
                   f'background:{color};margin:0 0.3em 0 1em;border-radius:2px"></span>'
                   f"{esc(CATEGORY_LABELS.get(name, name))}</span> " for name, color in CATEGORY_COLORS.items())
    return Html(f'<p class="note" style="line-height:1.7">{keys}</p>')


def timeline_missing(timeline: Timeline | None, report: Report | None) -> str | None:
    """Why there is no timeline to show (in the words of the inputs' format), or None when there is one."""
    if timeline is None:
        return ("No timeline: a saved report holds no events. Serve the traces (or their cached store, *.duckdb) to "
                "see it.")
    if not timeline.labels:
        return empty.worded(EMPTY, report)
    return None


def timeline_view(timeline: Timeline | None, args: dict[str, Any] | None = None, report: Report | None = None) -> Any:
    """The timeline page, opened where the URL's query points (``args``: Panel's session args), with the trace for
    Perfetto to download (given the ``report``), or the sentence saying why there is none."""
    if (why := timeline_missing(timeline, report)) is not None or timeline is None:
        return html_pane(message_html(why or ""))
    focus = Focus.parse(args or {})
    chosen = [str(r) for r in (focus.ranks if focus else ()) if r in timeline.ranks]
    ranks = pn.widgets.MultiChoice(name="Ranks", options=[str(r) for r in timeline.ranks], value=chosen, width=320,
                                   placeholder=ALL)
    note = Html('<p class="note">Time in ms after the first activity recorded (of the earliest rank), so start-up '
                "and the steps before the analysed window sit at positive times. Wheel or drag a box to zoom in "
                "time, drag to pan, the reset tool for the whole trace; hover a rectangle for its name and times. Per "
                "rank: its steps, its NVTX / record_function ranges by nesting depth, each host thread's outermost "
                "operators, CUDA API and OS calls, then each GPU stream. Views with more than "
                f"{DETAIL_MAX:,} intervals are shaded by how busy each lane is in each pixel (faint: a little work; "
                f"the least is {100 * MIN_ALPHA / 255:.0f} % opaque, a fully busy pixel solid); zoom in to see each "
                "interval.</p>")

    def plot(chosen_ranks: list[str]) -> Any:
        return pn.pane.HoloViews(timeline.plot(tuple(int(r) for r in chosen_ranks), focus),
                                 sizing_mode="stretch_width")

    tools = pn.Row(ranks, *([perfetto_download(timeline, report)] if report is not None else []),
                   sizing_mode="stretch_width")
    return pn.Column(html_pane(note), tools, html_pane(legend_html()), pn.bind(plot, ranks),
                     sizing_mode="stretch_width")


def perfetto_download(timeline: Timeline, report: Report) -> pn.widgets.FileDownload:
    """A button that writes the trace for Perfetto (`--format perfetto`: the timeline, the findings and the time
    attribution as tracks) from the served store and downloads it."""
    from tracedoc.export import perfetto

    def trace() -> io.BytesIO:
        with tempfile.TemporaryDirectory(prefix="tracedoc-perfetto-") as tmp, timeline.lock:
            path = Path(tmp) / "trace.perfetto.json"
            perfetto.write(timeline.store, report, path)
            return io.BytesIO(path.read_bytes())

    return pn.widgets.FileDownload(callback=trace, filename="trace.perfetto.json", button_type="primary",
                                   label="Download for Perfetto (ui.perfetto.dev)", width=300, margin=(28, 10, 0, 10))
