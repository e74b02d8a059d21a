"""The operator view and the efficiency figures as plain rows of text, for the text and Markdown reports (the HTML
report and the dashboard draw them on their own page, tracedoc.pages.operators)."""

from __future__ import annotations

from typing import Any

from tracedoc.report import Report

OPERATOR_HEADERS = ("rank", "op", "calls", "GPU ms", "share", "TFLOP/s", "GB/s", "FLOP/B", "roofline", "shape")
SHOWN_OPERATORS = 10


def _num(value: Any, digits: int = 1, suffix: str = "") -> str:
    return "" if value is None else f"{float(value):,.{digits}f}{suffix}"


def _amount(value: Any, unit: str) -> str:
    """1.2e13 FLOP as '12.00 TFLOP', 4.2e9 B as '4.20 GB'."""
    if value is None:
        return f"? {unit}"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {prefix}{unit}"
    return f"{value:,.0f} {unit}"


def efficiency_lines(report: Report) -> list[str]:
    """One line per rank: MFU (HFU) or MBU over its steady steps, the TFLOP/s and GB/s, the model's coverage and
    the peak's source; or why the figures are unavailable."""
    lines = []
    for r in report.efficiency:
        if r["step"] is not None:
            continue
        if r["note"]:
            lines.append(f"rank {r['rank']}: MFU unavailable: {r['note']}")
            lines += unprofiled_lines(r)
            continue
        peak = r["peak"]
        hfu = f", HFU {_num(r['hfu_pct'])}%" if r["hfu_pct"] is not None else ""
        mfu = "MFU unavailable (give --flops-per-step)" if r["mfu_pct"] is None else (
            f"MFU {_num(r['mfu_pct'], 2 if (r['mfu_pct'] or 0) < 1 else 1)}%{hfu} ({_num(r['achieved_tflops'], 1)} "
            f"of {_num(peak['tflops'], 0)} TFLOP/s {peak['dtype']} dense)")
        mbu = f"MBU {_num(r['mbu_pct'])}% ({_num(r['achieved_gbps'], 0)} of {_num(peak['gbps'], 0)} GB/s)"
        bound = f", {r['bound']}-bound{_workload(r)}" if r["bound"] else ""
        coverage = ("" if r["flop_model_coverage_pct"] is None else
                    f"; {_num(r['flop_model_coverage_pct'])}% of the GPU time has a FLOP or byte model")
        lines.append(
            f"rank {r['rank']}: {', '.join(_first_figure(r, mfu, mbu))}{bound}; "
            f"{_amount(r['model_flops'], 'FLOP')} and {_amount(r['bytes'], 'B')} per {_num(r['step_ms'], 2)} ms step"
            f"{coverage}; peak: {peak['gpu'] or peak['device_name']} ({peak['source']})")
        lines += unprofiled_lines(r)
    return lines


def unprofiled_lines(row: dict[str, Any]) -> list[str]:
    """What a rank's figures describe: the step time the user gave (--step-time-ms), or the profiled step beside
    the estimate without the profiler (efficiency.observer): its range, the profiler's cost and where it comes
    from."""
    if row.get("step_time_source") == "--step-time-ms":
        return [f"rank {row['rank']}: MFU and MBU at the given step time, {_num(row['step_ms'], 2)} ms "
                "(--step-time-ms)"]
    u = row.get("unprofiled")
    if not u:
        return []
    memory = row.get("bound") == "memory" and row.get("workload") != "training"
    order = (("MBU", "mbu_pct"), ("MFU", "mfu_pct")) if memory else (("MFU", "mfu_pct"), ("MBU", "mbu_pct"))
    digits = lambda key: 2 if (u[key] or 0) < 1 else 1  # noqa: E731
    figures = [f"{name} about {_num(u[key], digits(key))}% ({_num(u[key + '_low'], digits(key))}–"
               f"{_num(u[key + '_high'], digits(key))}%)" for name, key in order if u.get(key) is not None]
    recorded = ", ".join("Nsight Systems" if o == "nsys" else o for o in u["recorded_with"]) or (
        "no shapes, stacks or memory")
    pace = "the GPU sets the pace" if u["gpu_paced"] else "the host sets the pace"
    return [f"rank {row['rank']}: without the profiler: step about {_num(u['step_ms'], 2)} ms "
            f"({_num(u['step_ms_low'], 2)}–{_num(u['step_ms_high'], 2)} ms; traced {_num(u['traced_step_ms'], 2)} ms, "
            f"GPU's own work {_num(u['gpu_floor_ms'], 2)} ms), {pace}"
            + (f"; {', '.join(figures)}" if figures else "")
            + f". The profiler costs about {_num(u['profiler_cost_ms'], 2)} ms a step: "
            f"{_num(u['critical_events_per_step'], 0)} of its {_num(u['host_events_per_step'], 0)} host events a "
            f"step start while the GPU waits, about {_num(u['event_cost_us'], 1)} µs each (recorded with "
            f"{recorded})"]


def _first_figure(row: dict[str, Any], mfu: str, mbu: str) -> list[str]:
    """MBU first for a memory-bound inference step (decode), MFU first for the others (a training step whatever
    bounds it: tracedoc.efficiency.headline)."""
    memory = row["bound"] == "memory" and row.get("workload") != "training"
    return [mbu, mfu] if memory or row["mfu_pct"] is None else [mfu, mbu]


def _workload(row: dict[str, Any]) -> str:
    return f" {row['workload']} step" if row.get("workload") else ""


def operator_rows(report: Report, count: int = SHOWN_OPERATORS) -> list[tuple[str, ...]]:
    """The operators with the most GPU time (per rank, as the report lists them), as cells of OPERATOR_HEADERS."""
    shown: dict[Any, int] = {}
    rows: list[tuple[str, ...]] = []
    for o in report.operators:
        shown[o["rank"]] = shown.get(o["rank"], 0) + 1
        if shown[o["rank"]] > count:
            continue
        rows.append((str(o["rank"]), str(o["op"]), f"{o['count']:,}", _num(o["gpu_ms"], 2),
                     _num(o["share_pct"], 1, "%"),
                     _num(o["tflops"] or None, 0), _num(o["gbps"] or None, 0), _num(o["intensity"] or None, 0),
                     _num(o["roofline_pct"], 0, "%"), str(o["shape"] or "")))
    return rows
