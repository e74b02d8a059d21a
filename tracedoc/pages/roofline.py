"""The ncu page's roofline: each kernel's achieved FLOP/s against its arithmetic intensity, under the roofs of the
GPU's precisions, each roof in a colour of its own and named on its flat part, each kernel's dot in its roof's
colour, and the kernels' numbers placed where they overlap neither each other nor the dots (kernels that sit on one
spot share one label, '3, 4').

Where labels go is worked out on a nominal plot of PLOT_W × PLOT_H pixels: the chart stretches to the page's width,
so this is what it looks like at its usual size, close enough to keep labels apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bokeh.models import ColumnDataSource, HoverTool, Label
from bokeh.plotting import figure

from tracedoc.measures import TFLOPS
from tracedoc.pages.charts import style
from tracedoc.units import fmt_measure

ROOF_COLORS = ("#1b7837", "#c2410c", "#2563eb", "#a21caf", "#0f766e")  # one per precision's roof, in order
CUBLAS_COLOR = "#7d3c98"
PLOT_W, PLOT_H = 1000.0, 340.0  # the nominal plot area in pixels, for placing labels
MARK_PX = 6.0                    # a dot's radius
CHAR_W, LABEL_H = 7.0, 12.0      # a label character's width and a label's height in pixels
CLUSTER_PX = 10.0                # dots closer than this share one label
OFFSETS = ((9, 0, "left"), (-9, 0, "right"), (0, -13, "center"), (0, 13, "center"),
           (9, -12, "left"), (9, 12, "left"), (-9, -12, "right"), (-9, 12, "right"),
           (22, 0, "left"), (-22, 0, "right"), (0, -26, "center"), (0, 26, "center"))


@dataclass(frozen=True)
class Roof:
    """One precision's roof: its compute peak (TFLOP/s) and memory bandwidth (GB/s)."""

    precision: str
    tflops: float
    gbs: float

    @property
    def ridge(self) -> float:
        """FLOP per byte where the memory roof meets the compute roof."""
        return self.tflops * 1000 / self.gbs

    def at(self, intensity: float) -> float:
        """The roof's TFLOP/s at ``intensity`` FLOP per byte."""
        return min(self.tflops, intensity * self.gbs / 1000)


def roofs_of(points: Sequence[dict[str, Any]]) -> list[Roof]:
    """The distinct roofs of the points, lowest compute peak first."""
    found = {(p["precision"], float(p["peak_tflop_per_s"]), float(p["peak_gb_per_s"])) for p in points
             if p["peak_tflop_per_s"] and p["peak_gb_per_s"]}
    return [Roof(*r) for r in sorted(found, key=lambda r: (r[1], r[2], str(r[0])))]


@dataclass(frozen=True)
class Placed:
    """A label: the dot it belongs to (data coordinates), its text, and its offset (px, y downwards) and
    alignment."""

    x: float
    y: float
    text: str
    dx: float
    dy: float
    align: str


def place_labels(xs: Sequence[float], ys: Sequence[float], texts: Sequence[str],
                 x_range: tuple[float, float], y_range: tuple[float, float]) -> list[Placed]:
    """One label per group of dots that lie within CLUSTER_PX of each other (their texts joined by ', '), each at the
    first of OFFSETS where it overlaps no dot and no label placed before (else at the first)."""
    px = [_to_px(x, y, x_range, y_range) for x, y in zip(xs, ys)]
    groups = _clusters(px)
    dots = [(x - MARK_PX, y - MARK_PX, x + MARK_PX, y + MARK_PX) for x, y in px]
    taken: list[tuple[float, float, float, float]] = []
    out = []
    for group in sorted(groups, key=lambda g: min(g)):
        text = ", ".join(texts[i] for i in sorted(group, key=lambda i: _number(texts[i])))
        anchor = max(group, key=lambda i: (px[i][0], -px[i][1]))  # the right-most dot of the group
        ax, ay = px[anchor]
        width = CHAR_W * len(text)
        choice = None
        for dx, dy, align in OFFSETS:
            box = _box(ax + dx, ay + dy, width, align)
            others = [d for j, d in enumerate(dots) if j not in group] + taken
            if not any(_overlap(box, o) for o in others) and _inside(box):
                choice = (dx, dy, align, box)
                break
        if choice is None:
            dx, dy, align = OFFSETS[0]
            choice = (dx, dy, align, _box(ax + dx, ay + dy, width, align))
        taken.append(choice[3])
        out.append(Placed(xs[anchor], ys[anchor], text, choice[0], choice[1], choice[2]))
    return out


def _number(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


def _to_px(x: float, y: float, x_range: tuple[float, float], y_range: tuple[float, float]) -> tuple[float, float]:
    """A point of the log-log chart in nominal pixels, y downwards."""
    def share(v: float, lo: float, hi: float) -> float:
        span = math.log10(hi) - math.log10(lo)
        return (math.log10(max(v, 1e-300)) - math.log10(lo)) / span if span > 0 else 0.5
    return share(x, *x_range) * PLOT_W, (1 - share(y, *y_range)) * PLOT_H


def _clusters(px: Sequence[tuple[float, float]]) -> list[set[int]]:
    """Groups of dots linked by distances under CLUSTER_PX."""
    groups: list[set[int]] = []
    for i, (x, y) in enumerate(px):
        near = [g for g in groups if any(math.dist((x, y), px[j]) < CLUSTER_PX for j in g)]
        merged = {i}.union(*near)
        groups = [g for g in groups if g not in near] + [merged]
    return groups


def _box(x: float, y: float, width: float, align: str) -> tuple[float, float, float, float]:
    left = x if align == "left" else x - width if align == "right" else x - width / 2
    return left, y - LABEL_H / 2, left + width, y + LABEL_H / 2


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(box: tuple[float, float, float, float]) -> bool:
    return box[0] >= 0 and box[2] <= PLOT_W and box[1] >= 0 and box[3] <= PLOT_H


def roofline_chart(points: list[dict[str, Any]], label_of: Callable[[dict[str, Any]], str],
                   full_name: Callable[[dict[str, Any]], str], ceilings: Sequence[dict[str, Any]] = ()) -> Any:
    """Log-log roofline: each precision's roof in its own colour, named on its flat part; cuBLAS's measured FLOP/s
    on the products of the kernels (dashed, when the GEMM ladder's timings are given); one dot per kernel in its
    roof's colour (round: on the memory side of its roof, square: on the compute side), numbered with its # of the
    tables (``label_of``: '3. name')."""
    intensities = [float(p["arithmetic_intensity"]) for p in points]
    tflops = [float(p["tflop_per_s"]) for p in points]
    lo, hi = min(intensities) / 10, max(intensities) * 10
    roofs = roofs_of(points)
    measured = sorted({(c["product"], float(c["cublas_tflop_per_s"])) for c in ceilings if c["cublas_tflop_per_s"]})
    y_values = tflops + [r.at(lo) for r in roofs] + [r.tflops for r in roofs] + [t for _, t in measured]
    y_range = (min(y_values) / 2, max(y_values) * 4)  # room above the highest roof for its name
    fig = figure(x_axis_type="log", y_axis_type="log", height=420, sizing_mode="stretch_width",
                 toolbar_location="right", tools="pan,wheel_zoom,reset,save", y_range=y_range)
    color_of = {}
    for i, roof in enumerate(roofs):
        color = color_of[roof.precision] = ROOF_COLORS[i % len(ROOF_COLORS)]
        xs = [lo, max(min(roof.ridge, hi), lo), hi]
        fig.line(xs, [roof.at(x) for x in xs], line_color=color, line_width=2.5,
                 legend_label=f"{roof.precision} roof: {roof.tflops:,g} TFLOP/s, {roof.gbs:,g} GB/s")
        fig.add_layout(Label(x=hi, y=roof.tflops, text=f"{roof.precision}: {roof.tflops:,g} TFLOP/s",
                             text_align="right", text_baseline="bottom", y_offset=3, text_font_size="9pt",
                             text_color=color, text_font_style="bold"))
    for product, value in measured:
        fig.line([lo, hi], [value, value], line_color=CUBLAS_COLOR, line_dash="dashed", line_width=2,
                 legend_label=f"cuBLAS on {product}: {fmt_measure(value, TFLOPS)} (GEMM ladder)")
    numbers = [label_of(p).split(".")[0] for p in points]
    source = ColumnDataSource({
        "x": intensities, "y": tflops, "label": [label_of(p) for p in points],
        "kernel": [full_name(p) for p in points], "precision": [p["precision"] for p in points],
        "pct": [p["pct_of_roof"] for p in points], "side": [p["roof_side"] for p in points],
        "marker": ["square" if p["roof_side"] == "compute" else "circle" for p in points],
        "color": [color_of.get(p["precision"], "#6b7280") for p in points]})
    dots = fig.scatter("x", "y", size=11, marker="marker", fill_color="color", line_color="#1d2330",
                       source=source)
    placed = place_labels(intensities, tflops, numbers, (lo, hi), y_range)
    labels = ColumnDataSource({"x": [p.x for p in placed], "y": [p.y for p in placed],
                               "number": [p.text for p in placed], "dx": [p.dx for p in placed],
                               "dy": [p.dy for p in placed], "align": [p.align for p in placed]})
    fig.text("x", "y", text="number", source=labels, x_offset="dx", y_offset="dy", text_align="align",
             text_baseline="middle", text_font_size="9pt", text_color="#1d2330", text_font_style="bold")
    fig.add_tools(HoverTool(renderers=[dots], tooltips=[("", "@label"), ("kernel", "@kernel"),
                                                         ("precision", "@precision"),
                                                         ("TFLOP/s", "@y{0,0.000}"), ("FLOP/byte", "@x{0,0.00}"),
                                                         ("of roof", "@pct{0.0}%"), ("roof", "@side")]))
    style(fig, "arithmetic intensity (FLOP per DRAM byte)")
    fig.yaxis.axis_label = "TFLOP/s"
    if fig.legend:  # none when no point's roof is known
        fig.legend.location = "bottom_right"
    return fig
