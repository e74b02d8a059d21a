"""The Python API the CLI, the dashboard and the tests share: ``analyze(paths) -> Report`` does what
`tracedoc analyze` does (here, on a Dask cluster, with a Perfetto trace beside the report, a what-if projection,
under memory and inflate limits, or re-reading a saved report); and the health reports of ``tracedoc health`` (a GPU
snapshot, or telemetry files, judged by the rules that read ``health.*``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracedoc.errors import InputError
from tracedoc.health.metrics import HEALTH_METRICS
from tracedoc.ingest import InputFile, discover
from tracedoc.ingest.sources import SourceRow, insert_sources
from tracedoc.judge import Rule, judge, load_rules
from tracedoc.judge.rule import check_thresholds, mark_kinds
from tracedoc.limits import Limits
from tracedoc.options import AnalysisOptions, Peaks
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
           "health_rules", "health_snapshot_report", "input_files", "load_report", "open_store", "run_analysis",
           "saved_report_path", "store_key"]

HEALTH_GROUP = "health."


def analyze(paths: Sequence[Path | str] | Path | str, rules_dirs: Sequence[Path] = (),
            cache_dir: Path | None = None, use_cache: bool = True,
            thresholds: dict[str, dict[str, float]] | None = None, progress: Progress | None = None,
            step_range: str | None = None, *, cluster: ClusterSpec | None = None, limits: Limits | None = None,
            what_if: str | None = None, perfetto: Path | None = None,
            peaks: Peaks | None = None, step_time_ms: float | None = None) -> Report:
    """Ingest the traces at ``paths`` (files or directories of ranks; one path may be given as it is), measure,
    judge and return the report: ``run_analysis`` with the options these keyword arguments make.

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
    if step_time_ms is not None:
        peaks = Peaks(**{**(peaks.given() if peaks else {}), "step_time_ms": step_time_ms})
    options = AnalysisOptions(rules_dirs=tuple(rules_dirs), thresholds=thresholds or {}, step_range=step_range,
                              peaks=peaks, limits=Limits.from_env() if limits is None else limits, what_if=what_if)
    return run_analysis(paths, options, cache_dir=cache_dir, use_cache=use_cache, progress=progress,
                        cluster=cluster, perfetto=perfetto)


def run_analysis(paths: Sequence[Path | str] | Path | str, options: AnalysisOptions, *,
                 cache_dir: Path | None = None, use_cache: bool = True, progress: Progress | None = None,
                 cluster: ClusterSpec | None = None, perfetto: Path | None = None) -> Report:
    """The report of the traces at ``paths``, judged by ``options`` (what ``tracedoc analyze`` runs; ``analyze``'s
    keyword arguments say what the others do)."""
    rules = load_rules(options.rules_dirs)
    if options.what_if is not None and options.what_if not in {r.id for r in rules}:
        raise InputError(f"--what-if {options.what_if}: no such rule (tracedoc rules lists them)")
    if (saved := saved_report_path(paths)) is not None:
        options.refuse_saved(str(saved), tuple(what for what, given in (
            ("--workers or a Dask scheduler", cluster is not None), ("--format perfetto", perfetto is not None))
            if given))
        report = read_report(saved)
    elif cluster is not None:
        if perfetto is not None:
            raise InputError("--format perfetto writes the events of one store: not with --workers or a Dask "
                             "scheduler")
        if options.peaks is not None:
            raise InputError("--peak-tflops, --peak-gbps, --flops-per-step, --bytes-per-step and --step-time-ms are "
                             "not taken with --workers or a Dask scheduler")
        from tracedoc.scale import analyze_distributed  # Dask is imported only for distributed runs

        report = analyze_distributed(paths, cluster, options, cache_dir=cache_dir, use_cache=use_cache,
                                     progress=progress)
    else:
        check_thresholds(rules, {rule: dict(values) for rule, values in options.thresholds.items()})
        report = _local_report(input_files(paths, options.limits), store_location(cache_dir, use_cache), options,
                               rules, progress, perfetto)
    if options.what_if is not None:
        projection_for(report, options.what_if)
    return report


def _local_report(inputs: list[InputFile], cache_dir: Path | None, options: AnalysisOptions, rules: list[Rule],
                  progress: Progress | None, perfetto: Path | None) -> Report:
    """The report of inputs analysed on this machine: with a cache and no Perfetto trace asked for, the report kept
    beside the store by an earlier run given the same inputs, rules and options (tracedoc.report_cache), else
    analysed now (and kept). ``rules``: those ``options`` name, loaded."""
    kept: tuple[Path, str] | None = None
    if cache_dir is not None and perfetto is None:
        kept, report = kept_report(inputs, cache_dir, options, rules)
        if report is not None:
            return report
    store, report = load_report(inputs, cache_dir, options, progress)
    try:
        if perfetto is not None:
            _write_export(store, report, "perfetto", perfetto, progress)
    finally:
        store.close()
    if kept is not None:
        keep_report(*kept, report)
    return report


def kept_report(inputs: Sequence[InputFile], cache_dir: Path, options: AnalysisOptions,
                rules: list[Rule] | None = None) -> tuple[tuple[Path, str], Report | None]:
    """Where the report of ``inputs`` judged by ``options`` is kept in the cache at ``cache_dir`` (its store's path
    and the report's key: tracedoc.report_cache), and that report when an earlier run kept it, its findings' kinds
    given by the rules (``rules``: those ``options`` name, loaded; None: loaded here)."""
    rules = load_rules(options.rules_dirs) if rules is None else rules
    key = store_key(inputs)
    thresholds = sorted((rule, sorted(values.items())) for rule, values in options.thresholds.items())
    place = cache_dir / f"{key}.duckdb", report_key(key, rules, thresholds, options.step_range, options.peaks,
                                                    [str(i.path) for i in inputs],
                                                    [str(p) for i in inputs for p in i.earlier])
    if (report := cached_report(*place)) is not None:
        mark_kinds(report.findings, rules)  # what the rules make of each finding is not in the JSON
    return place, report


def saved_report_path(paths: Sequence[Path | str] | Path | str) -> Path | None:
    """The path when ``paths`` is one ``*.json`` file holding a saved tracedoc JSON report, else None (as serve and
    diff tell one: nothing else is opened here, so a file of the kernel's such as /proc/kmsg is never read)."""
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if len(given) != 1 or str(given[0]) == "-":
        return None
    path = Path(given[0])
    return path if path.is_file() and path.suffix == ".json" and looks_like_report(path) else None


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
    from tracedoc.ingest.health.nvml import FORMAT, insert_snapshot, snapshot_tool

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
