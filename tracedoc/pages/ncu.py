"""Kernel detail from Nsight Compute: speed of light and occupancy per kernel, dominant warp stalls, roofline
points, and ncu's own verdicts beside tracedoc's (metrics ncu_kernels, ncu_warp_stalls, ncu_roofline,
ncu_coverage, ncu_rules_vs_tracedoc). A kernel is one function at one launch configuration."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tracedoc.formats import HANG_DUMPS, HEALTH, TIMELINE
from tracedoc.pages import empty
from tracedoc.pages.charts import Section, hbar_chart, heatmap
from tracedoc.pages.fragments import Column, measured, table_html
from tracedoc.pages.names import kernel_labels
from tracedoc.pages.roofline import roofline_chart
from tracedoc.report import Report
from tracedoc.report_tables import METRICS
from tracedoc.units import fmt_count

TITLE = "ncu"
ROUTE = "ncu"

NCU_HOW = ("collect one with ncu --set full -o kernels python app.py and give kernels.ncu-rep to tracedoc, alone or "
           "beside the timeline of the same program")
# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    TIMELINE: "No Nsight Compute profile here: these traces time every kernel, but a kernel's speed of light, warp "
              f"stalls and roofline come from Nsight Compute; {NCU_HOW}.",
    HANG_DUMPS: f"No Nsight Compute profile in these inputs (flight-recorder dumps): {NCU_HOW}.",
    HEALTH: f"No Nsight Compute profile in these inputs (GPU telemetry): {NCU_HOW}.",
    empty.OTHER: f"No Nsight Compute profile in these inputs: {NCU_HOW}.",
}

MAX_KERNELS = 12
# what the tables' columns measure
_KERNEL, _VERDICT = METRICS["ncu_kernels"].measure, METRICS["ncu_rules_vs_tracedoc"].measure
_CEILING = METRICS["ncu_cublas_ceiling"].measure
CHART_CHARS, TABLE_CHARS = 44, 80  # kernel names shortened to these lengths where they can be

UNITS = (("sm_pct", "SM"), ("mem_pct", "memory"), ("dram_pct", "DRAM"), ("l2_pct", "L2"), ("l1_pct", "L1/TEX"),
         ("tensor_pct", "tensor pipe"), ("achieved_occupancy_pct", "occupancy"),
         ("theoretical_occupancy_pct", "occupancy limit"))

KERNEL_COLUMNS = [Column("label", "#"), Column("full", "kernel", wide=True),
                  Column("grid", "grid"),
                  Column("block", "block"), measured("launches", "launches", _KERNEL("launches")),
                  measured("total_ms", "total ms", _KERNEL("total_ms"), 3), Column("kernel_class", "class"),
                  Column("busiest_unit", "busiest unit"),
                  measured("busiest_unit_pct", "busiest %", _KERNEL("busiest_unit_pct")),
                  measured("waves", "waves", _KERNEL("waves"), 2),
                  measured("registers_per_thread", "registers", _KERNEL("registers_per_thread")),
                  Column("device_name", "GPU")]
VERDICT_COLUMNS = [Column("label", "#"), Column("ncu_rule", "ncu rule"), Column("ncu_title", "ncu says", wide=True),
                   measured("ncu_speedup_pct", "ncu est. speed-up %", _VERDICT("ncu_speedup_pct")),
                   Column("tracedoc_view", "tracedoc", wide=True)]
CEILING_COLUMNS = [Column("label", "#"), Column("full", "kernel", wide=True),
                   Column("product", "m×n×k"),
                   Column("dtype", "cuBLAS dtype"), measured("tflop_per_s", "TFLOP/s", _CEILING("tflop_per_s")),
                   measured("cublas_tflop_per_s", "cuBLAS TFLOP/s", _CEILING("cublas_tflop_per_s")),
                   measured("pct_of_cublas", "% of cuBLAS", _CEILING("pct_of_cublas")),
                   measured("sm_clock_mhz", "SM MHz (ncu)", _CEILING("sm_clock_mhz")),
                   measured("cublas_sm_clock_mhz", "SM MHz (cuBLAS)", _CEILING("cublas_sm_clock_mhz")),
                   measured("saving_ms", "saving ms", _CEILING("saving_ms"), 3)]


def full_name(row: dict[str, Any]) -> str:
    """The kernel's demangled name (its function name in reports that carry no other)."""
    return str(row.get("demangled") or row["kernel"])


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    """One kernel: one function (by its demangled name: template instances apart) at one launch configuration."""
    return row["rank"], full_name(row), row["grid"], row["block"]


def with_short_names(columns: list[Column], rows: list[dict[str, Any]]) -> list[Column]:
    """``columns`` whose kernel column shows each name shortened so that no two read alike (full name on hover)."""
    labels = kernel_labels((full_name(r) for r in rows), TABLE_CHARS)
    return [replace(c, abbreviate=lambda name: labels.get(name, name)) if c.key == "full" else c for c in columns]


def has_data(report: Report) -> bool:
    """Whether the report holds kernels measured by Nsight Compute."""
    return bool(report.metrics.get("ncu_kernels"))


def sections(report: Report) -> list[Section]:
    kernels = report.metrics.get("ncu_kernels") or []
    if not has_data(report):
        return [Section("Kernel detail", empty=empty.worded(EMPTY, report))]
    short = kernel_labels((full_name(k) for k in kernels), CHART_CHARS)
    label = {_key(k): f"{i}. {short[full_name(k)]}" for i, k in enumerate(kernels, 1)}
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
                                            "(FLOP per DRAM byte), under the roof of its precision (the GPU's "
                                            "memory bandwidth, then its compute peak), labelled with its # of the "
                                            "tables. Each roof has its colour, named on its flat part, and each "
                                            "kernel's dot takes its roof's colour; round: on the memory side of "
                                            "the roof, square: on the compute side.",
                           items=[roofline_chart(points, lambda p: label[_key(p)], full_name,
                                                 report.metrics.get("ncu_cublas_ceiling") or [])]))
    ceiling = [{**c, "label": label[_key(c)].split(".")[0], "full": full_name(c)}
               for c in report.metrics.get("ncu_cublas_ceiling") or [] if _key(c) in label]
    offered = report.metrics.get("gemm_ladder_cublas") or []
    if ceiling:
        out.append(Section("Against cuBLAS", note="GEMM kernels beside cuBLAS on a product of the same size and GPU "
                                                  "model, as the GEMM ladder measured it (gemm_ladder.json); the size "
                                                  "comes from the kernel's FLOP count. ncu locks clocks, cuBLAS ran "
                                                  "at the GPU's own: both are shown.",
                           items=[table_html(ceiling, with_short_names(CEILING_COLUMNS, ceiling))]))
    elif offered:
        timed = "; ".join(f"{gpu}: {', '.join(dict.fromkeys(o['product'] for o in offered if o['gpu'] == gpu))}"
                          for gpu in dict.fromkeys(o["gpu"] for o in offered))
        out.append(Section("Against cuBLAS", empty=f"The GEMM ladder timed cuBLAS on {timed}; no GEMM kernel of "
                                                   "these reports ran on that GPU model with the FLOP count of one "
                                                   "of those products (or the timings were host-bound)."))
    table = [{**k, "label": label[_key(k)].split(".")[0], "full": full_name(k)} for k in kernels]
    out.append(Section("Kernels", note=_coverage_note(report),
                       items=[table_html(table, with_short_names(KERNEL_COLUMNS, table))]))
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
                      extra={"kernel": [full_name(s) for s in stalls], "reason": [s["reason"] for s in stalls],
                             "cpi": [s["cycles_per_issue"] for s in stalls]})


def _coverage_note(report: Report) -> str:
    notes = []
    for c in report.metrics.get("ncu_coverage") or []:
        if c.get("unmeasured_launches"):
            launches = fmt_count(c["unmeasured_launches"], "launch", "launches")
            notes.append(f"{launches} without metrics ({c['unmeasured_kernels']}).")
        if c.get("not_judged"):
            notes.append(f"Not judged: {c['not_judged']}.")
    return " ".join(["Every profiled kernel; # matches the charts."] + notes)
