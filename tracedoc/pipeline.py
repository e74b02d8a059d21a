"""The analysis on this machine: inputs → store (ingested, or from the cache) → measured and judged → Report.

``tracedoc.api.analyze`` runs it (a distributed run builds its report with ``build_report`` over a store of the
workers' summaries); the dashboard and the diff call it for a store they keep open."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracedoc import efficiency
from tracedoc.errors import InputError
from tracedoc.health.metrics import HEALTH_METRICS
from tracedoc.ingest import InputFile, discover, load_all
from tracedoc.ingest.ncu_model import short_name
from tracedoc.judge import Rule, judge
from tracedoc.kinds import mixed_runs
from tracedoc.limits import Limits
from tracedoc.memory_report import MEMORY_METRICS, memory_section
from tracedoc.report import InputInfo, Report
from tracedoc.store import Store, memory_store, open_cached_store
from tracedoc.store.cache import content_key, discard_damaged, is_damage
from tracedoc.units import report_number
from tracedoc.whatif import top_what_ifs

Progress = Callable[[str], None]


def input_files(paths: Sequence[Path | str] | Path | str, limits: Limits = Limits()) -> list[InputFile]:
    """The inputs at ``paths``: files or directories of ranks, one path given as it is or several (standard input
    spooled under ``limits``' inflate cap)."""
    return discover([Path(p) for p in ([paths] if isinstance(paths, str | os.PathLike) else paths)], limits)


def load_report(inputs: Sequence[InputFile], cache_dir: Path | None, rules: list[Rule],
                thresholds: dict[str, dict[str, float]] | None = None,
                progress: Progress | None = None, step_range: str | None = None,
                limits: Limits | None = None, peaks: efficiency.Options | None = None) -> tuple[Store, Report]:
    """The store of these inputs (left open for the caller to close) and its report; a cached store found damaged
    while reading it is rebuilt once. ``cache_dir`` None: a store in memory, for this report only. ``limits``
    None: those the environment sets (``Limits.from_env``). ``peaks``: the peaks and FLOPs per step the user
    gives (--peak-tflops, …)."""
    paths = [str(i.path) for i in inputs]
    limits = Limits.from_env() if limits is None else limits
    store, cached = open_store(inputs, cache_dir, progress, limits)
    try:
        return store, build_report(store, rules, thresholds, progress, paths=paths, step_range=step_range,
                                   peaks=peaks)
    except BaseException as exc:
        store.close()
        if not cached or store.path is None or not isinstance(exc, Exception) or not is_damage(exc, store.path):
            raise
        discard_damaged(store.path, exc)
    store, _ = open_store(inputs, cache_dir, progress, limits)
    try:
        return store, build_report(store, rules, thresholds, progress, paths=paths, step_range=step_range,
                                   peaks=peaks)
    except BaseException:
        store.close()
        raise


def open_store(inputs: Sequence[InputFile], cache_dir: Path | None, progress: Progress | None = None,
               limits: Limits | None = None) -> tuple[Store, bool]:
    """The store for these inputs: from the cache in ``cache_dir`` when already ingested, else ingested now (into
    the cache, or into memory when ``cache_dir`` is None); and whether it came from the cache. ``limits`` None:
    those the environment sets (``Limits.from_env``)."""
    limits = Limits.from_env() if limits is None else limits
    if cache_dir is None:
        return memory_store(lambda store: load_all(store, inputs, progress), limits), False
    return open_cached_store(store_key(inputs), cache_dir, lambda store: load_all(store, inputs, progress), limits)


def store_key(inputs: Sequence[InputFile]) -> str:
    """The cache key of the store of these inputs: in the cache, its file is ``KEY.duckdb``."""
    return content_key([f"{i.format}:{i.digest}" for i in inputs])


def build_report(store: Store, rules: list, thresholds: dict[str, dict[str, float]] | None = None,
                 progress: Progress | None = None, paths: Sequence[str] | None = None,
                 step_range: str | None = None, peaks: efficiency.Options | None = None) -> Report:
    """Measure and judge an ingested store.

    ``paths`` are the inputs as given this time, by input order: a cached store keeps the paths of the run that
    ingested it, and the same bytes may since have been given under other names. ``step_range``: as ``analyze``.
    """
    if progress:
        progress("analysing")
    store.fit_threads()
    store.set_step_range(step_range)
    if peaks is not None:
        peaks.apply(store)
    store.include("trace.summary")
    if step_range is not None:
        check_step_range(store, step_range)
    summary = store.query("SELECT * FROM trace_summary")[0]
    wall_ms = float(summary["wall_ms"] or 0.0)  # 0 for inputs without a timeline (e.g. hang dumps)
    findings = judge(store, rules, wall_ms, thresholds)
    rows = store.query("SELECT path, format, rank, event_count, input_index FROM sources ORDER BY source_id")
    if paths is not None and all(r["input_index"] is not None and r["input_index"] < len(paths) for r in rows):
        for row in rows:
            row["path"] = paths[row["input_index"]]
    inputs = [InputInfo(path=r["path"], format=r["format"], rank=r["rank"], events=r["event_count"]) for r in rows]
    head = {"wall_ms": round(wall_ms, 3), "gpu_busy_pct": report_number(summary["gpu_busy_pct"]),
            "ranks": summary["ranks"], "basis": summary["basis"]}
    if summary["world_size"] and summary["world_size"] > summary["ranks"]:
        head["world_size"] = summary["world_size"]
    if (mixed := mixed_runs((i.format, i.rank) for i in inputs)) is not None:
        head["mixed_inputs"] = mixed
    attribution: list[dict[str, Any]] = []
    if summary["basis"] == "timeline":
        head.update(gpu_states(store))
        attribution = attribution_rows(store)
    eff = efficiency.efficiency_rows(store, peaks) if summary["basis"] == "timeline" else []
    if (words := efficiency.headline(eff)) is not None:
        head["efficiency"] = words
    report = Report(inputs=inputs, summary=head, findings=findings, metrics=collect_metrics(store),
                    attribution=attribution, window=window_info(store) if summary["basis"] else {},
                    efficiency=eff, operators=efficiency.operator_rows(store) if eff else [])
    report.memory = memory_section(store)
    report.what_if = [w.to_dict() for w in top_what_ifs(report)]
    report.store_path = store.path
    return report


def gpu_states(store: Store) -> dict[str, Any]:
    """What the GPUs did over the window, as % of it (attribution.time): computing, communicating, waiting in
    collectives for a later rank (and the rank waited for most), so that the headline's busy time says what
    it was busy with."""
    store.include("attribution.time")
    row = store.query("""
        SELECT 100.0 * sum(computing_ns) / sum(computing_ns + communicating_ns + waiting_ns + idle_ns) AS computing_pct,
               100.0 * sum(communicating_ns + waiting_ns)
                   / sum(computing_ns + communicating_ns + waiting_ns + idle_ns) AS communication_pct,
               100.0 * sum(waiting_ns) / sum(computing_ns + communicating_ns + waiting_ns + idle_ns) AS waiting_pct,
               arg_max(waited_for, waiting_ns) AS waiting_for_rank
        FROM (SELECT * REPLACE (coalesce(computing_ns, 0) AS computing_ns,
                                coalesce(communicating_ns, 0) AS communicating_ns,
                                coalesce(waiting_ns, 0) AS waiting_ns, coalesce(idle_ns, 0) AS idle_ns)
              FROM attribution_gpu_states)""")[0]
    return {k: report_number(v) for k, v in row.items()}


def check_step_range(store: Store, name: str) -> None:
    """Refuse a --step-range that names no host range of any input, naming the repeated ranges there are."""
    if store.scalar("SELECT count(*) FROM trace_step_method WHERE method = 'range'"):
        return
    there = [r["family"] for r in store.query("""
        SELECT family FROM trace_step_ranges GROUP BY family HAVING count(*) >= 3
        ORDER BY count(*) DESC, family LIMIT 8""")]
    listed = ", ".join(repr(f[:-1] + "N" if f.endswith(" #") else f) for f in there)
    raise InputError(f"--step-range {name!r}: no host range of that name in these traces"
                     + (f"; repeated ranges there: {listed}" if listed else ""))


def window_info(store: Store) -> dict[str, Any]:
    """The window the findings judge, per rank and for the report (trace.window): its kind ('steps',
    'capture_range', 'whole_trace'), how its steps were found (``steps``), its bounds (ns), its steady steps and
    the warm-up steps before it. The report's own is the first rank's, over every rank's bounds."""
    store.include("trace.window")
    ranks = [{"rank": r["rank"], "kind": r["kind"], "steps": steps_found(r), "start_ns": r["start_ns"],
              "end_ns": r["end_ns"], "step_count": r["step_count"], "warmup_steps": r["warmup_steps"]}
             for r in store.query("""
                 SELECT w.rank, w.kind, w.start_ns, w.end_ns, w.step_count, m.method, m.detail, m.warmup_steps
                 FROM trace_windows w JOIN trace_step_method m USING (source_id)
                 WHERE w.start_ns IS NOT NULL ORDER BY w.rank NULLS LAST, w.source_id""")]
    if not ranks:
        return {}
    return {**ranks[0], "start_ns": min(r["start_ns"] for r in ranks), "end_ns": max(r["end_ns"] for r in ranks),
            "ranks": ranks}


def steps_found(row: dict[str, Any]) -> str:
    """How a rank's window was found, in words: 'ProfilerStep#N annotations', "the host range 'train_step'", …"""
    if row["kind"] == "capture_range":
        return "the cudaProfilerStart/Stop range (no steps found)"
    if row["kind"] == "graph_capture":
        return "nothing: the trace is a CUDA graph capture, a one-off phase"
    if row["kind"] != "steps":
        return "no steps found: from the first to the last GPU work"
    if row["method"] == "profiler":
        return "ProfilerStep#N annotations"
    if row["method"] == "kernel":
        return f"the repeating kernel {short_name(str(row['detail']))}"
    name = str(row["detail"])
    return f"the host ranges '{name[:-1]}N'" if name.endswith(" #") else f"the host range '{name}'"


def attribution_rows(store: Store) -> list[dict[str, Any]]:
    """The attribution of every GPU's time (the report's ``attribution``): rank, device, step, cause, detail, ms.
    Per rank and device the rows sum to its window."""
    store.include("attribution.time")
    return [{k: report_number(v) for k, v in row.items()} for row in store.query("""
        SELECT rank, device, step, cause, detail, ns / 1e6 AS ms FROM attribution_slices
        ORDER BY rank, device, step NULLS FIRST, ms DESC, cause, detail""")]


METRICS: dict[str, tuple[str, str]] = {
    # name: (module, query) — every number in ms or %, per rank/device.
    "gpu_idle": ("gpu.idle", """
        SELECT rank, device, wall_ns / 1e6 AS wall_ms, busy_pct, idle_ns / 1e6 AS idle_ms,
               host_wait_short_ns / 1e6 AS host_wait_short_ms, host_wait_long_ns / 1e6 AS host_wait_long_ms,
               kernel_wait_ns / 1e6 AS kernel_wait_ms, other_ns / 1e6 AS other_ms
        FROM gpu_idle_by_device ORDER BY rank, device"""),
    "gpu_time_by_category": ("gpu.kernels", """
        SELECT rank, category, activity_count, total_ns / 1e6 AS total_ms, share_pct
        FROM gpu_time_by_category ORDER BY rank, total_ms DESC"""),
    "top_kernels": ("gpu.kernels", """
        SELECT rank, name, category, launch_count, total_ns / 1e6 AS total_ms, mean_ns / 1e3 AS mean_us, share_pct
        FROM gpu_top_kernels QUALIFY row_number() OVER (PARTITION BY rank ORDER BY total_ns DESC) <= 10
        ORDER BY rank, total_ms DESC"""),
    "launch": ("gpu.launch", """
        SELECT rank, device, kernel_count, kernels_per_step, median_kernel_ns / 1e3 AS median_kernel_us,
               tiny_kernel_pct, median_launch_latency_ns / 1e3 AS median_launch_latency_us,
               p90_launch_latency_ns / 1e3 AS p90_launch_latency_us, graph_kernel_count
        FROM gpu_launch_stats ORDER BY rank, device"""),
    "host_syncs": ("host.sync", """
        SELECT rank, sync_count, syncs_per_step, blocked_ns / 1e6 AS blocked_ms, gpu_idle_ns / 1e6 AS gpu_idle_ms,
               top_origin FROM host_sync_by_rank ORDER BY rank"""),
    "copies": ("host.memcpy", """
        SELECT rank, copy_kind, host_memory, copy_count, total_bytes, total_ns / 1e6 AS total_ms, bandwidth_gbps
        FROM host_copies_by_rank ORDER BY rank, copy_kind, host_memory"""),
    "comm_overlap": ("comm.overlap", """
        SELECT rank, device, comm_ns / 1e6 AS comm_ms, compute_ns / 1e6 AS compute_ms,
               overlap_ns / 1e6 AS overlap_ms, exposed_comm_ns / 1e6 AS exposed_comm_ms, overlap_pct
        FROM comm_overlap_by_device ORDER BY rank, device"""),
    "step_times": ("trace.summary", "SELECT rank, step, step_ms, warmup FROM trace_step_times"),
    # Rank × step (the ranks heatmap): GPU step time, compute, waits inside collectives, arrival lateness (ms).
    "rank_steps": ("ranks.steps", """
        SELECT rank, step, step_ns / 1e6 AS step_ms, compute_ns / 1e6 AS compute_ms,
               comm_wait_ns / 1e6 AS comm_wait_ms, lateness_ns / 1e6 AS arrival_lateness_ms,
               exposed_wait_ns / 1e6 AS exposed_wait_ms, blocked_exposed_ns / 1e6 AS others_wait_ms,
               comm_ns / 1e6 AS comm_ms, host_step_ns / 1e6 AS host_step_ms, host_gap_ns / 1e6 AS host_gap_ms,
               kernels, collectives
        FROM ranks_steps ORDER BY rank, step"""),
    "collectives": ("hang.progress", """
        SELECT backend, pg_name AS pg, label AS pg_label, rank, has_dump, last_enqueued_seq, last_described,
               last_state, last_started_seq, last_completed_seq, pending_seq, pending_described, waited_ms,
               last_call_site FROM hang_progress ORDER BY backend, pg_name, rank"""),
    "flight_recorder_dumps": ("hang.dumps", """
        SELECT rank, path, version, encoding, comm_lib_version, entry_count AS entries, used, note
        FROM hang_dumps ORDER BY rank, NOT used, path"""),
    # Nsight Compute: per kernel (all profiled launches of one function and launch configuration), times in ms.
    "ncu_kernels": ("ncu.sol", """
        SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, launches, total_ns / 1e6 AS total_ms,
               kernel_class, busiest_unit, busiest_unit_pct, sm_pct, mem_pct, dram_pct, l2_pct, l1_pct, tensor_pct,
               achieved_occupancy_pct, theoretical_occupancy_pct, waves, registers_per_thread, device_name
        FROM ncu_kernel_sol ORDER BY rank, total_ns DESC"""),
    "ncu_warp_stalls": ("ncu.stalls", """
        SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, reason, share_pct, cycles_per_issue,
               source, judged
        FROM ncu_warp_stalls
        QUALIFY row_number() OVER (PARTITION BY source_id, demangled_name, grid, block ORDER BY share_pct DESC) <= 3
        ORDER BY rank, total_ns DESC, share_pct DESC"""),
    "ncu_roofline": ("ncu.roofline", """
        SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, precision,
               flop_per_s / 1e12 AS tflop_per_s, dram_bytes_per_s / 1e9 AS dram_gb_per_s, arithmetic_intensity,
               peak_flop_per_s / 1e12 AS peak_tflop_per_s, peak_bytes_per_s / 1e9 AS peak_gb_per_s, ridge_point,
               pct_of_roof, roof_side, peak_source
        FROM ncu_roofline ORDER BY rank, total_ns DESC"""),
    "ncu_coverage": ("ncu.coverage", """
        SELECT rank, path, launches, unmeasured_launches, unmeasured_kernels, collected_set, sections, not_judged
        FROM ncu_coverage ORDER BY rank"""),
    "ncu_rules_vs_tracedoc": ("ncu.verdicts", """
        SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, ncu_rule, ncu_title, ncu_type,
               ncu_speedup_pct, tracedoc_rule,
               CASE WHEN tracedoc_rule IS NULL THEN 'no tracedoc counterpart'
                    WHEN not_limiting_reason IS NOT NULL THEN 'overruled: ' || not_limiting_reason
                    ELSE 'judged by tracedoc rule ' || tracedoc_rule END AS tracedoc_view
        FROM ncu_rule_verdicts
        ORDER BY rank, total_ns DESC, name, grid, block, ncu_speedup_pct DESC NULLS LAST, ncu_rule"""),
    # ncu GEMM kernels against cuBLAS on a product of the same size (GEMM ladder measurements given with the report).
    "ncu_cublas_ceiling": ("ncu.cublas_ceiling", """
        SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, product, dtype, tflop_per_s,
               cublas_tflop_per_s, pct_of_cublas, sm_clock_mhz, cublas_sm_clock_mhz, total_ns / 1e6 AS total_ms,
               saving_ns / 1e6 AS saving_ms
        FROM ncu_cublas_ceiling ORDER BY rank, total_ns DESC"""),
    # The GEMM ladder's cuBLAS timings given (gemm_ladder.json): the ceilings on offer, matched or not.
    "gemm_ladder_cublas": ("ncu.cublas_ceiling", """
        SELECT gpu, m || '×' || n || '×' || k AS product, dtype, ms, flop_per_s / 1e12 AS tflop_per_s, sm_clock_mhz,
               gpu_bound, profiler
        FROM gemm_ladder_results WHERE rung = 'cublas' ORDER BY gpu, flop, ms"""),
    # ncu kernels found in a timeline given with the report (same demangled name, grid and block), times in ms.
    "ncu_trace_links": ("ncu.links", """
        SELECT rank, name AS kernel, grid, block, launches, total_ns / 1e6 AS total_ms, timeline_sources,
               timeline_launches, timeline_total_ns / 1e6 AS timeline_total_ms,
               timeline_mean_ns / 1e3 AS timeline_mean_us, impact_scale, timeline_name
        FROM ncu_trace_links WHERE timeline_launches > 0 ORDER BY rank, timeline_total_ns DESC"""),
    **MEMORY_METRICS,  # GPU memory: allocator events and snapshots (tracedoc.memory_report)
    **HEALTH_METRICS,  # GPU health: NVML snapshots and telemetry (tracedoc.health.metrics)
}

def collect_metrics(store: Store, tables: dict[str, tuple[str, str]] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The measured tables the report carries for renderers and the dashboard (ms and %, rounded); ``tables``
    picks other ones than all of them. A table of an analysis of inputs the store does not hold is empty."""
    metrics: dict[str, list[dict[str, Any]]] = {}
    for name, (module, sql) in (tables or METRICS).items():
        if not store.applies(module):
            metrics[name] = []
            continue
        store.include(module)
        metrics[name] = [{k: report_number(v) for k, v in row.items()} for row in store.query(sql)]
    return metrics
