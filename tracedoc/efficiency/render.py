"""The operator view and the efficiency figures as plain rows of text, for the text and Markdown reports (the HTML
report and the dashboard draw them on their own page, tracedoc.pages.operators)."""

from __future__ import annotations

from typing import Any

from tracedoc.measures import BYTES, COUNT, FLOP, MS, PCT, US, Measure
from tracedoc.report import Report
from tracedoc.report_tables import OPERATORS
from tracedoc.units import cell_format, fmt_fixed, fmt_measure, fmt_number, fmt_pct, fmt_range, unit_symbol

# The operator table: each column's key in report.operators and header; a number is written by its declared unit
# (report_tables.OPERATORS), under a header naming it, or with it where the header does not (``_WITH_UNIT``).
OPERATOR_COLUMNS: tuple[tuple[str, str], ...] = (
    ("rank", "rank"), ("op", "op"), ("count", "calls"), ("gpu_ms", "GPU ms"), ("share_pct", "share"),
    ("tflops", "TFLOP/s"), ("gbps", "GB/s"), ("intensity", "FLOP/B"), ("roofline_pct", "roofline"), ("shape", "shape"))
OPERATOR_HEADERS = tuple(header for _, header in OPERATOR_COLUMNS)
_WITH_UNIT = ("share_pct", "roofline_pct")
_DIGITS = {"intensity": 0, "roofline_pct": 0, "tflops": 0}  # fewer decimals than the unit's, for a narrow table
SHOWN_OPERATORS = 10


def _num(value: Any, digits: int = 1) -> str:
    return "" if value is None else fmt_number(value, digits)


def _pct_digits(value: Any) -> int:
    """A share's decimals: 2 under 1% (an MFU of 0.42%), else 1."""
    return 2 if (value or 0) < 1 else 1


def _pct(value: Any) -> str:
    return "" if value is None else fmt_pct(value, _pct_digits(value))


def _ms(value: Any) -> str:
    """A step's time to 10 µs: the step with and without the profiler differ by less than fmt_ms shows."""
    return "?" if value is None else fmt_fixed(value, MS, 2)


def _of(value: Any, measure: Measure) -> str:
    return "?" if value is None else fmt_measure(value, measure)


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
        hfu = f", HFU {fmt_pct(r['hfu_pct'])}" if r["hfu_pct"] is not None else ""
        mfu = "MFU unavailable (give --flops-per-step)" if r["mfu_pct"] is None else (
            f"MFU {_pct(r['mfu_pct'])}{hfu} ({_num(r['achieved_tflops'], 1)} "
            f"of {_num(peak['tflops'], 0)} TFLOP/s {peak['dtype']} dense)")
        mbu = f"MBU {fmt_pct(r['mbu_pct'])} ({_num(r['achieved_gbps'], 0)} of {_num(peak['gbps'], 0)} GB/s)"
        bound = f", {r['bound']}-bound{_workload(r)}" if r["bound"] else ""
        coverage = ("" if r["flop_model_coverage_pct"] is None else
                    f"; {fmt_pct(r['flop_model_coverage_pct'])} of the GPU time has a FLOP or byte model")
        lines.append(
            f"rank {r['rank']}: {', '.join(_first_figure(r, mfu, mbu))}{bound}; "
            f"{_of(r['model_flops'], FLOP)} and {_of(r['bytes'], BYTES)} per {_ms(r['step_ms'])} step"
            f"{coverage}; peak: {peak['gpu'] or peak['device_name']} ({peak['source']})")
        lines += unprofiled_lines(r)
    return lines


def unprofiled_lines(row: dict[str, Any]) -> list[str]:
    """What a rank's figures describe: the step time the user gave (--step-time-ms), or the profiled step beside
    the estimate without the profiler (efficiency.observer): its range, the profiler's cost and where it comes
    from."""
    if row.get("step_time_source") == "--step-time-ms":
        return [f"rank {row['rank']}: MFU and MBU at the given step time, {_ms(row['step_ms'])} "
                "(--step-time-ms)"]
    u = row.get("unprofiled")
    if not u:
        return []
    memory = row.get("bound") == "memory" and row.get("workload") != "training"
    order = (("MBU", "mbu_pct"), ("MFU", "mfu_pct")) if memory else (("MFU", "mfu_pct"), ("MBU", "mbu_pct"))
    figures = [f"{name} about {_pct(u[key])} "
               f"({fmt_range(u[key + '_low'] or 0, u[key + '_high'] or 0, PCT, _pct_digits(u[key]))})"
               for name, key in order if u.get(key) is not None]
    recorded = ", ".join("Nsight Systems" if o == "nsys" else o for o in u["recorded_with"]) or (
        "no shapes, stacks or memory")
    pace = "the GPU sets the pace" if u["gpu_paced"] else "the host sets the pace"
    return [f"rank {row['rank']}: without the profiler: step about {_ms(u['step_ms'])} "
            f"({fmt_range(u['step_ms_low'], u['step_ms_high'], MS, 2)}; traced {_ms(u['traced_step_ms'])}, "
            f"GPU's own work {_ms(u['gpu_floor_ms'])}), {pace}"
            + (f"; {', '.join(figures)}" if figures else "")
            + (f". The profiler costs about {_ms(u['profiler_cost_ms'])} a step: its "
               if round(u["profiler_cost_ms"], 2) else ". The profiler costs next to nothing a step: its ")
            + f"{_of(u['host_events_per_step'], COUNT)} host events a step, about {_of(u['event_cost_us'], US)} each, "
            f"taken off in a replay of the steps ({_of(u['critical_events_per_step'], COUNT)} of them start while "
            f"the GPU waits; recorded with {recorded})"]


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
        rows.append(tuple(_operator_cell(o, key) for key, _ in OPERATOR_COLUMNS))
    return rows


def _operator_cell(row: dict[str, Any], key: str) -> str:
    """A cell of the operator table: a number by its declared unit (a rate of 0 left blank: no model), else text."""
    value = row.get(key)
    if key not in dict(OPERATORS.measures):
        return "" if value is None else str(value)
    if value is None or (value == 0 and key in ("tflops", "gbps", "intensity")):
        return ""
    text = cell_format(OPERATORS.measure(key), _DIGITS.get(key))(value)
    return text + unit_symbol(OPERATORS.measure(key)) if key in _WITH_UNIT else text
