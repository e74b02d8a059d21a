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

from tracedoc.measures import (
    BYTES,
    CELSIUS,
    COUNT,
    FLOP,
    GBPS,
    MHZ,
    MS,
    NUMBER,
    PCT,
    TFLOPS,
    TIME_NS,
    US,
    WATTS,
    Measure,
    higher,
    lower,
)
from tracedoc.store import Store
from tracedoc.units import report_number

Measures = tuple[tuple[str, Measure], ...]


def measures(**columns: Measure) -> Measures:
    """The measures of a view's columns (a nested row's fields by their own names), as a ReportTable holds them."""
    return tuple(columns.items())


class ReportTable(NamedTuple):
    """One table of the report: the analysis ``module`` that makes its ``view``, the rows' ``order`` (an ORDER BY
    over the view's columns), the view's columns that only order them, and what each column of a number measures
    (its unit and polarity, tracedoc.measures; keys such as rank, device and step are no measures)."""

    module: str
    view: str
    order: str
    order_only: tuple[str, ...] = ()
    whole_numbers: bool = False
    measures: Measures = ()

    def measure(self, column: str) -> Measure:
        """What ``column`` (or a nested row's field) measures (KeyError for a column declared as no measure)."""
        return dict(self.measures)[column]


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
    "gpu_idle": ReportTable("gpu.idle", "gpu_report_idle", "rank, device", measures=measures(
        wall_ms=MS, busy_pct=higher(PCT), idle_ms=lower(MS), host_wait_short_ms=lower(MS),
        host_wait_long_ms=lower(MS), kernel_wait_ms=lower(MS), other_ms=lower(MS))),
    "gpu_time_by_category": ReportTable("gpu.kernels", "gpu_report_time_by_category", "rank, total_ms DESC",
                                        measures=measures(activity_count=COUNT, total_ms=MS, share_pct=PCT)),
    "top_kernels": ReportTable("gpu.kernels", "gpu_report_top_kernels", "rank, total_ms DESC", measures=measures(
        launch_count=COUNT, total_ms=lower(MS), mean_us=lower(US), share_pct=PCT)),
    "launch": ReportTable("gpu.launch", "gpu_report_launch", "rank, device", measures=measures(
        kernel_count=COUNT, kernels_per_step=COUNT, median_kernel_us=US, tiny_kernel_pct=lower(PCT),
        median_launch_latency_us=lower(US), p90_launch_latency_us=lower(US), graph_kernel_count=COUNT)),
    "host_syncs": ReportTable("host.sync", "host_report_syncs", "rank", measures=measures(
        sync_count=lower(COUNT), syncs_per_step=lower(COUNT), blocked_ms=lower(MS), gpu_idle_ms=lower(MS))),
    "copies": ReportTable("host.memcpy", "host_report_copies", "rank, copy_kind, host_memory", measures=measures(
        copy_count=COUNT, total_bytes=BYTES, total_ms=lower(MS), bandwidth_gbps=higher(GBPS))),
    "comm_overlap": ReportTable("comm.overlap", "comm_report_overlap", "rank, device", measures=measures(
        comm_ms=MS, compute_ms=MS, overlap_ms=MS, exposed_comm_ms=lower(MS), overlap_pct=higher(PCT))),
    "step_times": ReportTable("trace.summary", "trace_report_step_times", "rank, step",
                              measures=measures(step_ms=lower(MS))),
    "rank_steps": ReportTable("ranks.steps", "ranks_report_steps", "rank, step", measures=measures(
        step_ms=lower(MS), compute_ms=MS, comm_wait_ms=lower(MS), arrival_lateness_ms=lower(MS),
        exposed_wait_ms=lower(MS), others_wait_ms=lower(MS), comm_ms=MS, host_step_ms=MS, host_gap_ms=lower(MS),
        kernels=COUNT, collectives=COUNT)),
    "collectives": ReportTable("hang.progress", "hang_report_collectives", "backend, pg, rank",
                               measures=measures(waited_ms=MS)),
    "flight_recorder_dumps": ReportTable("hang.dumps", "hang_report_dumps", "rank, NOT used, path",
                                         measures=measures(entries=COUNT)),
    "ncu_kernels": ReportTable("ncu.sol", "ncu_report_kernels", "rank, total_ns DESC", ("total_ns",),
                               measures=measures(
        launches=COUNT, total_ms=lower(MS), busiest_unit_pct=higher(PCT), sm_pct=higher(PCT), mem_pct=higher(PCT),
        dram_pct=higher(PCT), l2_pct=higher(PCT), l1_pct=higher(PCT), tensor_pct=higher(PCT),
        achieved_occupancy_pct=higher(PCT), theoretical_occupancy_pct=higher(PCT), waves=NUMBER,
        registers_per_thread=COUNT)),
    "ncu_warp_stalls": ReportTable("ncu.stalls", "ncu_report_warp_stalls", "rank, total_ns DESC, share_pct DESC",
                                   ("total_ns",), measures=measures(share_pct=lower(PCT), cycles_per_issue=NUMBER)),
    "ncu_roofline": ReportTable("ncu.roofline", "ncu_report_roofline", "rank, total_ns DESC", ("total_ns",),
                                measures=measures(
        tflop_per_s=higher(TFLOPS), dram_gb_per_s=GBPS, arithmetic_intensity=NUMBER, peak_tflop_per_s=TFLOPS,
        peak_gb_per_s=GBPS, ridge_point=NUMBER, pct_of_roof=higher(PCT))),
    "ncu_coverage": ReportTable("ncu.coverage", "ncu_report_coverage", "rank",
                                measures=measures(launches=COUNT, unmeasured_launches=lower(COUNT))),
    "ncu_rules_vs_tracedoc": ReportTable(
        "ncu.verdicts", "ncu_report_rules_vs_tracedoc",
        "rank, total_ns DESC, kernel, grid, block, ncu_speedup_pct DESC NULLS LAST, ncu_rule", ("total_ns",),
        measures=measures(ncu_speedup_pct=PCT)),
    "ncu_cublas_ceiling": ReportTable("ncu.cublas_ceiling", "ncu_report_cublas_ceiling", "rank, total_ns DESC",
                                      ("total_ns",), measures=measures(
        tflop_per_s=higher(TFLOPS), cublas_tflop_per_s=TFLOPS, pct_of_cublas=higher(PCT), sm_clock_mhz=MHZ,
        cublas_sm_clock_mhz=MHZ, total_ms=lower(MS), saving_ms=lower(MS))),
    "gemm_ladder_cublas": ReportTable("ncu.cublas_ceiling", "ncu_report_gemm_ladder_cublas", "gpu, flop, ms",
                                      ("flop",), measures=measures(ms=lower(MS), tflop_per_s=higher(TFLOPS),
                                                                   sm_clock_mhz=MHZ)),
    "ncu_trace_links": ReportTable("ncu.links", "ncu_report_trace_links", "rank, timeline_total_ns DESC",
                                   ("timeline_total_ns",), measures=measures(
        launches=COUNT, total_ms=MS, timeline_sources=COUNT, timeline_launches=COUNT, timeline_total_ms=MS,
        timeline_mean_us=US, impact_scale=NUMBER)),
    # GPU memory: allocator events and snapshots (analyses/memory)
    "memory_steps": ReportTable("memory.timeline", "memory_report_steps", "rank, device, step", measures=measures(
        allocated_end_bytes=BYTES, reserved_end_bytes=BYTES, allocated_max_bytes=lower(BYTES), start_ms=MS,
        end_ms=MS)),
    "memory_curve": ReportTable("memory.timeline", "memory_report_curve", "rank, device, t_ns", ("t_ns",),
                                measures=measures(t_ms=MS, allocated_bytes=BYTES, reserved_bytes=BYTES)),
    "memory_oom_points": ReportTable("memory.oom", "memory_report_oom_points", "rank, device, ts_ns", ("ts_ns",),
                                     measures=measures(t_ms=MS, requested_bytes=BYTES, allocated_bytes=BYTES)),
    "memory_peak_sites": ReportTable("memory.peak", "memory_report_peak_sites", "rank, device, bytes DESC, site",
                                     measures=measures(allocations=COUNT, bytes=BYTES)),
    "memory_growth_sites": ReportTable("memory.growth", "memory_report_growth_sites",
                                       "rank, device, bytes_per_step DESC", measures=measures(
        allocations=COUNT, held_bytes=lower(BYTES), bytes_per_step=lower(BYTES))),
    # GPU health: NVML snapshots and telemetry (units in the column names; `tracedoc health` reads them too)
    "gpu_health": ReportTable("health.gpus", "health_report_gpus", "source_id, device", ("source_id",),
                              measures=measures(
        gpu_util_pct=PCT, sm_clock_mhz=MHZ, sm_clock_max_mhz=MHZ, mem_clock_mhz=MHZ, mem_clock_max_mhz=MHZ,
        temperature_c=lower(CELSIUS), temperature_slowdown_c=CELSIUS, memory_temperature_c=lower(CELSIUS),
        power_w=WATTS, power_limit_w=WATTS, power_default_limit_w=WATTS, ecc_volatile_corrected=lower(COUNT),
        ecc_volatile_uncorrected=lower(COUNT), ecc_aggregate_corrected=lower(COUNT),
        ecc_aggregate_uncorrected=lower(COUNT), remapped_rows_corrected=lower(COUNT),
        remapped_rows_uncorrected=lower(COUNT), retired_pages_sbe=lower(COUNT), retired_pages_dbe=lower(COUNT),
        pcie_gen=NUMBER, pcie_gen_gpu_max=NUMBER, pcie_gen_max=NUMBER, pcie_width=NUMBER, pcie_width_max=NUMBER,
        pcie_replay_count=lower(COUNT),
        nvlink_links=COUNT, nvlink_up=COUNT)),
    "gpu_telemetry": ReportTable("health.telemetry", "health_report_telemetry", "source_id, device", ("source_id",),
                                 measures=measures(
        samples=COUNT, duration_ms=MS, busy_pct=PCT, gpu_util_mean_pct=PCT, sm_clock_mean_mhz=higher(MHZ),
        sm_clock_min_mhz=MHZ, sm_clock_max_mhz=MHZ, sm_clock_pct=higher(PCT), temperature_max_c=lower(CELSIUS),
        power_mean_w=WATTS, power_max_w=WATTS, power_limit_w=WATTS, fault_pct=lower(PCT),
        power_cap_busy_pct=lower(PCT), pcie_gen_busy_min=NUMBER, pcie_gen_max=NUMBER, pcie_width_min=NUMBER,
        pcie_width_max=NUMBER)),
}

# The report's attribution of every GPU's time (per rank and device the rows sum to its window).
ATTRIBUTION = ReportTable("attribution.time", "attribution_report_slices",
                          "rank, device, step NULLS FIRST, ms DESC, cause, detail", measures=measures(ms=MS))
# The window the findings judge, per rank (``pipeline.window_of`` makes the report's own of them).
WINDOWS = ReportTable("trace.window", "trace_report_windows", "rank NULLS LAST, source_id", measures=measures(
    start_ns=TIME_NS, end_ns=TIME_NS, step_count=COUNT, warmup_steps=COUNT))
# The operator view: per rank, the aten ops with the most GPU time and the kernels each launched.
OPERATORS = ReportTable("efficiency.report", "efficiency_report_operators", "rank, source_id, gpu_ns DESC, op",
                        ("source_id", "gpu_ns"), measures=measures(
    count=COUNT, cpu_ms=MS, gpu_ms=lower(MS), share_pct=PCT, flops=FLOP, tflops=higher(TFLOPS), bytes=BYTES,
    gbps=higher(GBPS), intensity=NUMBER, roofline_pct=higher(PCT), ms=MS))
# GPU memory per device: the GPUs of traces, then the devices of snapshots given alone (bytes as whole numbers).
_MEMORY_MEASURES = measures(
    capacity_bytes=BYTES, peak_bytes=lower(BYTES), reserved_bytes=BYTES, reserved_peak_bytes=lower(BYTES),
    allocated_start_bytes=BYTES, allocated_end_bytes=BYTES, growth_bytes_per_step=lower(BYTES), growth_r2=NUMBER,
    steady_steps=COUNT, steps_to_oom=higher(COUNT), bytes=BYTES, allocations=COUNT, bytes_per_step=lower(BYTES),
    trace_reserved_bytes=BYTES, trace_allocated_bytes=BYTES, trace_unused_bytes=lower(BYTES),
    snapshot_reserved_bytes=BYTES, snapshot_allocated_bytes=BYTES, stranded_bytes=lower(BYTES),
    largest_stranded_bytes=BYTES, snapshot_free_bytes=BYTES, largest_free_bytes=BYTES, pinning_stranded_bytes=BYTES,
    stranded_pct=lower(PCT), trace_unused_pct=lower(PCT), requested_bytes=BYTES, allocated_bytes=BYTES,
    device_free_bytes=BYTES)
MEMORY = (
    ReportTable("memory.report", "memory_report_devices", "rank, device, source_id", ("source_id",), True,
                _MEMORY_MEASURES),
    ReportTable("memory.report", "memory_report_snapshots", "snapshot_id, device", ("snapshot_id",), True,
                _MEMORY_MEASURES),
)

# The numbers of the report's parts that are not read from views, declared as a view's columns are: the summary's
# head (pipeline.build_report), the efficiency rows with their nested peak and estimate without the profiler
# (tracedoc.efficiency), the what-if rows (tracedoc.whatif) and a finding's span on the timeline.
SUMMARY = measures(wall_ms=lower(MS), gpu_busy_pct=higher(PCT), computing_pct=PCT, communication_pct=PCT,
                   waiting_pct=lower(PCT))
EFFICIENCY = measures(
    step_ms=lower(MS), steps=COUNT, model_flops=FLOP, hardware_flops=FLOP, bytes=BYTES,
    achieved_tflops=higher(TFLOPS), achieved_gbps=higher(GBPS), mfu_pct=higher(PCT), hfu_pct=higher(PCT),
    mbu_pct=higher(PCT), flop_model_coverage_pct=higher(PCT), tflops=TFLOPS, gbps=GBPS,
    critical_events_per_step=COUNT, event_cost_us=US, gpu_floor_ms=MS, host_events_per_step=COUNT,
    mbu_pct_high=PCT, mbu_pct_low=PCT, mfu_pct_high=PCT, mfu_pct_low=PCT, profiler_cost_ms=lower(MS),
    step_ms_high=MS, step_ms_low=MS, traced_step_ms=MS)
WHAT_IF = measures(step_ms=MS, gain_pct=higher(PCT), next_share_pct=PCT, projected_step_ms=lower(MS))
SPAN = measures(start_ms=MS, dur_ms=MS)


def summary_measure(key: str) -> Measure:
    """What a number of the summary's head measures (KeyError for a key that is no measure)."""
    return dict(SUMMARY)[key]

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
