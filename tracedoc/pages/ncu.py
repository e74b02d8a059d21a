"""Kernel detail from Nsight Compute: speed of light and occupancy per kernel, dominant warp stalls, roofline
points, and ncu's own verdicts beside tracedoc's (metrics ncu_kernels, ncu_warp_stalls, ncu_roofline,
ncu_coverage, ncu_rules_vs_tracedoc). A kernel is one function at one launch configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bokeh.models import ColumnDataSource, HoverTool
from bokeh.plotting import figure

from tracedoc.pages.charts import Section, hbar_chart, heatmap, kernel_short, short, style
from tracedoc.pages.fragments import Column, number, table_html
from tracedoc.report import Report

TITLE = "ncu"
ROUTE = "ncu"
MAX_KERNELS = 12

UNITS = (("sm_pct", "SM"), ("mem_pct", "memory"), ("dram_pct", "DRAM"), ("l2_pct", "L2"), ("l1_pct", "L1/TEX"),
         ("tensor_pct", "tensor pipe"), ("achieved_occupancy_pct", "occupancy"),
         ("theoretical_occupancy_pct", "occupancy limit"))

KERNEL_COLUMNS = [Column("label", "#"), Column("kernel", "kernel", wide=True, abbreviate=kernel_short),
                  Column("grid", "grid"),
                  Column("block", "block"), Column("launches", "launches", number(), numeric=True),
                  Column("total_ms", "total ms", number(3), numeric=True), Column("kernel_class", "class"),
                  Column("busiest_unit", "busiest unit"),
                  Column("busiest_unit_pct", "busiest %", number(1), numeric=True),
                  Column("waves", "waves", number(2), numeric=True),
                  Column("registers_per_thread", "registers", number(), numeric=True),
                  Column("device_name", "GPU")]
VERDICT_COLUMNS = [Column("label", "#"), Column("ncu_rule", "ncu rule"), Column("ncu_title", "ncu says", wide=True),
                   Column("ncu_speedup_pct", "ncu est. speed-up %", number(1), numeric=True),
                   Column("tracedoc_view", "tracedoc", wide=True)]
CEILING_COLUMNS = [Column("label", "#"), Column("kernel", "kernel", wide=True, abbreviate=kernel_short),
                   Column("product", "m×n×k"),
                   Column("dtype", "cuBLAS dtype"), Column("tflop_per_s", "TFLOP/s", number(1), numeric=True),
                   Column("cublas_tflop_per_s", "cuBLAS TFLOP/s", number(1), numeric=True),
                   Column("pct_of_cublas", "% of cuBLAS", number(1), numeric=True),
                   Column("sm_clock_mhz", "SM MHz (ncu)", number(0), numeric=True),
                   Column("cublas_sm_clock_mhz", "SM MHz (cuBLAS)", number(0), numeric=True),
                   Column("saving_ms", "saving ms", number(3), numeric=True)]


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return row["rank"], row["kernel"], row["grid"], row["block"]


def sections(report: Report) -> list[Section]:
    kernels = report.metrics.get("ncu_kernels") or []
    if not kernels:
        return [Section("Kernel detail", empty="No Nsight Compute profile in these inputs (ncu --set full -o "
                                               "kernels python app.py, then tracedoc analyze kernels.ncu-rep).")]
    label = {_key(k): f"{i}. {short(kernel_short(k['kernel']), 36)}" for i, k in enumerate(kernels, 1)}
    shown = kernels[:MAX_KERNELS]
    left = f" The first {MAX_KERNELS} of {len(kernels)} kernels are charted." if len(kernels) > MAX_KERNELS else ""
    cells = [{"kernel": label[_key(k)], "unit": name, "pct": k[key]} for k in shown for key, name in UNITS]
    out = [Section("Speed of light and occupancy",
                   note="% of peak per unit (SM and memory throughput, busiest memory level, tensor pipe) and "
                        "achieved occupancy against its limit, kernels by total time." + left,
                   items=[heatmap(cells, "unit", "kernel", "pct", "%", low=0.0, high=100.0)])]
    charted = {_key(k) for k in shown}
    stalls = [s for s in report.metrics.get("ncu_warp_stalls") or [] if _key(s) in charted]
    if stalls:
        out.append(Section("Warp stall reasons",
                           note="The top stall reasons of each kernel, % of stall cycles; red: reasons tracedoc "
                                "judges (the others, such as 'not selected', are not a problem by themselves).",
                           items=[stall_chart(stalls, label)]))
    points = [r for r in report.metrics.get("ncu_roofline") or []
              if (r["arithmetic_intensity"] or 0) > 0 and (r["tflop_per_s"] or 0) > 0 and _key(r) in label]
    if points:
        out.append(Section("Roofline", note="Each kernel's achieved FLOP/s against its arithmetic intensity "
                                            "(FLOP per DRAM byte), under the GPU's memory and compute roofs, "
                                            "labelled with its # of the tables; blue: on the memory side of the "
                                            "roof, orange: on the compute side.",
                           items=[roofline_chart(points, label, report.metrics.get("ncu_cublas_ceiling") or [])]))
    ceiling = [{**c, "label": label[_key(c)].split(".")[0]} for c in report.metrics.get("ncu_cublas_ceiling") or []
               if _key(c) in label]
    offered = report.metrics.get("gemm_ladder_cublas") or []
    if ceiling:
        out.append(Section("Against cuBLAS", note="GEMM kernels beside cuBLAS on a product of the same size and GPU "
                                                  "model, as the GEMM ladder measured it (gemm_ladder.json); the size "
                                                  "comes from the kernel's FLOP count. ncu locks clocks, cuBLAS ran "
                                                  "at the GPU's own: both are shown.",
                           items=[table_html(ceiling, CEILING_COLUMNS)]))
    elif offered:
        timed = "; ".join(f"{gpu}: {', '.join(dict.fromkeys(o['product'] for o in offered if o['gpu'] == gpu))}"
                          for gpu in dict.fromkeys(o["gpu"] for o in offered))
        out.append(Section("Against cuBLAS", empty=f"The GEMM ladder timed cuBLAS on {timed}; no GEMM kernel of "
                                                   "these reports ran on that GPU model with the FLOP count of one "
                                                   "of those products (or the timings were host-bound)."))
    out.append(Section("Kernels", note=_coverage_note(report),
                       items=[table_html([{**k, "label": label[_key(k)].split(".")[0]} for k in kernels],
                                         KERNEL_COLUMNS)]))
    verdicts = [{**v, "label": label[_key(v)].split(".")[0]} for v in report.metrics.get("ncu_rules_vs_tracedoc") or []
                if _key(v) in label]
    if verdicts:
        out.append(Section("ncu's verdicts and tracedoc's", items=[table_html(verdicts, VERDICT_COLUMNS)]))
    return out


def stall_chart(stalls: list[dict[str, Any]], label: dict[tuple[Any, ...], str]) -> Any:
    """Bars of each kernel's top stall reasons."""
    return hbar_chart([(label[_key(s)], s["reason"]) for s in stalls], [float(s["share_pct"] or 0) for s in stalls],
                      ["#c44e52" if s["judged"] else "#9aa1ad" for s in stalls], "% of stall cycles",
                      [("kernel", "@kernel"), ("reason", "@reason"), ("share", "@value{0.0}%"),
                       ("cycles per issue", "@cpi{0.00}")],
                      extra={"kernel": [s["kernel"] for s in stalls], "reason": [s["reason"] for s in stalls],
                             "cpi": [s["cycles_per_issue"] for s in stalls]})


def roofline_chart(points: list[dict[str, Any]], label: dict[tuple[Any, ...], str],
                   ceilings: Sequence[dict[str, Any]] = ()) -> Any:
    """Log-log roofline: each GPU and precision's roof, cuBLAS's measured FLOP/s on the products of the kernels
    (dashed, when the GEMM ladder's timings are given), and one dot per kernel."""
    intensities = [float(p["arithmetic_intensity"]) for p in points]
    lo, hi = min(intensities) / 10, max(intensities) * 10
    fig = figure(x_axis_type="log", y_axis_type="log", height=420, sizing_mode="stretch_width",
                 toolbar_location="right", tools="pan,wheel_zoom,reset,save")
    roofs = {(p["peak_tflop_per_s"], p["peak_gb_per_s"], p["precision"]) for p in points
             if p["peak_tflop_per_s"] and p["peak_gb_per_s"]}
    for peak_tflop, peak_gbs, precision in sorted(roofs, key=str):
        ridge = peak_tflop * 1000 / peak_gbs  # FLOP/byte where the memory roof meets the compute roof
        xs = [lo, max(min(ridge, hi), lo), hi]
        fig.line(xs, [min(peak_tflop, x * peak_gbs / 1000) for x in xs], line_color="#4a5262", line_width=2,
                 legend_label=f"roof ({precision}: {peak_tflop:g} TFLOP/s, {peak_gbs:g} GB/s)")
    measured = {(c["product"], c["cublas_tflop_per_s"]) for c in ceilings if c["cublas_tflop_per_s"]}
    for product, tflops in sorted(measured):
        fig.line([lo, hi], [tflops, tflops], line_color="#7d3c98", line_dash="dashed", line_width=2,
                 legend_label=f"cuBLAS on {product}: {tflops:,.0f} TFLOP/s (GEMM ladder)")
    source = ColumnDataSource({
        "x": intensities, "y": [float(p["tflop_per_s"]) for p in points],
        "label": [label[_key(p)] for p in points], "kernel": [p["kernel"] for p in points],
        "precision": [p["precision"] for p in points], "pct": [p["pct_of_roof"] for p in points],
        "side": [p["roof_side"] for p in points],
        "color": ["#2e86c1" if p["roof_side"] == "memory" else "#e67e22" for p in points]})
    dots = fig.scatter("x", "y", size=11, color="color", line_color="#1d2330", source=source)
    source.data["number"] = [label[_key(p)].split(".")[0] for p in points]  # the kernel's # of the tables
    fig.text("x", "y", text="number", source=source, x_offset=8, y_offset=-6, text_font_size="9pt",
             text_color="#1d2330", text_font_style="bold")
    fig.add_tools(HoverTool(renderers=[dots], tooltips=[("", "@label"), ("kernel", "@kernel"),
                                                         ("precision", "@precision"),
                                                         ("TFLOP/s", "@y{0,0.000}"), ("FLOP/byte", "@x{0,0.00}"),
                                                         ("of roof", "@pct{0.0}%"), ("roof", "@side")]))
    style(fig, "arithmetic intensity (FLOP per DRAM byte)")
    fig.yaxis.axis_label = "TFLOP/s"
    fig.legend.location = "bottom_right"
    return fig


def _coverage_note(report: Report) -> str:
    notes = []
    for c in report.metrics.get("ncu_coverage") or []:
        if c.get("unmeasured_launches"):
            notes.append(f"{c['unmeasured_launches']} launch(es) without metrics ({c['unmeasured_kernels']}).")
        if c.get("not_judged"):
            notes.append(f"Not judged: {c['not_judged']}.")
    return " ".join(["Every profiled kernel; # matches the charts."] + notes)
