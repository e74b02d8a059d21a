"""Timeline page: per rank, its profiler steps, its NVTX and record_function ranges by nesting depth, each host
thread's operators, CUDA API and OS calls, then each GPU device and stream; read from the store for each view.

Time 0 is the first activity recorded (of the earliest rank), so start-up and the steps before the analysed window
sit at positive times and a gap the report places "X ms into the trace" sits at X. Each pan or zoom asks DuckDB for
the view's time range only (analyses/timeline/lanes.sql). Steps and ranges (the marks) and the rest (the work) are
read apart: each comes back interval by interval, drawn as rectangles with names and hover, while the view holds at
most DETAIL_MAX of them, and else as each lane's busy time per pixel column, which datashader shades into an image
whose opacity is how busy the lane is in that pixel (a GPU busy 6 % of a pixel's time is a faint tint, not a solid
bar). A trace of millions of events thus costs one scan of the view per pan or zoom, never a glyph per event.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import datashader.transfer_functions as tf
import holoviews as hv
import numpy as np
import pandas as pd
import xarray as xr

from tracedoc.formats import ALLOCATOR_SNAPSHOTS, HANG_DUMPS, HEALTH, KERNEL_PROFILE
from tracedoc.measures import TIME_NS
from tracedoc.pages.charts import CATEGORY_COLORS, CATEGORY_LABELS
from tracedoc.pages.empty import OTHER
from tracedoc.report import Finding
from tracedoc.store import Store
from tracedoc.units import fmt_measure
from tracedoc.words.findings import finding_span

TITLE = "Timeline"
ROUTE = "timeline"

# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    KERNEL_PROFILE: "No timeline: an Nsight Compute profile replays each kernel on its own, so it holds no time line "
                    "of the run. Its kernels are on the ncu page.",
    HANG_DUMPS: "No timeline: NCCL flight-recorder dumps hold each rank's last collectives, not their timing on the "
                "GPU. They are on the Hang page.",
    HEALTH: "No timeline: GPU telemetry holds clocks, power and temperatures sampled over time, not the run's events. "
            "What it shows is in the Overview's findings.",
    ALLOCATOR_SNAPSHOTS: "No timeline: an allocator snapshot holds the caching allocator's history of allocations "
                         "and frees, not the run's kernels and host calls. Its curve is on the Memory page.",
    OTHER: "No timeline in these inputs.",
}

DETAIL_MAX = 5000   # intervals in view (marks and work each) up to which each is drawn, with its name on hover
RASTER_PX = 1600    # pixel columns of the shaded image
PLOT_PX = 1250      # the plot's width assumed for names written inside rectangles
LABEL_MIN_PX = 36   # narrowest rectangle that gets its name written in it
CHAR_PX = 6.5       # width of a character of those names
LEVEL_MIN_BINS = 4  # bins made in advance (timeline_levels) per pixel column from which a view is read from them
MIN_ALPHA = 40      # opacity (of 255) of a pixel with the least work in it; a fully busy pixel is opaque
LANE_PX = 22
FOCUS_PAD = 0.08    # share of a focused range shown either side of it

hv.extension("bokeh", logo=False)


def fmt_duration(ns: float) -> str:
    """A duration with 3–4 significant digits in the unit that reads best: '2.025 s', '12.35 ms', '812.4 µs',
    '350 ns'."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= scale:
            value = ns / scale
            return f"{value:,.{3 if value < 10 else 2 if value < 100 else 1}f} {unit}"
    return f"{ns:,.0f} ns"


def fmt_at(ms: float) -> str:
    """A point in time, ms after time zero, to the µs: '1,633.712 ms'."""
    return fmt_measure(ms * 1e6, TIME_NS)


@dataclass(frozen=True)
class Focus:
    """A time range (ms after time zero) and the ranks to show: where a finding or a slice of time points to."""

    x0_ms: float
    x1_ms: float
    ranks: tuple[int, ...] = ()

    def query(self) -> str:
        """The timeline page's URL query for it: '?start=…&end=…&ranks=0'."""
        args = {"start": f"{self.x0_ms:.6f}", "end": f"{self.x1_ms:.6f}"}
        if self.ranks:
            args["ranks"] = ",".join(str(r) for r in self.ranks)
        return "?" + urlencode(args)

    @classmethod
    def parse(cls, args: dict[str, Any]) -> Focus | None:
        """The focus of a URL query (Panel's session args: name → list of bytes), None when absent or malformed."""
        def first(name: str) -> str:
            values = args.get(name) or [b""]
            return values[0].decode(errors="replace") if isinstance(values[0], bytes) else str(values[0])
        try:
            x0, x1 = float(first("start")), float(first("end"))
            ranks = tuple(int(r) for r in first("ranks").split(",") if r.strip())
        except ValueError:
            return None
        return cls(x0, x1, ranks) if np.isfinite([x0, x1]).all() and x1 > x0 else None

    def padded(self) -> Focus:
        pad = (self.x1_ms - self.x0_ms) * FOCUS_PAD
        return Focus(self.x0_ms - pad, self.x1_ms + pad, self.ranks)


@dataclass(frozen=True)
class Grid:
    """The pixel columns of a view: RASTER_PX columns px_ns wide from x0_ns (ns on the trace's clock), read from
    the bins of ``level`` (None: from the intervals); ``x1_ns``: the view's end."""

    x0_ns: int
    px_ns: int
    level: int | None
    x1_ns: int

    @property
    def end_ns(self) -> int:
        return self.x0_ns + RASTER_PX * self.px_ns


@dataclass(frozen=True)
class Lane:
    lane: int
    rank: int
    label: str
    mark: bool


# The time axis: its zero is the first activity recorded (timeline.lanes' timeline_zero), so that start-up and the
# warm-up steps before the judged window are drawn at positive times.
TIME_AXIS = "time after the first activity recorded (ms)"


class Timeline:
    """The lanes of a store and the intervals of any view, in ms after the report's time zero."""

    def __init__(self, store: Store, lock: threading.Lock) -> None:
        self.store, self.lock = store, lock
        with lock:
            store.include("timeline.lanes")
            self.lanes = [Lane(**r) for r in store.query("SELECT lane, rank, label, mark FROM timeline_lanes "
                                                         "ORDER BY lane")]
            self.zero_ns = int(store.scalar("SELECT zero_ns FROM timeline_zero"))
            ((first, last),) = store.con.execute(
                "SELECT min(ts_ns), max(end_ns) FROM (SELECT ts_ns, end_ns FROM timeline_marks UNION ALL "
                "SELECT ts_ns, end_ns FROM timeline_work)").fetchall()
            windows = [r for r in store.query(
                "SELECT rank, min(start_ns) AS start_ns, max(end_ns) AS end_ns, min(capture_start_ns) AS first_ns "
                "FROM trace_windows GROUP BY rank") if r["start_ns"] is not None]
            self.windows = {r["rank"]: (self.ms(r["start_ns"]), self.ms(r["end_ns"])) for r in windows}
            self.origins = {r["rank"]: self.ms(r["first_ns"]) for r in windows}
            self.steps = {(r["rank"], r["step"]): (self.ms(r["ts_ns"]), self.ms(r["ts_ns"] + r["dur_ns"]))
                          for r in store.query("SELECT rank, step, min(ts_ns) AS ts_ns, max(ts_ns + dur_ns) - "
                                               "min(ts_ns) AS dur_ns FROM trace_steps GROUP BY rank, step")}
        self.start_ms = self.ms(first) if first is not None else 0.0
        self.end_ms = self.ms(last) if last is not None else 0.0
        self._levels: list[tuple[int, int, int]] | None = None

    @property
    def levels(self) -> list[tuple[int, int, int]]:
        """The levels of bins made in advance (timeline.bins: level, lo_ns, bin_ns), made on first use."""
        return self.make_bins()

    def make_bins(self) -> list[tuple[int, int, int]]:
        """Make the bins of the wide views, once, and return their levels. Only the timeline's views read them, not
        the overview's links, so the dashboard's first page does not wait for them
        (tracedoc.dashboard.source.Loading.finished makes them once it is shown)."""
        if self._levels is None:
            with self.lock:
                if self._levels is None:
                    self.store.include("timeline.bins")
                    self._levels = self.store.con.execute(
                        "SELECT level, lo_ns, bin_ns FROM timeline_levels ORDER BY level").fetchall()
        return self._levels

    @property
    def labels(self) -> list[str]:
        return [lane.label for lane in self.lanes]

    @property
    def ranks(self) -> list[int]:
        return sorted({lane.rank for lane in self.lanes})

    @property
    def span_ms(self) -> float:
        return self.end_ms - self.start_ms

    def ms(self, ns: float) -> float:
        """A time on the trace's clock (ns) as ms after time zero."""
        return (ns - self.zero_ns) / 1e6

    def lanes_of(self, ranks: Sequence[int] = ()) -> list[Lane]:
        """The lanes of ``ranks`` (all when empty), top to bottom."""
        return [lane for lane in self.lanes if not ranks or lane.rank in ranks]

    def grid(self, x0_ms: float, x1_ms: float) -> Grid:
        """The pixel columns of a view: RASTER_PX columns from x0 covering it; when a level of bins made in advance
        has at least LEVEL_MIN_BINS bins per column, aligned on its bins (a column: a whole number of them)."""
        x0 = int(self.zero_ns + x0_ms * 1e6)
        x1 = max(int(self.zero_ns + x1_ms * 1e6), x0 + 1)
        px_ns = max(-(-(x1 - x0) // RASTER_PX), 1)
        for level, lo_ns, bin_ns in self.levels:
            if px_ns >= LEVEL_MIN_BINS * bin_ns:
                start = lo_ns + (x0 - lo_ns) // bin_ns * bin_ns
                return Grid(start, -(-(x1 - start) // (RASTER_PX * bin_ns)) * bin_ns, level, x1)
        return Grid(x0, px_ns, None, x1)

    def view(self, x0_ms: float, x1_ms: float, ranks: Sequence[int] = ()) -> dict[str, tuple[pd.DataFrame, bool]]:
        """The view [x0_ms, x1_ms) of the marks and of the work: each (frame, binned). Intervals (binned False):
        lane, category, name, ts_ns, end_ns. Binned (more than DETAIL_MAX in view): lane, category, c0, c1,
        intervals, sum_s, sum_e (see timeline_binned) on the view's grid. A wide view of the work is binned from
        the bins made in advance (timeline_rebinned), a narrower one from the intervals."""
        grid = self.grid(x0_ms, x1_ms)
        x0, x1 = int(self.zero_ns + x0_ms * 1e6), grid.x1_ns
        shown = {lane.lane for lane in self.lanes_of(ranks)}
        out = {}
        with self.lock:
            for table in ("timeline_marks", "timeline_work"):
                frame: pd.DataFrame | None = None
                binned = False
                if table == "timeline_work" and grid.level is not None:
                    frame = self.store.con.execute("SELECT * FROM timeline_rebinned(?, ?, ?, ?)",
                                                   [grid.level, grid.x0_ns, grid.end_ns, grid.px_ns]).df()
                    binned = frame["intervals"].sum() > DETAIL_MAX
                if frame is None or not binned:  # one scan: the intervals, stopping as soon as there are too many
                    frame = self.store.con.execute("SELECT * FROM timeline_in_view(?, ?, ?, ?)",
                                                   [table, x0, x1, DETAIL_MAX + 1]).df()
                    binned = len(frame) > DETAIL_MAX
                    if binned:
                        frame = self.store.con.execute("SELECT * FROM timeline_binned(?, ?, ?, ?)",
                                                       [table, grid.x0_ns, grid.end_ns, grid.px_ns]).df()
                out[table.removeprefix("timeline_")] = (frame[frame["lane"].isin(shown)] if ranks else frame, binned)
        return out

    def draw(self, x_range: tuple[float, float] | None, ranks: Sequence[int] = ()) -> hv.Overlay:
        """The plot of one view: the shaded image of the binned part, rectangles (with hover) for the intervals,
        names written in the rectangles wide enough for them."""
        x0, x1 = (float(x) for x in x_range or (self.start_ms, self.end_ms))
        lanes = self.lanes_of(ranks)
        row = {lane.lane: i for i, lane in enumerate(lanes)}
        parts = self.view(x0, x1, ranks)
        grid = self.grid(x0, x1)
        binned = [frame for frame, is_binned in parts.values() if is_binned]
        raster = shade(busy_per_pixel(pd.concat(binned), row, grid.px_ns), grid.px_ns,
                       (self.ms(grid.x0_ns), self.ms(grid.end_ns))) if binned else \
            hv.RGB(np.zeros((1, 1, 4), dtype=np.uint8), bounds=(x0, -0.5, x1, len(lanes) - 0.5))
        detail = pd.concat([frame for frame, is_binned in parts.values() if not is_binned] or
                           [pd.DataFrame(columns=["lane", "category", "name", "ts_ns", "end_ns"])])
        rects = self.rectangles(detail, row, lanes)
        return raster * rects * names_inside(rects.data, (x0, x1))

    def rectangles(self, detail: pd.DataFrame, row: dict[int, int], lanes: list[Lane]) -> hv.Rectangles:
        """The intervals as rectangles in their lanes' rows, with hover text in readable units."""
        y = detail["lane"].map(row).to_numpy(float)
        ts, end = detail["ts_ns"].to_numpy(np.int64), detail["end_ns"].to_numpy(np.int64)
        start, stop = (ts - self.zero_ns) / 1e6, (end - self.zero_ns) / 1e6
        category = detail["category"].astype(str)
        frame = pd.DataFrame({
            "x0": start, "y0": y - 0.4, "x1": stop, "y1": y + 0.4, "name": detail["name"].astype(str).to_numpy(),
            "category": category.map(lambda c: CATEGORY_LABELS.get(c, c)).to_numpy(),
            "color": category.map(lambda c: CATEGORY_COLORS.get(c, "#999999")).to_numpy(),
            "lane": np.array([lane.label for lane in lanes] or [""], dtype=object)[y.astype(int)],
            "start": [fmt_at(v) for v in start.tolist()], "duration": [fmt_duration(v) for v in (end - ts).tolist()]})
        return hv.Rectangles(frame, kdims=["x0", "y0", "x1", "y1"],
                             vdims=["name", "category", "color", "lane", "start", "duration"]).opts(
            color="color", line_color="white", line_width=0.5, tools=["hover"],
            hover_tooltips=[("", "@name"), ("lane", "@lane"), ("category", "@category"), ("start", "@start"),
                            ("duration", "@duration")])

    def plot(self, ranks: Sequence[int] = (), focus: Focus | None = None) -> hv.DynamicMap:
        """The timeline of ``ranks`` (all when empty) as a DynamicMap redrawn on every pan and zoom of the time
        axis; the lanes' axis neither zooms nor pans. Opens on ``focus`` when given."""
        lanes = self.lanes_of(ranks)
        start = (focus.x0_ms, focus.x1_ms) if focus else (self.start_ms, self.end_ms)
        dmap = hv.DynamicMap(lambda x_range: self.draw(x_range, ranks), streams=[hv.streams.RangeX(x_range=start)])
        return dmap.opts(hv.opts.Overlay(
            responsive=True, height=min(max(90 + LANE_PX * len(lanes), 220), 1400), xlabel=TIME_AXIS, ylabel="",
            yticks=[(i, lane.label) for i, lane in enumerate(lanes)],
            xlim=start, ylim=(-0.5, len(lanes) - 0.5), invert_yaxis=True, show_legend=False,
            default_tools=["xpan", "xwheel_zoom", "xbox_zoom", "reset", "save"], active_tools=["xpan", "xwheel_zoom"],
            hooks=[time_axis_only]))

    def focus_of(self, finding: Finding) -> Focus | None:
        """Where a finding points on the timeline: its span (a gpu-gaps finding's longest gap), the step of a finding
        about one step, else the window of its rank; every rank's window, all ranks shown, for a finding without a
        rank or about ranks waiting for one another (a straggler and the ranks it holds up); None without a
        timeline."""
        if not self.lanes:
            return None
        rank = finding.scope.rank
        if rank is None or rank not in self.windows:
            return Focus(self.start_ms, self.end_ms)
        if finding.across_ranks:  # a straggler, a hot expert: seen beside the ranks that wait for it
            return Focus(min(w[0] for w in self.windows.values()), max(w[1] for w in self.windows.values()))
        window = self.windows[rank]
        span = finding_span(finding, window, {step: v for (r, step), v in self.steps.items() if r == rank}, 1.0,
                            self.origins[rank])
        if span is None or span == window:
            return Focus(*window, (rank,))
        return Focus(*span, (rank,)).padded()

    def focus_of_slice(self, rank: int, step: int | None) -> Focus | None:
        """Where a slice of 'Where the time went' lies: its step, or its rank's window before the first step (the
        prologue) or whole (a trace without steps)."""
        if rank not in self.windows:
            return None
        if step is not None:
            span = self.steps.get((rank, step))
            return Focus(*span, (rank,)).padded() if span else None
        window = self.windows[rank]
        firsts = [span[0] for (r, _), span in self.steps.items() if r == rank]
        return Focus(min(self.start_ms, window[0]), min(firsts) if firsts else window[1], (rank,)).padded()


def time_axis_only(plot: Any, element: Any) -> None:
    """Bokeh hook: wheel, drag and box zoom act on time only, the lanes' axis stays as it is, and tooltips open at
    the pointer."""
    fig = plot.state
    for tool in fig.toolbar.tools:
        if hasattr(tool, "dimensions"):
            tool.dimensions = "width"
        if hasattr(tool, "point_policy"):  # at the pointer, not at the middle of a range that may lie out of view
            tool.point_policy = "follow_mouse"
    lanes = len(fig.yaxis[0].ticker.ticks) if hasattr(fig.yaxis[0].ticker, "ticks") else None
    if lanes:
        fig.y_range.bounds = (-0.5, lanes - 0.5)
    fig.yaxis.major_label_text_font_size = "8.5pt"
    fig.ygrid.grid_line_color = None
    fig.xgrid.grid_line_alpha = 0.4


def busy_per_pixel(frame: pd.DataFrame, row: dict[int, int], px_ns: int) -> xr.DataArray:
    """Busy ns per row, pixel column and category from timeline_binned's rows: an interval covers the rest of its
    first column, every column between and the start of its last (exact, from the sums of starts and ends)."""
    categories = list(CATEGORY_COLORS)
    busy = np.zeros((max(len(row), 1), RASTER_PX + 1, len(categories)))
    frame = frame[frame["lane"].isin(row)]
    y = frame["lane"].map(row).to_numpy(int)
    k = pd.Categorical(frame["category"].astype(str), categories=categories).codes
    keep = k >= 0
    y, k = y[keep], k[keep]
    c0, c1 = frame["c0"].to_numpy(np.int64)[keep], frame["c1"].to_numpy(np.int64)[keep]
    n = frame["intervals"].to_numpy(float)[keep]
    sum_s, sum_e = frame["sum_s"].to_numpy(float)[keep], frame["sum_e"].to_numpy(float)[keep]
    c0, c1 = np.clip(c0, 0, RASTER_PX), np.clip(c1, 0, RASTER_PX)
    one = c0 == c1
    np.add.at(busy, (y[one], c0[one], k[one]), sum_e[one] - sum_s[one])
    many = ~one
    np.add.at(busy, (y[many], c0[many], k[many]), n[many] * (c0[many] + 1) * px_ns - sum_s[many])
    np.add.at(busy, (y[many], c1[many], k[many]), sum_e[many] - n[many] * c1[many] * px_ns)
    between = np.zeros_like(busy)  # whole columns c0+1 .. c1-1, as a running sum of steps
    np.add.at(between, (y[many], c0[many] + 1, k[many]), n[many] * px_ns)
    np.add.at(between, (y[many], c1[many], k[many]), -n[many] * px_ns)
    busy = (busy + np.cumsum(between, axis=1))[:, :RASTER_PX]
    busy[busy.sum(axis=2) <= 0] = np.nan  # no work: transparent
    return xr.DataArray(busy, dims=("y", "x", "category"),
                        coords={"y": np.arange(busy.shape[0]), "x": np.arange(RASTER_PX), "category": categories})


def shade(busy: xr.DataArray, px_ns: int, x_range: tuple[float, float]) -> hv.RGB:
    """The busy time as an image, one pixel row per lane (row 0 on top): each pixel in its categories' colours,
    mixed by their time, and as opaque as the lane is busy in it (MIN_ALPHA for the least work)."""
    image = tf.shade(busy, color_key=[CATEGORY_COLORS[c] for c in busy.coords["category"].values], how="linear",
                     span=(0, px_ns), min_alpha=MIN_ALPHA)
    rows = busy.shape[0]
    rgba = np.asarray(image.data).view(np.uint8).reshape(rows, RASTER_PX, 4)
    # HoloViews images hold their top row (the largest y) first; the plot's lanes axis is inverted (row 0 on top)
    return hv.RGB(rgba[::-1], bounds=(x_range[0], -0.5, x_range[1], rows - 0.5), vdims=list("RGBA"))


def names_inside(frame: pd.DataFrame, x_range: tuple[float, float]) -> hv.Labels:
    """Each rectangle's name (``frame``: the rectangles' data) written inside its part in view when that is wide
    enough, cut to fit ('step 3' for profiler steps), dark or light as its colour needs."""
    left, right = frame["x0"].clip(lower=x_range[0]), frame["x1"].clip(upper=x_range[1])
    px = (right - left) / max(x_range[1] - x_range[0], 1e-9) * PLOT_PX
    wide = px >= LABEL_MIN_PX
    text = [_fit(str(name).replace("ProfilerStep#", "step "), int(n / CHAR_PX))
            for name, n in zip(frame["name"][wide], px[wide])]
    return hv.Labels(pd.DataFrame({"x": ((left + right) / 2)[wide], "y": ((frame["y0"] + frame["y1"]) / 2)[wide],
                                   "text": text, "ink": frame["color"][wide].map(ink)}),
                     kdims=["x", "y"], vdims=["text", "ink"]).opts(text_font_size="7.5pt", text_color="ink")


def ink(color: str) -> str:
    """Dark text on a light colour, white on a dark one ('#rrggbb')."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#1d2330" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"


def _fit(text: str, chars: int) -> str:
    return text if len(text) <= chars else (text[: max(chars - 1, 1)] + "…" if chars > 2 else "")


def warm_up() -> None:
    """Shade a one-pixel image once, so the first zoomed-out view does not wait for datashader's first use."""
    busy = busy_per_pixel(pd.DataFrame({"lane": [0], "category": ["compute"], "c0": [0], "c1": [0],
                                        "intervals": [1], "sum_s": [0], "sum_e": [1]}), {0: 0}, 1)
    shade(busy, 1, (0.0, 1.0))
