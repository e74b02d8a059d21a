"""'Where the time went': each GPU's time attributed once to exclusive causes (the report's ``attribution``, which
the findings' savings are drawn from), as a stacked bar per rank, device and step, and each GPU's shares in a table.

The section is part of the overview page and of the HTML report. Reports without a GPU timeline (Nsight Compute,
flight-recorder dumps, telemetry) have no attribution rows and get no section. Causes are stacked in one fixed
order with fixed colours (CAUSE_COLORS); the data source's columns are named by position (``s0``, ``s1``…), never
by cause, so nothing from a report reaches a tooltip template, only its data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Legend, LegendItem
from bokeh.plotting import figure

from tracedoc.causes import window_rows
from tracedoc.pages import waits
from tracedoc.pages.charts import Section, open_on_click, style
from tracedoc.pages.fragments import CAUSE_COLORS, attribution_table_html, cause_color
from tracedoc.report import Report
from tracedoc.units import fmt_ms
from tracedoc.words.attribution import cause_label, window_text

MAX_DEVICES = 8   # rank·GPU groups charted (the table lists all)
MAX_STEPS = 40    # steps charted per rank·GPU (the first ones)
MAX_DETAILS = 3   # details named per bar segment in the tooltip
ROTATE_AT = 16    # bars from which the step labels stand upright
BEFORE_STEPS, WHOLE_WINDOW = "before the first step", "whole window"


@dataclass
class Bar:
    """One step (or the window's time before the first step, or the whole window) of one rank's GPU: ms per cause
    and per cause's details."""

    group: str
    label: str
    rank: Any = None
    step: Any = None  # None: before the first step (or the whole window)
    ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    details: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))

    @property
    def total(self) -> float:
        return sum(self.ms.values())


def section(report: Report, link: Callable[[Any, Any], str | None] | None = None) -> Section | None:
    """The overview's 'Where the time went', or None when the report attributes no time; with ``link`` (rank, step
    → URL), a click on a bar opens the timeline at that step."""
    rows = window_rows(report.attribution)
    if not rows:
        return None
    bars, devices = bars_of(rows)
    left = f" Charted: the first {MAX_DEVICES} of {devices} GPUs; the table lists all." if devices > MAX_DEVICES else ""
    window = window_text(report)
    note = ("Each GPU's window attributed once to one cause, per step; the findings' savings are drawn from it. "
            "Hover a segment for its details and share of the step"
            + ("; click it to see the step on the timeline." if link else ".")
            + left + (f" {waits.OVERVIEW}" if waits.waits_for_peers(report) else "") + (f" {window}" if window else ""))
    return Section("Where the time went", note=note,
                   items=[attribution_chart(bars, link), attribution_table_html(rows)])


def bars_of(rows: Sequence[dict[str, Any]]) -> tuple[list[Bar], int]:
    """The bars to chart, per rank·GPU in rank order, the window's time before its first step first, then the
    steps in order; and how many rank·GPU groups there are in all."""
    per_device: dict[tuple[Any, Any], dict[Any, Bar]] = defaultdict(dict)
    for row in rows:
        key = (row["rank"], row["device"])
        bar = per_device[key].get(row["step"])
        if bar is None:
            bar = per_device[key][row["step"]] = Bar(f"rank {row['rank']} · GPU {row['device']}", "",
                                                     row["rank"], row["step"])
        ms = float(row["ms"] or 0.0)
        bar.ms[row["cause"]] += ms
        if row.get("detail"):
            bar.details[row["cause"]][str(row["detail"])] += ms
    out: list[Bar] = []
    for key in sorted(per_device, key=lambda k: tuple(map(_sort_key, k)))[:MAX_DEVICES]:
        steps = per_device[key]
        numbered = sorted((s for s in steps if s is not None), key=_sort_key)
        for step in ([None] if None in steps else []) + numbered[:MAX_STEPS]:
            bar = steps[step]
            bar.label = (BEFORE_STEPS if numbered else WHOLE_WINDOW) if step is None else f"step {step}"
            out.append(bar)
    return out, len(per_device)


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers in numeric order, then anything else (a saved report's) by its text."""
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def causes_of(bars: Sequence[Bar]) -> list[str]:
    """The causes present, in the fixed stacking order; unknown ones after, by name."""
    present = {c for b in bars for c, ms in b.ms.items() if ms > 0}
    return [c for c in CAUSE_COLORS if c in present] + sorted(present - set(CAUSE_COLORS))


def detail_text(details: dict[str, float]) -> str:
    """'h2d 0.570 ms, forward 0.373 ms, +2 more': a segment's details, largest first (a single one by its name
    alone: the tooltip gives its time)."""
    ordered = sorted(details.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(ordered) == 1:
        return ordered[0][0]
    text = ", ".join(f"{name} {fmt_ms(ms)}" for name, ms in ordered[:MAX_DETAILS])
    return text + (f", +{len(ordered) - MAX_DETAILS} more" if len(ordered) > MAX_DETAILS else "")


def attribution_chart(bars: Sequence[Bar], link: Callable[[Any, Any], str | None] | None = None) -> Any:
    """Stacked vertical bars, one per rank·GPU and step, ms per cause; the legend names the causes. With ``link``,
    a click on a bar opens the timeline there."""
    causes = causes_of(bars)
    factors = [(b.group, b.label) for b in bars]
    data: dict[str, list[Any]] = {"x": factors, "where": [f"{b.group}, {b.label}" for b in bars],
                                  "href": [(link(b.rank, b.step) if link else None) or "" for b in bars]}
    for i, cause in enumerate(causes):  # columns named by position: a cause's name never enters a template
        data[f"s{i}"] = [b.ms.get(cause, 0.0) for b in bars]
        data[f"pct{i}"] = [100.0 * b.ms.get(cause, 0.0) / b.total if b.total else 0.0 for b in bars]
        data[f"detail{i}"] = [detail_text(b.details.get(cause, {})) for b in bars]
        data[f"label{i}"] = [cause_label(cause)] * len(bars)
    fig = figure(x_range=FactorRange(*factors), height=380, sizing_mode="stretch_width", toolbar_location=None,
                 tools="")
    stackers = [f"s{i}" for i in range(len(causes))]
    renderers = fig.vbar_stack(stackers, x="x", width=0.8 if len(bars) > 2 else 0.5,
                               color=[cause_color(c) for c in causes], line_color="white", line_width=0.5,
                               source=ColumnDataSource(data))
    for i, renderer in enumerate(renderers):
        fig.add_tools(HoverTool(renderers=[renderer], tooltips=[
            ("cause", f"@label{i}"), ("where", "@where"), ("detail", f"@detail{i}"),
            ("time", f"@s{i}{{0,0.000}} ms"), ("share", f"@pct{i}{{0.0}}% of the step")]))
    # the legend lists the causes top to bottom as they are stacked
    legend = Legend(items=[LegendItem(label=cause_label(c), renderers=[r])
                           for c, r in reversed(list(zip(causes, renderers)))],
                    location="top_left", label_text_font_size="9pt", glyph_width=14, glyph_height=14)
    fig.add_layout(legend, "right")
    style(fig, "")
    fig.yaxis.axis_label = "ms"
    fig.y_range.start = 0
    fig.xgrid.visible = False
    fig.ygrid.visible = True
    fig.xaxis.group_label_orientation = "horizontal"
    fig.xaxis.group_text_font_size = "10pt"
    fig.xaxis.group_text_color = "#1d2330"
    fig.xaxis.major_label_orientation = "vertical" if len(bars) >= ROTATE_AT else "horizontal"
    fig.xaxis.major_label_text_font_size = "9pt"
    if link:
        open_on_click(fig)
    return fig
