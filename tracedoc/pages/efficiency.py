"""Efficiency page: MFU, HFU and MBU per rank and step with the peak they divide by (report.efficiency), a roofline
of the operators (achieved TFLOP/s against FLOPs per byte, each op sized by its GPU time) and the operator view
(report.operators)."""

from __future__ import annotations

import math
from typing import Any

from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from tracedoc.efficiency.render import unprofiled_lines
from tracedoc.pages import empty
from tracedoc.pages.charts import Section, kernel_short, short
from tracedoc.pages.fragments import Column, Html, esc, number, table_html
from tracedoc.report import Report

TITLE = "Efficiency"
ROUTE = "efficiency"

EFFICIENCY_HOW = ("MFU and MBU are measured on PyTorch traces recorded with torch.profiler.profile("
                  "record_shapes=True), or from --flops-per-step / --bytes-per-step")
# input kind (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    "timeline": f"No efficiency figures for these traces: {EFFICIENCY_HOW}.",
    "ncu": "An Nsight Compute profile measures kernels, not steps: its Nsight Compute page gives each kernel's "
           "throughput against the chip's peak.",
    "flight_recorder": "NCCL flight-recorder dumps hold no timeline to measure efficiency on.",
    "telemetry": "GPU telemetry holds no operators to count FLOPs from.",
    "other": f"No efficiency figures for these inputs: {EFFICIENCY_HOW}.",
}

STEP_COLUMNS = [Column("rank", "rank"), Column("step", "step"), Column("step_ms", "step ms", number(2), numeric=True),
                Column("mfu_pct", "MFU %", number(1), numeric=True),
                Column("hfu_pct", "HFU %", number(1), numeric=True),
                Column("achieved_tflops", "TFLOP/s", number(1), numeric=True),
                Column("mbu_pct", "MBU %", number(1), numeric=True),
                Column("achieved_gbps", "GB/s", number(0), numeric=True),
                Column("tflop", "model TFLOP", number(3), numeric=True),
                Column("gb", "GB moved", number(3), numeric=True), Column("bound", "bound"),
                Column("flop_model_coverage_pct", "modelled %", number(1), numeric=True),
                Column("peak_text", "peak", wide=True), Column("note", "unavailable because", wide=True)]
OP_COLUMNS = [Column("rank", "rank"), Column("op", "op", wide=True), Column("count", "calls", number(), numeric=True),
              Column("cpu_ms", "CPU ms", number(2), numeric=True), Column("gpu_ms", "GPU ms", number(2), numeric=True),
              Column("share_pct", "% of GPU work", number(1), numeric=True),
              Column("tflops", "TFLOP/s", number(1), numeric=True), Column("gbps", "GB/s", number(0), numeric=True),
              Column("intensity", "FLOP/B", number(1), numeric=True),
              Column("roofline_pct", "% of roofline", number(0), numeric=True), Column("dtype", "dtype"),
              Column("shape", "shape (most time)", wide=True),
              Column("kernel_text", "top kernel", wide=True, abbreviate=lambda text: kernel_short(text.split("; ")[0]))]


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
    rows = [{**r, "tflop": r["model_flops"] / 1e12 if r["model_flops"] is not None else None,
             "gb": r["bytes"] / 1e9 if r["bytes"] is not None else None,
             "step": "steady steps" if r["step"] is None else r["step"],
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
            "kernel_text": "; ".join(f"{k['name']} ×{k['count']}" for k in o["kernels"][:3])} for o in report.operators]
    peak = next((r["peak"] for r in report.efficiency if r["note"] is None), None)
    out.append(Section("Roofline of operators", note="Achieved TFLOP/s against arithmetic intensity (FLOPs per byte "
                                                     "moved), each op a circle sized by its GPU time; the lines are "
                                                     "the chip's peak FLOP/s and bandwidth. Ops without FLOPs are "
                                                     "not drawn.", items=[roofline_chart(report.operators, peak)]))
    out.append(Section("Operators", note="The aten ops with the most GPU time in the steady steps: the GPU time of the "
                                         "kernels each launched (nested ops included), its FLOPs and bytes from its "
                                         "shapes, and % of roofline: the time its work takes at peak, of its GPU "
                                         "time.", items=[table_html(ops, OP_COLUMNS)]))
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


def roofline_chart(operators: list[dict[str, Any]], peak: dict[str, Any] | None) -> Any:
    """Log-log roofline: one circle per (rank, op) with FLOPs, area by GPU time; the peak's roof when known."""
    pts = [o for o in operators if (o.get("tflops") or 0) > 0 and (o.get("intensity") or 0) > 0]
    top = max((o["gpu_ms"] or 0 for o in pts), default=1.0) or 1.0
    source = ColumnDataSource({
        "x": [o["intensity"] for o in pts], "y": [o["tflops"] for o in pts],
        "size": [8 + 32 * math.sqrt((o["gpu_ms"] or 0) / top) for o in pts],
        "op": [short(o["op"], 60) for o in pts], "rank": [o["rank"] for o in pts],
        "shape": [short(o.get("shape") or "", 80) for o in pts], "ms": [o["gpu_ms"] for o in pts],
        "roof": [o.get("roofline_pct") for o in pts]})
    fig = figure(x_axis_type="log", y_axis_type="log", height=420, sizing_mode="stretch_width",
                 x_axis_label="FLOPs per byte", y_axis_label="TFLOP/s", toolbar_location="above")
    if peak and peak.get("tflops") and peak.get("gbps"):
        xs = [min([0.5, *source.data["x"]]), peak["tflops"] * 1e3 / peak["gbps"],
              max([1e4, *source.data["x"]]) * 2]
        fig.line(xs, [min(x * peak["gbps"] / 1e3, peak["tflops"]) for x in xs], color="#c44e52", line_width=2)
    fig.scatter("x", "y", size="size", source=source, fill_alpha=0.5, color="#4c72b0")
    fig.add_tools(HoverTool(tooltips=[("op", "@op"), ("rank", "@rank"), ("shape", "@shape"), ("GPU ms", "@ms{0.00}"),
                                      ("TFLOP/s", "@y{0.0}"), ("FLOP/B", "@x{0.0}"), ("% of roofline", "@roof{0}")]))
    return fig
