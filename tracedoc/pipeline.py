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
from tracedoc.judge import Rule, judge
from tracedoc.kinds import mixed_runs
from tracedoc.limits import Limits
from tracedoc.memory_report import MAX_DEVICES, MEMORY_METRICS, devices_left_out, memory_headline, memory_section
from tracedoc.report import InputInfo, Report
from tracedoc.report_tables import ReportTable, report_rows
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
    store.lock()
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
    if thresholds:  # what --set changed, so that a report says the thresholds it was judged by
        head["thresholds"] = {rule: dict(sorted(values.items())) for rule, values in sorted(thresholds.items())}
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
    if len(report.memory) >= MAX_DEVICES and (left_out := devices_left_out(store)):
        report.summary["memory_devices_left_out"] = left_out
    if not summary["basis"] and (words := memory_headline(report.memory, findings)) is not None:
        report.summary["memory"] = words  # a memory-only input (a snapshot): what failed or leaked, and how much
    report.what_if = [w.to_dict() for w in top_what_ifs(report)]
    return report


def gpu_states(store: Store) -> dict[str, Any]:
    """What the GPUs did over the window, as % of it (attribution.time): computing, communicating, waiting in
    collectives for a later rank (and the rank waited for most), so that the headline's busy time says what
    it was busy with."""
    store.include("attribution.time")
    row = store.query("SELECT * FROM attribution_report_gpu_states")[0]
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
    ranks = [{"rank": r["rank"], "kind": r["kind"], "steps": steps_found(r), "start_ns": r["start_ns"],
              "end_ns": r["end_ns"], "step_count": r["step_count"], "warmup_steps": r["warmup_steps"]}
             for r in report_rows(store, WINDOWS)]
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
        from tracedoc.ingest.ncu_model import short_name  # here: ncu_model imports pyarrow, which a run needs not

        return f"the repeating kernel {short_name(str(row['detail']))}"
    name = str(row["detail"])
    return f"the host ranges '{name[:-1]}N'" if name.endswith(" #") else f"the host range '{name}'"


def attribution_rows(store: Store) -> list[dict[str, Any]]:
    """The attribution of every GPU's time (the report's ``attribution``): rank, device, step, cause, detail, ms.
    Per rank and device the rows sum to its window."""
    return report_rows(store, ATTRIBUTION)


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
    **MEMORY_METRICS,  # GPU memory: allocator events and snapshots (tracedoc.memory_report)
    **HEALTH_METRICS,  # GPU health: NVML snapshots and telemetry (tracedoc.health.metrics)
}

# The report's attribution and window (Report.attribution, Report.window).
ATTRIBUTION = ReportTable("attribution.time", "attribution_report_slices",
                          "rank, device, step NULLS FIRST, ms DESC, cause, detail")
WINDOWS = ReportTable("trace.window", "trace_report_windows", "rank NULLS LAST, source_id")


def collect_metrics(store: Store, tables: dict[str, ReportTable] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The measured tables the report carries for renderers and the dashboard (ms and %, rounded); ``tables``
    picks other ones than all of them. A table of an analysis of inputs the store does not hold is empty."""
    return {name: report_rows(store, table) if store.applies(table.module) else []
            for name, table in (tables or METRICS).items()}
