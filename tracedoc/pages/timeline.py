"""Timeline page: lanes per rank (profiler steps, annotations, then each GPU device and stream), read from the
store for each view.

Each pan or zoom asks DuckDB for the view's time range only (analyses/timeline/lanes.sql). A view holding more
than DETAIL_MAX intervals comes back binned to at most one interval per lane, category and pixel column, and
datashader rasterizes it, so a trace of millions of events costs one scan per view and never a glyph per event;
a view with fewer comes back interval by interval, drawn as rectangles whose names show on hover.
"""

from __future__ import annotations

import threading

import datashader as ds
import holoviews as hv
import numpy as np
import pandas as pd
from holoviews.operation.datashader import datashade

from tracedoc.pages.charts import CATEGORY_COLORS
from tracedoc.store import Store

TITLE = "Timeline"
ROUTE = "timeline"
DETAIL_MAX = 5000   # intervals in view up to which each is drawn (with hover) instead of rasterized
RASTER_PX = 1600    # pixel columns of the raster
LANE_PX = 26

hv.extension("bokeh", logo=False)


class Timeline:
    """The lanes of a store and the intervals of any view, in ms from the earliest interval."""

    def __init__(self, store: Store, lock: threading.Lock) -> None:
        self.store, self.lock = store, lock
        with lock:
            store.include("timeline.lanes")
            self.labels = [r["label"] for r in store.query("SELECT label FROM timeline_lanes ORDER BY lane")]
            self.t0_ns, end_ns = store.con.execute("SELECT min(ts_ns), max(end_ns) FROM timeline_events").fetchone()
        self.span_ms = ((end_ns or 0) - (self.t0_ns or 0)) / 1e6

    def view(self, x0_ms: float, x1_ms: float) -> tuple[pd.DataFrame, bool]:
        """The intervals of [x0_ms, x1_ms): binned (True) when more than DETAIL_MAX, else each with its name."""
        x0 = int(self.t0_ns + x0_ms * 1e6)
        x1 = max(int(self.t0_ns + x1_ms * 1e6), x0 + 1)
        with self.lock:  # one scan for a zoomed-in view: the intervals, stopping as soon as there are too many
            frame = self.store.con.execute(
                "SELECT lane, category, name, ts_ns AS start_ns, end_ns FROM timeline_in_view(?, ?) LIMIT ?",
                [x0, x1, DETAIL_MAX + 1]).df()
            binned = len(frame) > DETAIL_MAX
            if binned:
                frame = self.store.con.execute("SELECT * FROM timeline_binned(?, ?, ?)",
                                               [x0, x1, max((x1 - x0) // RASTER_PX, 1)]).df()
        frame["x0"] = (frame["start_ns"] - self.t0_ns) / 1e6
        frame["x1"] = (frame["end_ns"] - self.t0_ns) / 1e6
        frame["category"] = pd.Categorical(frame["category"], categories=list(CATEGORY_COLORS))
        return frame, binned

    def draw(self, x_range: tuple[float, float] | None) -> hv.Overlay:
        """The plot of one view: a datashaded raster, or rectangles with hover when zoomed in far enough."""
        x0, x1 = (float(x) for x in x_range or (0.0, self.span_ms))  # floats: int bounds would recompile datashader
        frame, binned = self.view(x0, x1)
        lanes = len(self.labels)
        if binned:
            lane = frame["lane"].astype(float)
            raster = rasterize_intervals(pd.DataFrame({"x0": frame["x0"], "y0": lane, "x1": frame["x1"], "y1": lane,
                                                       "category": frame["category"]}), (x0, x1), lanes)
            frame = frame.iloc[0:0]
        else:
            raster = hv.RGB(np.zeros((1, 1, 4), dtype=np.uint8), bounds=(x0, -0.5, x1, lanes - 0.5))
        detail = pd.DataFrame({"x0": frame["x0"], "y0": frame["lane"] - 0.4, "x1": frame["x1"],
                               "y1": frame["lane"] + 0.4, "name": frame.get("name", pd.Series(dtype=str)),
                               "category": frame["category"].astype(str),
                               "dur_us": (frame["end_ns"] - frame["start_ns"]) / 1e3})
        rects = hv.Rectangles(detail, kdims=["x0", "y0", "x1", "y1"], vdims=["name", "category", "dur_us"]).opts(
            color=hv.dim("category").categorize(CATEGORY_COLORS, default="#999999"), line_width=0,
            tools=["hover"], hover_tooltips=[("name", "@name"), ("category", "@category"),
                                             ("start", "@x0{0,0.000} ms"), ("duration", "@dur_us{0,0.0} µs")])
        return raster * rects

    def plot(self) -> hv.DynamicMap:
        """The timeline as a DynamicMap redrawn on every pan and zoom of the x axis."""
        lanes = len(self.labels)
        dmap = hv.DynamicMap(self.draw, streams=[hv.streams.RangeX()])
        return dmap.opts(hv.opts.Overlay(
            responsive=True, height=min(max(120 + LANE_PX * lanes, 260), 1000), xlabel="time (ms)", ylabel="",
            yticks=list(enumerate(self.labels)), ylim=(-0.5, lanes - 0.5), invert_yaxis=True,
            default_tools=["xpan", "xwheel_zoom", "reset", "save"], active_tools=["xpan", "xwheel_zoom"],
            show_legend=False))


def rasterize_intervals(frame: pd.DataFrame, x_range: tuple[float, float], lanes: int) -> hv.RGB:
    """One pixel row per lane (x0..x1 at y0 = y1 = lane), coloured by category, with datashader."""
    return datashade(hv.Segments(frame, kdims=["x0", "y0", "x1", "y1"], vdims=["category"]),
                     aggregator=ds.count_cat("category"), color_key=CATEGORY_COLORS, min_alpha=255, dynamic=False,
                     width=RASTER_PX, height=lanes, x_range=x_range, y_range=(-0.5, lanes - 0.5))


def warm_up() -> None:
    """Compile datashader's aggregation once (numba), so the first rasterized view does not wait for it."""
    rasterize_intervals(pd.DataFrame({"x0": [0.0], "y0": [0.0], "x1": [1.0], "y1": [0.0],
                                      "category": pd.Categorical(["compute"], categories=list(CATEGORY_COLORS))}),
                        (0.0, 1.0), 1)

