"""The report's parts, declared in one list (``SECTIONS``): each part a key of the JSON report read from
``<group>_report_<name>`` views of analysis modules, which rename and convert the measures for people (ms, µs, %,
GB/s, bytes), nested rows as STRUCT and LIST, read here in the report's row order.

``pipeline.build_report`` builds the report by this list, a distributed run ships the per-rank views by their
names (``scale.exports``), ``saved.check_report`` checks a saved report's parts and ``Report.frames`` offers them as
tables. A new part of the report is its view(s), one line here and its presenters.

The order lives in the declaration, not in the view: DuckDB keeps no view's ORDER BY for the query that selects
from it. A view may carry columns that only order its rows (``order_only``); they are left out of the report."""

from __future__ import annotations

from typing import Any, NamedTuple

from tracedoc.store import Store
from tracedoc.units import report_number


class ReportTable(NamedTuple):
    """One table of the report: the analysis ``module`` that makes its ``view``, the rows' ``order`` (an ORDER BY
    over the view's columns) and the view's columns that only order them."""

    module: str
    view: str
    order: str
    order_only: tuple[str, ...] = ()
    whole_numbers: bool = False


class Section(NamedTuple):
    """A part of the report: its ``key`` (``metrics.<name>`` for a table of ``Report.metrics``), the views its rows
    come from, in order, and when it is measured (``summary.basis``): 'always', only with a 'timeline', or with any
    basis ('measured')."""

    key: str
    tables: tuple[ReportTable, ...]
    when: str = "always"

    def measured(self, basis: str | None) -> bool:
        """True when the part is measured for inputs whose report has this ``basis``."""
        return self.when == "always" or (self.when == "timeline" and basis == "timeline") or (
            self.when == "measured" and bool(basis))


def report_rows(store: Store, table: ReportTable) -> list[dict[str, Any]]:
    """The table's rows in its order, numbers as the report carries them (``report_value``), nested rows (STRUCT,
    LIST) included."""
    store.include(table.module)
    columns = f"* EXCLUDE ({', '.join(table.order_only)})" if table.order_only else "*"
    return [{k: report_value(v, table.whole_numbers) for k, v in row.items()}
            for row in store.query(f"SELECT {columns} FROM {table.view} ORDER BY {table.order}")]


def report_value(value: Any, whole_numbers: bool = False) -> Any:
    """A value of a report view as the report carries it: numbers as ``report_number`` gives them, through STRUCTs
    (dicts) and LISTs; ``whole_numbers``: a float that is a whole number (≥ 1 in size) as an int (bytes)."""
    if isinstance(value, dict):
        return {k: report_value(v, whole_numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [report_value(v, whole_numbers) for v in value]
    number = report_number(value)
    if whole_numbers and isinstance(number, float) and number.is_integer() and abs(number) >= 1:
        return int(number)
    return number



# The report's tables (``Report.metrics``): name → the analysis module and its <group>_report_<name> view, every
# number in ms, µs, % or bytes, per rank or device.
METRICS: dict[str, ReportTable] = {
    "gpu_idle": ReportTable("gpu.idle", "gpu_report_idle", "rank, device"),
    "gpu_time_by_category": ReportTable("gpu.kernels", "gpu_report_time_by_category", "rank, total_ms DESC"),
    "top_kernels": ReportTable("gpu.kernels", "gpu_report_top_kernels", "rank, total_ms DESC"),
    "launch": ReportTable("gpu.launch", "gpu_report_launch", "rank, device"),
    "host_syncs": ReportTable("host.sync", "host_report_syncs", "rank"),
    "copies": ReportTable("host.memcpy", "host_report_copies", "rank, copy_kind, host_memory"),
    "comm_overlap": ReportTable("comm.overlap", "comm_report_overlap", "rank, device"),
    "step_times": ReportTable("trace.summary", "trace_report_step_times", "rank, step"),
    "rank_steps": ReportTable("ranks.steps", "ranks_report_steps", "rank, step"),
    "collectives": ReportTable("hang.progress", "hang_report_collectives", "backend, pg, rank"),
    "flight_recorder_dumps": ReportTable("hang.dumps", "hang_report_dumps", "rank, NOT used, path"),
    "ncu_kernels": ReportTable("ncu.sol", "ncu_report_kernels", "rank, total_ns DESC", ("total_ns",)),
    "ncu_warp_stalls": ReportTable("ncu.stalls", "ncu_report_warp_stalls", "rank, total_ns DESC, share_pct DESC",
                                   ("total_ns",)),
    "ncu_roofline": ReportTable("ncu.roofline", "ncu_report_roofline", "rank, total_ns DESC", ("total_ns",)),
    "ncu_coverage": ReportTable("ncu.coverage", "ncu_report_coverage", "rank"),
    "ncu_rules_vs_tracedoc": ReportTable(
        "ncu.verdicts", "ncu_report_rules_vs_tracedoc",
        "rank, total_ns DESC, kernel, grid, block, ncu_speedup_pct DESC NULLS LAST, ncu_rule", ("total_ns",)),
    "ncu_cublas_ceiling": ReportTable("ncu.cublas_ceiling", "ncu_report_cublas_ceiling", "rank, total_ns DESC",
                                      ("total_ns",)),
    "gemm_ladder_cublas": ReportTable("ncu.cublas_ceiling", "ncu_report_gemm_ladder_cublas", "gpu, flop, ms",
                                      ("flop",)),
    "ncu_trace_links": ReportTable("ncu.links", "ncu_report_trace_links", "rank, timeline_total_ns DESC",
                                   ("timeline_total_ns",)),
    # GPU memory: allocator events and snapshots (analyses/memory)
    "memory_steps": ReportTable("memory.timeline", "memory_report_steps", "rank, device, step"),
    "memory_curve": ReportTable("memory.timeline", "memory_report_curve", "rank, device, t_ns", ("t_ns",)),
    "memory_oom_points": ReportTable("memory.oom", "memory_report_oom_points", "rank, device, ts_ns", ("ts_ns",)),
    "memory_peak_sites": ReportTable("memory.peak", "memory_report_peak_sites", "rank, device, bytes DESC, site"),
    "memory_growth_sites": ReportTable("memory.growth", "memory_report_growth_sites",
                                       "rank, device, bytes_per_step DESC"),
    # GPU health: NVML snapshots and telemetry (units in the column names; `tracedoc health` reads them too)
    "gpu_health": ReportTable("health.gpus", "health_report_gpus", "source_id, device", ("source_id",)),
    "gpu_telemetry": ReportTable("health.telemetry", "health_report_telemetry", "source_id, device", ("source_id",)),
}

# The report's attribution of every GPU's time (per rank and device the rows sum to its window).
ATTRIBUTION = ReportTable("attribution.time", "attribution_report_slices",
                          "rank, device, step NULLS FIRST, ms DESC, cause, detail")
# The window the findings judge, per rank (``pipeline.window_of`` makes the report's own of them).
WINDOWS = ReportTable("trace.window", "trace_report_windows", "rank NULLS LAST, source_id")
# The operator view: per rank, the aten ops with the most GPU time and the kernels each launched.
OPERATORS = ReportTable("efficiency.report", "efficiency_report_operators", "rank, source_id, gpu_ns DESC, op",
                        ("source_id", "gpu_ns"))
# GPU memory per device: the GPUs of traces, then the devices of snapshots given alone (bytes as whole numbers).
MEMORY = (
    ReportTable("memory.report", "memory_report_devices", "rank, device, source_id", ("source_id",), True),
    ReportTable("memory.report", "memory_report_snapshots", "snapshot_id, device", ("snapshot_id",), True),
)

# Every part of the report read from views, in the report's order. ``efficiency`` is MFU/MBU per rank and step
# (tracedoc.efficiency words it from efficiency.steps, which a distributed run ships as scale.exports says).
SECTIONS: tuple[Section, ...] = (
    Section("attribution", (ATTRIBUTION,), "timeline"),
    Section("window", (WINDOWS,), "measured"),
    Section("operators", (OPERATORS,), "timeline"),
    Section("memory", MEMORY),
    *(Section(f"metrics.{name}", (table,)) for name, table in METRICS.items()),
)


def section_rows(store: Store, section: Section) -> list[dict[str, Any]]:
    """The rows of a part of the report, its views' in turn; none from a view of an analysis of inputs the store
    does not hold."""
    return [row for table in section.tables if store.applies(table.module) for row in report_rows(store, table)]


def report_views() -> tuple[ReportTable, ...]:
    """Every view the report reads, once."""
    return tuple(dict.fromkeys(table for section in SECTIONS for table in section.tables))
