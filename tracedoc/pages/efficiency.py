"""Efficiency page: MFU, HFU and MBU per rank and step with the peak they divide by (report.efficiency), a roofline
of the operators (achieved TFLOP/s against FLOPs per byte, each op sized by its GPU time) and the operator view
(report.operators)."""

from __future__ import annotations

import math
from typing import Any

from bokeh.models import ColumnDataSource, HoverTool, LabelSet
from bokeh.plotting import figure

from tracedoc.efficiency.render import unprofiled_lines
from tracedoc.formats import ALLOCATOR_SNAPSHOTS, HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.pages import empty
from tracedoc.pages.charts import Section, kernel_short, own_frame, short
from tracedoc.pages.fragments import Column, Html, esc, measured, table_html
from tracedoc.report import Report
from tracedoc.report_tables import EFFICIENCY, OPERATORS

TITLE = "Efficiency"
ROUTE = "efficiency"

EFFICIENCY_HOW = ("MFU and MBU are measured on PyTorch traces recorded with torch.profiler.profile("
                  "record_shapes=True), or from --flops-per-step / --bytes-per-step")
# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    TIMELINE: f"No efficiency figures for these traces: {EFFICIENCY_HOW}.",
    KERNEL_PROFILE: "An Nsight Compute profile measures kernels, not steps: its Nsight Compute page gives each "
                    "kernel's throughput against the chip's peak.",
    HANG_DUMPS: "NCCL flight-recorder dumps hold no timeline to measure efficiency on.",
    HEALTH: "GPU telemetry holds no operators to count FLOPs from.",
    ALLOCATOR_SNAPSHOTS: "An allocator snapshot holds allocations, not operators or step times to count FLOPs and "
                         "bytes against: see the Memory page.",
    empty.OTHER: f"No efficiency figures for these inputs: {EFFICIENCY_HOW}.",
}

_STEP = dict(EFFICIENCY).__getitem__  # what each column of the tables measures
_OP = OPERATORS.measure
STEP_COLUMNS = [Column("rank", "rank"), Column("step", "step"), measured("step_ms", "step ms", _STEP("step_ms")),
                measured("mfu_pct", "MFU %", _STEP("mfu_pct")),
                measured("hfu_pct", "HFU %", _STEP("hfu_pct")),
                measured("achieved_tflops", "TFLOP/s", _STEP("achieved_tflops")),
                measured("mbu_pct", "MBU %", _STEP("mbu_pct")),
                measured("achieved_gbps", "GB/s", _STEP("achieved_gbps")),
                measured("model_flops", "model TFLOP", _STEP("model_flops")),
                measured("bytes", "MiB moved", _STEP("bytes")), Column("bound", "bound"),
                measured("flop_model_coverage_pct", "modelled %", _STEP("flop_model_coverage_pct")),
                Column("peak_text", "peak", wide=True), Column("note", "unavailable because", wide=True)]
SHAPE_CHARS = 36  # the table's shapes and kernels are cut to this (the full text on hover): no sideways scroll
KERNEL_CHARS = 40
ROOFLINE_CAP = 100  # a share of roofline over this is shown as '>100': the byte model over-counts that op


def top_kernel_label(kernel_text: str) -> str:
    """The top kernel of an op's 'name ×count; …' as the table shows it: the name shortened (``kernel_short``),
    its count kept ('batch_norm_backward_kernel<…>(…) ×159'); shortening the name with its count attached left a
    kernel's whole argument list on the page."""
    name, times, count = kernel_text.split("; ")[0].rpartition(" ×")
    if not times or not count.isdigit():
        return kernel_short(kernel_text.split("; ")[0], KERNEL_CHARS)
    return f"{kernel_short(name, KERNEL_CHARS)} ×{count}"


OP_COLUMNS = [Column("rank", "rank"), Column("op", "op", wide=True), measured("count", "calls", _OP("count")),
              measured("cpu_ms", "CPU ms", _OP("cpu_ms")), measured("gpu_ms", "GPU ms", _OP("gpu_ms")),
              measured("share_pct", "% of GPU work", _OP("share_pct")),
              measured("tflops", "TFLOP/s", _OP("tflops")), measured("gbps", "GB/s", _OP("gbps")),
              measured("intensity", "FLOP/B", _OP("intensity")),
              measured("roofline_pct", "% of roofline", _OP("roofline_pct"), 0,
                       shown=lambda v, text: f">{ROOFLINE_CAP}" if v > ROOFLINE_CAP else text,
                       help="the time its modelled work takes at peak, % of its GPU time; over 100: the "
                            "op moved fewer bytes than its model counts (L2 served re-reads, or its "
                            "output is smaller than taken)"),
              Column("dtype", "dtype"),
              Column("shape", "shape (most time)", wide=True, abbreviate=lambda text: short(text, SHAPE_CHARS)),
              Column("kernel_text", "top kernel", wide=True, abbreviate=top_kernel_label)]


def has_data(report: Report) -> bool:
    """Whether the report holds operators to count FLOPs from, or an efficiency figure measured."""
    return bool(report.operators) or any(r.get("note") is None for r in report.efficiency)


def empty_sentence(report: Report) -> str:
    """Why there are no figures: the efficiency's own note where it gives one, else the inputs' format."""
    if notes := [r["note"] for r in report.efficiency if r.get("note")]:
        return f"MFU and MBU unavailable: {notes[0]}."
    return empty.worded(EMPTY, report)


def sections(report: Report) -> list[Section]:
    if not has_data(report):
        return [Section("MFU and MBU", empty=empty_sentence(report)), *_without_profiler(report)]
    rows = [{**r, "step": "steady steps" if r["step"] is None else r["step"],
             "peak_text": _peak_text(r["peak"])} for r in report.efficiency]
    sources = sorted({str(r["peak"]["source"]) for r in report.efficiency if r["peak"].get("source")})
    out = [Section("MFU and MBU", note="Per rank over its steady steps, then per step. MFU: the model's FLOPs (from "
                                       "the operators' shapes, recomputation left out) per second, % of the dense "
                                       "peak of their dtype; HFU counts recomputation; MBU: bytes moved per second, % "
                                       "of the HBM bandwidth. Peaks: " + "; ".join(sources) + ".",
                items=[table_html(rows, STEP_COLUMNS)])]
    out += _without_profiler(report)
    if not report.operators:
        return out
    ops = [{**o, "tflops": o["tflops"] or None, "intensity": o["intensity"] or None,
            "kernel_text": "; ".join(f"{k['name']} ×{k['count']}" for k in top_kernels(o["kernels"])[:3])}
           for o in report.operators]
    columns = OP_COLUMNS if len({o["rank"] for o in ops}) > 1 else OP_COLUMNS[1:]  # one rank: no rank column
    peak = next((r["peak"] for r in report.efficiency if r["note"] is None), None)
    out.append(Section("Roofline of operators", note="Achieved TFLOP/s against arithmetic intensity (FLOPs per byte "
                                                     "moved), each op a circle sized by its GPU time; the lines are "
                                                     "the chip's peak FLOP/s and bandwidth; the largest are "
                                                     "labelled. Ops that do no FLOPs (copies, norms, elementwise) "
                                                     f"are squares at {NO_FLOP_INTENSITY} FLOP/B on the bandwidth "
                                                     "side, as high as the bandwidth they reach: their distance "
                                                     "below the slanted roof is their share of peak bandwidth.",
                       items=[roofline_chart(report.operators, peak)]))
    out.append(Section("Operators", note="The aten ops with the most GPU time in the steady steps: the GPU time of the "
                                         "kernels each launched (nested ops included), its FLOPs and bytes from its "
                                         "shapes, and % of roofline: the time its work takes at peak, of its GPU "
                                         f"time (over {ROOFLINE_CAP}: the op moved fewer bytes than its model "
                                         "counts, as when L2 serves its re-reads or its output is smaller than its "
                                         "largest input). The top kernel is its longest kernel; copies and "
                                         "memsets come after kernels.", items=[table_html(ops, columns)]))
    return out


def _without_profiler(report: Report) -> list[Section]:
    """The step without the profiler per rank (efficiency.observer), or the step time the user gave; none without
    either."""
    lines = [line for r in report.efficiency if r["step"] is None for line in unprofiled_lines(r)]
    if not lines:
        return []
    return [Section("Without the profiler", note="The figures above are the profiled step's. The profiler slows the "
                                                 "host it watches; where the host sets the pace, the run without it "
                                                 "is faster: the estimate, from the trace's own host events "
                                                 "(docs/efficiency.md).",
                    items=[Html("".join(f"<p>{esc(line)}</p>" for line in lines))])]


def _peak_text(peak: dict[str, Any]) -> str:
    if peak.get("tflops") is None:
        return ""
    return (f"{peak.get('gpu') or peak.get('device_name')}: {peak['tflops']:g} TFLOP/s {peak.get('dtype')}, "
            f"{peak.get('gbps') or 0:g} GB/s")


NO_FLOP_INTENSITY = 0.05  # where the roofline draws ops without FLOPs: left of every op that does FLOPs
LABELLED_POINTS = 6


def top_kernels(kernels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An op's kernels, longest first, with copies and memsets (a DtoD memcpy) after the compute kernels: the
    top kernel is what the op computes with, not the copy beside it."""
    return sorted(kernels, key=lambda k: str(k["name"]).lower().startswith(("memcpy", "memset")))


# A point this close (log10: its label's width across, a line and a half up or down, as the chart is drawn) to a
# larger labelled one gets no label.
LABEL_APART_X, LABEL_APART_Y = 0.6, 0.45


def roofline_position(op: dict[str, Any]) -> tuple[float, float]:
    """Where the roofline draws an op, log10 of (FLOP/B, TFLOP/s): ops without FLOPs at NO_FLOP_INTENSITY."""
    if (op.get("tflops") or 0) > 0 and (op.get("intensity") or 0) > 0:
        return math.log10(op["intensity"]), math.log10(op["tflops"])
    return math.log10(NO_FLOP_INTENSITY), math.log10(max(NO_FLOP_INTENSITY * (op.get("gbps") or 0) / 1e3, 1e-12))


def labelled_ops(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The LABELLED_POINTS largest of ``ops`` (largest first) whose labels do not overlap a larger one's: two ops at
    one spot (aten::conv2d beside aten::convolution_backward, batch_norm beside its backward) wrote one name over
    the other."""
    kept: list[dict[str, Any]] = []
    for op in ops:
        if len(kept) == LABELLED_POINTS:
            break
        x, y = roofline_position(op)
        if all(abs(x - kx) > LABEL_APART_X or abs(y - ky) > LABEL_APART_Y
               for kx, ky in map(roofline_position, kept)):
            kept.append(op)
    return kept


def roofline_chart(operators: list[dict[str, Any]], peak: dict[str, Any] | None) -> Any:
    """Log-log roofline: one circle per (rank, op) with FLOPs, area by GPU time; one square per op with bytes and
    no FLOPs, at NO_FLOP_INTENSITY and the TFLOP/s its bandwidth gives there (its height against the slanted roof
    is its share of peak bandwidth); the peak's roof when known; the largest points labelled."""
    flop_ops = [o for o in operators if (o.get("tflops") or 0) > 0 and (o.get("intensity") or 0) > 0]
    byte_ops = [o for o in operators if not (o.get("flops") or 0) and (o.get("gbps") or 0) > 0]
    top = max((o["gpu_ms"] or 0 for o in flop_ops + byte_ops), default=1.0) or 1.0

    def points(ops: list[dict[str, Any]], xs: list[float], ys: list[float]) -> ColumnDataSource:
        return ColumnDataSource({
            "x": xs, "y": ys, "size": [8 + 32 * math.sqrt((o["gpu_ms"] or 0) / top) for o in ops],
            "op": [short(o["op"], 60) for o in ops], "label": [short(str(o["op"]).removeprefix("aten::"), 24)
                                                               for o in ops],
            "rank": [o["rank"] for o in ops], "shape": [short(o.get("shape") or "", 80) for o in ops],
            "ms": [o["gpu_ms"] for o in ops], "gbps": [o.get("gbps") for o in ops],
            "tflops": [o.get("tflops") or 0.0 for o in ops], "intensity": [o.get("intensity") or 0.0 for o in ops],
            "roof": [o.get("roofline_pct") for o in ops]})

    flops = points(flop_ops, [o["intensity"] for o in flop_ops], [o["tflops"] for o in flop_ops])
    nonflop = points(byte_ops, [NO_FLOP_INTENSITY] * len(byte_ops),
                     [NO_FLOP_INTENSITY * o["gbps"] / 1e3 for o in byte_ops])
    fig = figure(x_axis_type="log", y_axis_type="log", height=420, sizing_mode="stretch_width",
                 x_axis_label="FLOPs per byte", y_axis_label="TFLOP/s", toolbar_location="above")
    own_frame(fig)
    if peak and peak.get("tflops") and peak.get("gbps"):
        xs = [min([NO_FLOP_INTENSITY / 2, *flops.data["x"]]), peak["tflops"] * 1e3 / peak["gbps"],
              max([1e4, *flops.data["x"]]) * 2]
        fig.line(xs, [min(x * peak["gbps"] / 1e3, peak["tflops"]) for x in xs], color="#c44e52", line_width=2)
    fig.scatter("x", "y", size="size", source=flops, fill_alpha=0.5, color="#4c72b0",
                legend_label="ops with FLOPs")
    if byte_ops:
        fig.scatter("x", "y", size="size", source=nonflop, fill_alpha=0.5, color="#dd8452", marker="square",
                    legend_label=f"ops without FLOPs (at {NO_FLOP_INTENSITY} FLOP/B)")
    largest = labelled_ops(sorted(flop_ops + byte_ops, key=lambda o: -(o["gpu_ms"] or 0)))
    for source, ops in ((flops, flop_ops), (nonflop, byte_ops)):
        keep = [i for i, o in enumerate(ops) if any(o is big for big in largest)]
        if keep:
            labels = ColumnDataSource({k: [v[i] for i in keep] for k, v in source.data.items()})
            fig.add_layout(LabelSet(x="x", y="y", text="label", source=labels, x_offset=6, y_offset=4,
                                    text_font_size="9pt", text_color="#1d2330"))
    fig.legend.location = "top_left"
    fig.legend.label_text_font_size = "9pt"
    fig.add_tools(HoverTool(tooltips=[("op", "@op"), ("rank", "@rank"), ("shape", "@shape"), ("GPU ms", "@ms{0.00}"),
                                      ("TFLOP/s", "@tflops{0.0}"), ("GB/s", "@gbps{0}"),
                                      ("FLOP/B", "@intensity{0.0}"),
                                      ("% of roofline", "@roof{0}")]))
    return fig
