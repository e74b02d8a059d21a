"""The Python API the CLI, the dashboard and the tests share: ``analyze(paths) -> Report``."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracedoc.ingest import InputFile, discover, load_all
from tracedoc.judge import judge, load_rules
from tracedoc.report import InputInfo, Report
from tracedoc.store import Store, open_cached_store
from tracedoc.store.cache import content_key, default_cache_dir

Progress = Callable[[str], None]


def analyze(paths: Sequence[Path | str], rules_dirs: Sequence[Path] = (), cache_dir: Path | None = None,
            use_cache: bool = True, thresholds: dict[str, dict[str, float]] | None = None,
            progress: Progress | None = None) -> Report:
    """Ingest the traces at ``paths`` (files or directories of ranks), measure, judge and return the report."""
    rules = load_rules(tuple(rules_dirs))
    inputs = discover([Path(p) for p in paths])
    if use_cache:
        store, _ = open_store(inputs, cache_dir or default_cache_dir(), progress)
        with store:
            return build_report(store, rules, thresholds, progress)
    with tempfile.TemporaryDirectory(prefix="tracedoc-") as tmp:
        store, _ = open_store(inputs, Path(tmp), progress)
        with store:
            return build_report(store, rules, thresholds, progress)


def open_store(inputs: Sequence[InputFile], cache_dir: Path, progress: Progress | None = None) -> tuple[Store, bool]:
    """The store for these inputs: from the cache when already ingested, else ingested now."""
    key = content_key([f"{i.format}:{i.digest}" for i in inputs])
    return open_cached_store(key, cache_dir, lambda store: load_all(store, inputs, progress))


def build_report(store: Store, rules: list, thresholds: dict[str, dict[str, float]] | None = None,
                 progress: Progress | None = None) -> Report:
    """Measure and judge an ingested store."""
    if progress:
        progress("analysing")
    store.include("trace.summary")
    summary = store.query("SELECT * FROM trace_summary")[0]
    wall_ms = float(summary["wall_ms"] or 0.0)  # 0 for inputs without a timeline (e.g. hang dumps)
    findings = judge(store, rules, wall_ms, thresholds)
    inputs = [InputInfo(path=r["path"], format=r["format"], rank=r["rank"], events=r["event_count"])
              for r in store.query("SELECT path, format, rank, event_count FROM sources ORDER BY source_id")]
    return Report(inputs=inputs,
                  summary={"wall_ms": round(wall_ms, 3),
                           "gpu_busy_pct": _round(summary["gpu_busy_pct"]),
                           "ranks": summary["ranks"]},
                  findings=findings, metrics=collect_metrics(store))


_METRICS: dict[str, tuple[str, str]] = {
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
    "step_times": ("trace.summary", "SELECT rank, step, step_ms FROM trace_step_times"),
}


def collect_metrics(store: Store) -> dict[str, list[dict[str, Any]]]:
    """The measured tables the report carries for renderers and the dashboard (ms and %, rounded)."""
    metrics = {}
    for name, (module, sql) in _METRICS.items():
        store.include(module)
        metrics[name] = [{k: _round(v) for k, v in row.items()} for row in store.query(sql)]
    return metrics


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    if hasattr(value, "as_integer_ratio") and not isinstance(value, int | bool):
        return round(float(value), 3)
    return value
