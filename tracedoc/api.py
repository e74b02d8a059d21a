"""The Python API the CLI, the dashboard and the tests share: ``analyze(paths) -> Report`` does what
`tracedoc analyze` does (here, on a Dask cluster, with a Perfetto trace beside the report, a what-if projection,
under memory and inflate limits, or re-reading a saved report); and the health reports of ``tracedoc health`` (a GPU
snapshot, or telemetry files, judged by the rules that read ``health.*``)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc import efficiency
from tracedoc.errors import InputError
from tracedoc.health.metrics import HEALTH_METRICS
from tracedoc.ingest import InputFile, discover
from tracedoc.ingest.sources import SourceRow, insert_sources
from tracedoc.judge import Rule, judge, load_rules
from tracedoc.judge.rule import check_thresholds
from tracedoc.limits import Limits
from tracedoc.pipeline import (
    METRICS,
    Progress,
    build_report,
    collect_metrics,
    input_files,
    load_report,
    open_store,
    store_key,
)
from tracedoc.report import InputInfo, Report
from tracedoc.report_cache import cached_report, keep_report, report_key
from tracedoc.saved import looks_like_report, read_report
from tracedoc.store import Store, memory_store
from tracedoc.store.cache import store_location
from tracedoc.whatif import projection_for

if TYPE_CHECKING:
    from tracedoc.health.nvml import Snapshot
    from tracedoc.scale.spec import ClusterSpec

__all__ = ["METRICS", "Progress", "analyze", "build_report", "collect_metrics", "health_files_report",
           "health_rules", "health_snapshot_report", "input_files", "load_report", "open_store", "saved_report_path",
           "store_key"]

HEALTH_GROUP = "health."


def analyze(paths: Sequence[Path | str] | Path | str, rules_dirs: Sequence[Path] = (),
            cache_dir: Path | None = None, use_cache: bool = True,
            thresholds: dict[str, dict[str, float]] | None = None, progress: Progress | None = None,
            step_range: str | None = None, *, cluster: ClusterSpec | None = None, limits: Limits | None = None,
            what_if: str | None = None, perfetto: Path | None = None,
            peaks: efficiency.Options | None = None, step_time_ms: float | None = None) -> Report:
    """Ingest the traces at ``paths`` (files or directories of ranks; one path may be given as it is), measure,
    judge and return the report.

    ``thresholds`` ({rule: {name: value}}) must name rules and thresholds that exist. ``step_range`` names the host
    range (NVTX or record_function) that marks a step, where tracedoc would choose otherwise (trace.steps). Without
    the cache, the store lives in memory and the inputs are never hashed. ``cluster``: the per-rank work on Dask
    (tracedoc.scale; the same report). ``limits``: the memory and inflate caps of every store and reader of the run,
    the workers' too (None: those the environment sets). ``what_if``: a rule whose largest finding's projection the
    report then carries (``tracedoc.whatif.projection_for``). ``perfetto``: write the Perfetto trace of the store
    analysed there too (not with a cluster: it holds the events of one store). ``peaks``: the peaks and FLOPs per
    step the user gives (--peak-tflops, …; not with a cluster). ``step_time_ms``: the step time of the user's own
    logs (--step-time-ms; a positive number): MFU and MBU divide by it.

    One saved JSON report given alone (`tracedoc analyze --format json`) is read back as it is, to be rendered
    again: nothing is measured or judged anew, so thresholds, a step range, a cluster or a Perfetto trace are refused.
    """
    limits = Limits.from_env() if limits is None else limits
    if step_time_ms is not None:
        peaks = _with_step_time(peaks, step_time_ms)
    rules = load_rules(tuple(rules_dirs))
    if what_if is not None and what_if not in {r.id for r in rules}:
        raise InputError(f"--what-if {what_if}: no such rule (tracedoc rules lists them)")
    if (saved := saved_report_path(paths)) is not None:
        report = _saved_report(saved, thresholds, step_range, cluster, perfetto, peaks)
    elif cluster is not None:
        if perfetto is not None:
            raise InputError("--format perfetto writes the events of one store: not with --workers or a Dask "
                             "scheduler")
        if peaks is not None:
            raise InputError("--peak-tflops, --peak-gbps, --flops-per-step, --bytes-per-step and --step-time-ms are "
                             "not taken with --workers or a Dask scheduler")
        from tracedoc.scale import analyze_distributed  # Dask is imported only for distributed runs

        report = analyze_distributed(paths, cluster, rules_dirs=rules_dirs, cache_dir=cache_dir, use_cache=use_cache,
                                     thresholds=thresholds, progress=progress, step_range=step_range, limits=limits)
    else:
        check_thresholds(rules, thresholds or {})
        report = _local_report(input_files(paths, limits), store_location(cache_dir, use_cache), rules, thresholds,
                               progress, step_range, limits, peaks, perfetto)
    if what_if is not None:
        projection_for(report, what_if)
    return report


def _local_report(inputs: list[InputFile], cache_dir: Path | None, rules: list[Rule],
                  thresholds: dict[str, dict[str, float]] | None, progress: Progress | None, step_range: str | None,
                  limits: Limits, peaks: efficiency.Options | None, perfetto: Path | None) -> Report:
    """The report of inputs analysed on this machine: with a cache and no Perfetto trace asked for, the report kept
    beside the store by an earlier run given the same inputs, rules and settings (tracedoc.report_cache), else
    analysed now (and kept)."""
    kept: tuple[Path, str] | None = None
    if cache_dir is not None and perfetto is None:
        key = store_key(inputs)
        kept = (cache_dir / f"{key}.duckdb", report_key(key, rules, thresholds, step_range, peaks,
                                                          [str(i.path) for i in inputs]))
        if (report := cached_report(*kept)) is not None:
            return report
    store, report = load_report(inputs, cache_dir, rules, thresholds, progress, step_range, limits, peaks)
    try:
        if perfetto is not None:
            _write_export(store, report, "perfetto", perfetto, progress)
    finally:
        store.close()
    if kept is not None:
        keep_report(*kept, report)
    return report


def _with_step_time(peaks: efficiency.Options | None, step_time_ms: Any) -> efficiency.Options:
    """``peaks`` with the user's step time (a positive, finite number of ms, else an InputError)."""
    if isinstance(step_time_ms, bool) or not isinstance(step_time_ms, (int, float)) \
            or not math.isfinite(step_time_ms) or step_time_ms <= 0:
        raise InputError(f"step_time_ms: {step_time_ms!r} is not a positive number of milliseconds")
    return dataclasses.replace(peaks or efficiency.Options(), step_time_ms=float(step_time_ms))


def saved_report_path(paths: Sequence[Path | str] | Path | str) -> Path | None:
    """The path when ``paths`` is one ``*.json`` file holding a saved tracedoc JSON report, else None (as serve and
    diff tell one: nothing else is opened here, so a file of the kernel's such as /proc/kmsg is never read)."""
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if len(given) != 1 or str(given[0]) == "-":
        return None
    path = Path(given[0])
    return path if path.is_file() and path.suffix == ".json" and looks_like_report(path) else None


def _saved_report(path: Path, thresholds: dict[str, dict[str, float]] | None, step_range: str | None,
                  cluster: ClusterSpec | None, perfetto: Path | None,
                  peaks: efficiency.Options | None = None, step_time_ms: float | None = None) -> Report:
    """A saved report, read back for rendering; what would need the traces again is refused."""
    needs_traces = [what for what, given in (("--set", thresholds), ("--step-range", step_range is not None),
                                             ("--workers or a Dask scheduler", cluster is not None),
                                             ("--format perfetto", perfetto is not None),
                                             ("the peaks or FLOPs per step", peaks is not None)) if given]
    if needs_traces:
        raise InputError(f"{path}: a saved report is rendered as it is; give the traces for {', '.join(needs_traces)}")
    return read_report(path)


def _write_export(store: Store, report: Report, name: str, path: Path, progress: Progress | None) -> None:
    """The export ``name`` (tracedoc.export.EXPORTS) of the analysed store, written to ``path`` (by DuckDB: the
    events never pass through Python)."""
    from tracedoc.export import EXPORTS

    export = EXPORTS[name]
    if progress:
        progress(f"writing the {export.title}")
    path.parent.mkdir(parents=True, exist_ok=True)
    export.write(store, report, path)


def health_rules(rules: Sequence[Rule]) -> list[Rule]:
    """The rules that judge GPU health (they read an analysis of the health group)."""
    return [r for r in rules if r.reads.startswith(HEALTH_GROUP)]


def health_snapshot_report(snapshot: Snapshot, label: str, rules: Sequence[Rule],
                           thresholds: dict[str, dict[str, float]] | None = None) -> Report:
    """Judge one NVML snapshot on its own; ``label`` names where it came from (the live driver or a recording).
    Only the health rules and measurements apply, and there is no trace window (wall time 0)."""
    from tracedoc.ingest.nvml import FORMAT, insert_snapshot, snapshot_tool

    def build(store: Store) -> None:
        insert_sources(store.con, [SourceRow(0, label, FORMAT, event_count=len(snapshot.gpus),
                                             tool=snapshot_tool(snapshot), input_index=0)])
        insert_snapshot(store, 0, snapshot)

    with memory_store(build, Limits.from_env()) as store:
        return _health_report(store, rules, thresholds)


def health_files_report(paths: Sequence[Path], rules: Sequence[Rule],
                        thresholds: dict[str, dict[str, float]] | None = None) -> Report:
    """Judge telemetry or NVML recordings on their own (e.g. the file a watch just wrote)."""
    store, _ = open_store(discover(list(paths)), None, limits=Limits.from_env())
    with store:
        return _health_report(store, rules, thresholds)


def _health_report(store: Store, rules: Sequence[Rule], thresholds: dict[str, dict[str, float]] | None) -> Report:
    """The health rules' findings and the health measurements of a store."""
    inputs = [InputInfo(path=r["path"], format=r["format"], rank=r["rank"], events=r["event_count"])
              for r in store.query("SELECT path, format, rank, event_count FROM sources ORDER BY source_id")]
    return Report(inputs=inputs, summary={"wall_ms": 0.0, "gpu_busy_pct": None, "ranks": 0},
                  findings=judge(store, health_rules(rules), 0.0, thresholds),
                  metrics=collect_metrics(store, HEALTH_METRICS))
