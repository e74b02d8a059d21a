"""What the pages are made of, and the chart kinds they share (Bokeh figures, drawn the same in the dashboard and
in the HTML report).

A page is a list of Sections: a title, a note, and items that are Bokeh models or escaped HTML fragments. A
section without data carries the sentence that says so (``empty``). Names from traces reach Bokeh only as data
(axis factors, tooltip fields), which Bokeh draws as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bokeh.models import ColorBar, ColumnDataSource, CustomJS, FactorRange, HoverTool, LinearColorMapper, TapTool
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from tracedoc.pages.names import kernel_short, short

__all__ = ["BAR_HEIGHT_PX", "CATEGORY_COLORS", "CATEGORY_LABELS", "Section", "hbar_chart", "heatmap", "kernel_short",
           "open_on_click", "own_frame", "short", "stacked_hbar_chart", "style"]

# GPU activity by category, then what the timeline draws of the host
CATEGORY_COLORS = {"compute": "#4c72b0", "communication": "#dd8452", "memcpy": "#55a868", "memset": "#8172b3",
                   "sync": "#c44e52", "step": "#9aa1ad", "range": "#937860", "cpu op": "#64b5cd",
                   "cuda api": "#e6b422", "os call": "#b8bcc4"}
CATEGORY_LABELS = {"range": "NVTX / annotation range", "cpu op": "CPU operator", "cuda api": "CUDA API call",
                   "os call": "OS call", "step": "profiler step"}
BAR_HEIGHT_PX = 22


@dataclass
class Section:
    """One titled block of a page."""

    title: str
    note: str = ""                                  # plain text under the title
    items: list[Any] = field(default_factory=list)  # Bokeh models and Html fragments, in order
    empty: str = ""                                 # when set: the data is missing, and this says which


def hbar_chart(factors: Sequence[Any], values: Sequence[float], colors: Sequence[str], x_label: str,
               tooltips: list[tuple[str, str]], extra: dict[str, Sequence[Any]] | None = None,
               x_axis_type: str = "linear", left: float = 0.0) -> Any:
    """Horizontal bars from ``left`` (above 0 on a log axis), the first factor on top; factors may be (group, label)
    tuples."""
    source = ColumnDataSource({"y": list(factors), "value": list(values), "color": list(colors), **(extra or {})})
    fig = figure(y_range=FactorRange(*reversed(list(factors))), height=60 + BAR_HEIGHT_PX * len(factors),
                 sizing_mode="stretch_width", toolbar_location=None, tools="", x_axis_type=x_axis_type)
    fig.hbar(y="y", left=left, right="value", height=0.75, color="color", source=source)
    fig.add_tools(HoverTool(tooltips=tooltips))
    style(fig, x_label)
    fig.yaxis.group_label_orientation = "horizontal"  # (group, label) factors: group names read left to right
    fig.x_range.start = left
    return fig


def stacked_hbar_chart(factors: Sequence[str], stacks: Mapping[str, Sequence[float]], colors: Sequence[str],
                       x_label: str) -> Any:
    """Horizontal stacked bars, one per factor, one colour per stack (with a legend)."""
    source = ColumnDataSource({"y": list(factors), **{k: list(v) for k, v in stacks.items()}})
    fig = figure(y_range=FactorRange(*reversed(list(factors))), height=90 + 2 * BAR_HEIGHT_PX * len(factors),
                 sizing_mode="stretch_width", toolbar_location=None, tools="")
    renderers = fig.hbar_stack(list(stacks), y="y", height=0.7, color=list(colors), source=source,
                               legend_label=list(stacks))
    for renderer in renderers:
        fig.add_tools(HoverTool(renderers=[renderer],
                                tooltips=[("", "@y"), (renderer.name, f"@{{{renderer.name}}}{{0,0.000}}")]))
    style(fig, x_label)
    fig.x_range.start = 0
    fig.legend.orientation = "horizontal"
    fig.legend.location = "top_right"
    fig.add_layout(fig.legend[0], "above")
    return fig


def heatmap(rows: Sequence[dict[str, Any]], x: str, y: str, value: str, unit: str,
            outline: Sequence[bool] | None = None, low: float | None = None, high: float | None = None,
            color: str | None = None, scale_title: str | None = None, palette: Sequence[str] = Viridis256) -> Any:
    """Cells labelled with ``value`` and coloured by ``color`` (``value`` by default) from ``low`` to ``high`` (the
    data's range by default) on categorical axes (x across, y down, in the order given).

    ``outline`` marks cells with a thick red border (e.g. the straggler's row).
    """
    xs = list(dict.fromkeys(str(r[x]) for r in rows))
    ys = list(dict.fromkeys(str(r[y]) for r in rows))
    values = [float(r[value]) if r[value] is not None else float("nan") for r in rows]
    shades = [float(r[color]) if r[color] is not None else float("nan") for r in rows] if color else values
    finite = [v for v in shades if v == v]
    low = low if low is not None else min(finite, default=0.0)
    high = high if high is not None else max(finite, default=1.0)
    mapper = LinearColorMapper(palette=list(palette), low=low, high=high, nan_color="#eeeeee")
    marks = list(outline or [False] * len(rows))
    source = ColumnDataSource({"x": [str(r[x]) for r in rows], "y": [str(r[y]) for r in rows], "value": values,
                               "shade": shades, "label": [f"{v:,.1f}" if v == v else "" for v in values],
                               "text_color": [_text_on(mapper, v) for v in shades],
                               "line": ["#e31a1c" if m else None for m in marks],
                               "line_width": [4 if m else 0 for m in marks]})
    cell_px = 34
    fig = figure(x_range=FactorRange(*xs), y_range=FactorRange(*reversed(ys)),
                 height=90 + cell_px * len(ys), sizing_mode="stretch_width", toolbar_location=None, tools="")
    fig.rect(x="x", y="y", width=1, height=1, source=source, fill_color={"field": "shade", "transform": mapper},
             line_color="line", line_width="line_width")
    fig.text(x="x", y="y", text="label", source=source, text_align="center", text_baseline="middle",
             text_font_size="9pt", text_color="text_color")
    fig.add_tools(HoverTool(tooltips=[(x, "@x"), (y, "@y"), (unit, "@value{0,0.000}")]
                            + ([(scale_title or color, "@shade{+0.0}")] if color else [])))
    fig.add_layout(ColorBar(color_mapper=mapper, title=scale_title or unit, width=10), "right")
    fig.xaxis.axis_label = x
    own_frame(fig)
    fig.grid.visible = False
    fig.axis.major_tick_line_color = None
    fig.axis.axis_line_color = None
    return fig


def _text_on(mapper: Any, v: float) -> str:
    """Dark text on the light part of the palette, white on the dark part."""
    if v != v:
        return "#1d2330"
    palette = mapper.palette
    share = (min(max(v, mapper.low), mapper.high) - mapper.low) / ((mapper.high - mapper.low) or 1)
    i = int(share * (len(palette) - 1))
    r, g, b = (int(palette[i][j:j + 2], 16) for j in (1, 3, 5))
    return "#1d2330" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def style(fig: Any, x_label: str) -> None:
    """The look every chart shares; ``own_frame`` too."""
    own_frame(fig)
    fig.xaxis.axis_label = x_label
    fig.ygrid.visible = False
    fig.outline_line_color = None
    fig.yaxis.major_label_text_font_size = "9pt"
    fig.toolbar.logo = None


def own_frame(fig: Any) -> None:
    """The chart's plot area starts after its own axis labels: Bokeh otherwise aligns the frames of the charts of a
    page (a dashboard column), so a chart with short labels ('rank 0') would keep the width of its neighbour's long
    ones (kernel names) empty."""
    fig.frame_align = False


# A glyph's ``href`` (a relative URL this code built) opened in the same tab; glyphs without one do nothing.
_OPEN_HREF = """
const i = cb_data.source.selected.indices[0];
const href = i === undefined ? "" : cb_data.source.data.href[i];
cb_data.source.selected.indices = [];
if (href && href.startsWith("./")) window.location.href = href;
"""


def open_on_click(fig: Any) -> None:
    """A click on a glyph of ``fig`` opens its data's ``href`` (e.g. the timeline at a finding's time range)."""
    fig.add_tools(TapTool(callback=CustomJS(code=_OPEN_HREF)))
    fig.toolbar.active_tap = fig.select_one(TapTool)
