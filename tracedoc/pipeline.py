"""The analysis on this machine: inputs → store (ingested, or from the cache) → measured and judged → Report.

``tracedoc.api.analyze`` runs it (a distributed run builds its report with ``build_report`` over a store of the
workers' summaries); the dashboard and the diff call it for a store they keep open."""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracedoc import efficiency
from tracedoc.errors import InputError
from tracedoc.ingest import InputFile, discover, load_all
from tracedoc.ingest.cycles import set_aside_rows
from tracedoc.ingest.names import rank_in_name
from tracedoc.ingest.nsys.memory_cap import fitted_limits
from tracedoc.judge import judge, load_rules
from tracedoc.judge.engine import applicable, rule_reads
from tracedoc.judge.rule import Rule, check_thresholds
from tracedoc.kinds import TIMELINE, kind_of, mixed_runs, runs_apart, runs_naming_no_rank
from tracedoc.limits import Limits
from tracedoc.memory_report import devices_left_out, first_devices, memory_headline
from tracedoc.options import AnalysisOptions
from tracedoc.report import InputInfo, Report
from tracedoc.report_tables import (
    METRICS,
    SECTIONS,
    ReportTable,
    Section,
    report_rows,
    report_views,
    section_rows,
)
from tracedoc.store import Store, memory_store, open_cached_store
from tracedoc.store.cache import content_key, discard_damaged, is_damage
from tracedoc.units import report_number
from tracedoc.whatif import top_what_ifs

Progress = Callable[[str], None]


def input_files(paths: Sequence[Path | str] | Path | str, limits: Limits = Limits()) -> list[InputFile]:
    """The inputs at ``paths``: files or directories of ranks, one path given as it is or several (standard input
    spooled under ``limits``' inflate cap)."""
    return discover([Path(p) for p in ([paths] if isinstance(paths, str | os.PathLike) else paths)], limits)


def load_report(inputs: Sequence[InputFile], cache_dir: Path | None, options: AnalysisOptions,
                progress: Progress | None = None) -> tuple[Store, Report]:
    """The store of these inputs (left open for the caller to close) and its report, judged by ``options``; a
    cached store found damaged while reading it is rebuilt once. ``cache_dir`` None: a store in memory, for this
    report only."""
    paths = [str(i.path) for i in inputs]
    set_aside = set_aside_rows(inputs)
    store, cached = open_store(inputs, cache_dir, progress, options.limits)
    try:
        return store, build_report(store, options, progress, paths=paths, set_aside=set_aside)
    except BaseException as exc:
        store.close()
        if not cached or store.path is None or not isinstance(exc, Exception) or not is_damage(exc, store.path):
            raise
        discard_damaged(store.path, exc)
    store, _ = open_store(inputs, cache_dir, progress, options.limits)
    try:
        return store, build_report(store, options, progress, paths=paths, set_aside=set_aside)
    except BaseException:
        store.close()
        raise


def open_store(inputs: Sequence[InputFile], cache_dir: Path | None, progress: Progress | None = None,
               limits: Limits | None = None) -> tuple[Store, bool]:
    """The store for these inputs: from the cache in ``cache_dir`` when already ingested, else ingested now (into
    the cache, or into memory when ``cache_dir`` is None); and whether it came from the cache. ``limits`` None:
    those the environment sets (``Limits.from_env``)."""
    limits = Limits.from_env() if limits is None else limits
    limits = fitted_limits(limits, inputs)
    if cache_dir is None:
        return memory_store(lambda store: load_all(store, inputs, progress), limits), False
    return open_cached_store(store_key(inputs), cache_dir, lambda store: load_all(store, inputs, progress), limits)


def store_key(inputs: Sequence[InputFile]) -> str:
    """The cache key of the store of these inputs: in the cache, its file is ``KEY.duckdb``."""
    return content_key([f"{i.format}:{i.digest}" for i in inputs])


def build_report(store: Store, options: AnalysisOptions, progress: Progress | None = None,
                 paths: Sequence[str] | None = None, set_aside: Sequence[dict[str, Any]] = ()) -> Report:
    """Measure an ingested store and judge it by ``options`` (its rules and thresholds, which must exist; its step
    range and peaks).

    ``paths`` are the inputs as given this time, by input order: a cached store keeps the paths of the run that
    ingested it, and the same bytes may since have been given under other names. ``set_aside``: the traces given
    that the inputs stand for (tracedoc.ingest.cycles.set_aside_rows), said in the report's summary.
    """
    if progress:
        progress("analysing")
    rules = load_rules(options.rules_dirs)
    thresholds = {rule: dict(values) for rule, values in options.thresholds.items()}
    check_thresholds(rules, thresholds)
    prepare_store(store, options)
    with store.parallel(report_modules(store, rules)):  # at once where the cores allow (Store.fit_threads)
        return measured_report(store, options, rules, thresholds, paths, set_aside)


def measured_report(store: Store, options: AnalysisOptions, rules: list[Rule],
                    thresholds: dict[str, dict[str, float]], paths: Sequence[str] | None,
                    set_aside: Sequence[dict[str, Any]] = ()) -> Report:
    """The report of a store made ready for its analyses (``build_report``): measured, and judged by ``rules``."""
    store.include("trace.summary")
    if options.step_range is not None:
        check_step_range(store, options.step_range)
    summary = store.query("SELECT * FROM trace_summary")[0]
    timeline = summary["basis"] == "timeline"
    if not timeline and options.peaks is not None and (given := options.peaks.given()):
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        raise InputError(f"{flags}: MFU and MBU are measured on a GPU timeline (a PyTorch trace or an Nsight Systems "
                         "export), and these inputs hold none")
    store.start(report_modules(store, rules, summary["basis"]))
    store.start(efficiency.modules_read(store, options.peaks) if timeline else ())
    wall_ms = float(summary["wall_ms"] or 0.0)  # 0 for inputs without a timeline (e.g. hang dumps)
    judged = applicable(store, rules)
    rule_rows, section_parts = read_in_turn(store, judged, thresholds, summary["basis"])
    findings = judge(store, judged, wall_ms, thresholds, rule_rows)
    rows = store.query("SELECT path, format, rank, reported_rank, event_count, input_index FROM sources "
                       "ORDER BY source_id")
    if paths is not None and all(r["input_index"] is not None and r["input_index"] < len(paths) for r in rows):
        for row in rows:
            row["path"] = paths[row["input_index"]]
    inputs = [InputInfo(path=r["path"], format=r["format"], rank=r["rank"], events=r["event_count"]) for r in rows]
    head = {"wall_ms": round(wall_ms, 3), "gpu_busy_pct": report_number(summary["gpu_busy_pct"]),
            "ranks": summary["ranks"], "basis": summary["basis"]}
    if summary["world_size"] and summary["world_size"] > summary["ranks"]:
        head["world_size"] = summary["world_size"]
    if (mixed := separate_runs(store, rows)) is not None:
        head["mixed_inputs"] = mixed
    if set_aside:
        head["set_aside"] = list(set_aside)
    if thresholds:  # what --set changed, so that a report says the thresholds it was judged by
        head["thresholds"] = {rule: dict(sorted(values.items())) for rule, values in sorted(thresholds.items())}
    if timeline:
        head.update(gpu_states(store))
    eff = efficiency.efficiency_rows(store, options.peaks) if timeline else []
    if (words := efficiency.headline(eff)) is not None:
        head["efficiency"] = words
    parts: dict[str, Any] = {"metrics": {}, "efficiency": eff}
    for section in SECTIONS:
        rows = section_parts[section.key]
        group, _, name = section.key.partition(".")
        if name:
            parts[group][name] = rows
        else:
            parts[group] = PRESENTERS.get(group, lambda r, s: r)(rows, summary)
    report = Report(inputs=inputs, summary=head, findings=findings, **parts)
    if (left_out := devices_left_out(store, len(report.memory))):
        report.summary["memory_devices_left_out"] = left_out
    if not summary["basis"] and (words := memory_headline(report.memory, findings)) is not None:
        report.summary["memory"] = words  # a memory-only input (a snapshot): what failed or leaked, and how much
    report.what_if = [w.to_dict() for w in top_what_ifs(report)]
    return report


def read_in_turn(store: Store, rules: list[Rule], thresholds: dict[str, dict[str, float]], basis: str | None,
                 ) -> tuple[list[list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """The rows each of ``rules`` matches, and those of each part of the report measured for inputs of this
    ``basis`` (by the part's key), each read as soon as its analysis module is made (``Store.in_turn``): while the
    cursors make the rest, rather than after the slowest."""
    sections = [(section, table) for section in SECTIONS if section.measured(basis)
                for table in section.tables if store.applies(table.module)]
    reads: list[tuple[str, Callable[[], list[dict[str, Any]]]]] = [
        *rule_reads(store, rules, thresholds),
        *((table.module, functools.partial(report_rows, store, table)) for _, table in sections)]
    read = store.in_turn(reads)
    parts: dict[str, list[dict[str, Any]]] = {section.key: [] for section in SECTIONS}
    for (section, _), rows in zip(sections, read[len(rules):], strict=True):
        parts[section.key].extend(rows)
    return read[:len(rules)], parts


def prepare_store(store: Store, options: AnalysisOptions) -> None:
    """Set an ingested store up for the analyses ``options`` ask for, before any runs: its threads and optimizers
    fitted to its size, locked, the step range and the peaks given (``build_report``; the dashboard's timeline of a
    store whose report is read back from the cache, which must find the same steps)."""
    store.fit_threads()
    store.lock()
    store.set_step_range(options.step_range)
    if options.peaks is not None:
        efficiency.set_peaks(store, options.peaks)


def report_modules(store: Store, rules: Sequence[Rule], basis: str | None = None) -> list[str]:
    """The analysis modules a report of the store reads, known before they run, in the order it reads them: the
    summary, the views of the rules, and those of the report's parts measured for inputs of this ``basis`` (None:
    before the summary says it; with a 'timeline', the attribution of the GPUs' time too): each where it applies
    (``Store.applies``). The efficiency figures' modules are started once the summary says a timeline
    (``efficiency.modules_read``)."""
    claims = any(rule.claims is not None for rule in rules)  # drawn from the attribution less its GPU floor
    timeline = ["attribution.time", *(["efficiency.floor"] if claims else [])] if basis == "timeline" else []
    wanted = ["trace.summary", *(rule.reads for rule in rules), *timeline,
              *(table.module for section in SECTIONS if section.measured(basis) for table in section.tables)]
    return [module for module in dict.fromkeys(wanted) if store.applies(module)]


def gpu_states(store: Store) -> dict[str, Any]:
    """What the GPUs did over the window, as % of it (attribution.time): computing, communicating, waiting in
    collectives for a later rank (and the rank waited for most), so that the headline's busy time says what
    it was busy with."""
    store.include("attribution.time")
    row = store.query("SELECT * FROM attribution_report_gpu_states")[0]
    return {k: report_number(v) for k, v in row.items()}


def separate_runs(store: Store, sources: list[dict[str, Any]]) -> str | None:
    """What the inputs are where they are separate runs, not one job's ranks (``summary['mixed_inputs']``): inputs
    of kinds or timeline formats that cannot be one job (kinds.mixed_runs), or PyTorch traces that name no rank and
    run no collective, on the GPU or the host (kinds.runs_naming_no_rank), or else timelines recorded at separate
    times (kinds.runs_apart); both where both hold; else None.
    ``sources``: the rows of ``sources`` with the paths as given."""
    mixed = mixed_runs((r["format"], r["rank"]) for r in sources)
    named = (r["reported_rank"] is not None or rank_in_name(Path(r["path"])) is not None for r in sources)
    unranked = runs_naming_no_rank(zip((r["format"] for r in sources), named))
    if unranked is not None and store.scalar(_ANY_COLLECTIVE):
        unranked = None
    timelines = Counter(r["format"] for r in sources if kind_of([r["format"]]) == TIMELINE)
    if unranked is None and max(timelines.values(), default=0) > 1:  # the traces' own times: runs recorded apart
        store.include("trace.recording")
        unranked = runs_apart((r["format"], r["host_start_ns"], r["host_end_ns"]) for r in store.query(
            "SELECT format, host_start_ns, host_end_ns FROM trace_recording WHERE host_start_ns IS NOT NULL"))
    if mixed is not None and unranked is not None:  # both: the formats, then the runs among one format's ranks
        return f"{mixed}; of these, {unranked} are runs of their own too"
    return mixed if mixed is not None else unranked


# A collective anywhere in the store: NCCL's kernels, or the host's calls of a process group (gloo's on the CPU).
_ANY_COLLECTIVE = """
    SELECT EXISTS (SELECT 1 FROM gpu_activity WHERE category = 'communication')
        OR EXISTS (SELECT 1 FROM cpu_activity WHERE name = 'record_param_comms' OR name LIKE 'c10d::%'
                   OR name LIKE 'gloo:%' OR name LIKE 'nccl:%')"""


def check_step_range(store: Store, name: str) -> None:
    """Refuse a --step-range that names no host range of any input, naming the repeated ranges there are."""
    steps = store.applies("trace.steps")  # else no host ranges: the steps were not looked for
    if steps and store.scalar("SELECT count(*) FROM trace_step_method WHERE method = 'range'"):
        return
    there = [r["family"] for r in store.query("""
        SELECT family FROM trace_step_ranges GROUP BY family HAVING count(*) >= 3
        ORDER BY count(*) DESC, family LIMIT 8""")] if steps else []
    listed = ", ".join(repr(f[:-1] + "N" if f.endswith(" #") else f) for f in there)
    raise InputError(f"--step-range {name!r}: no host range of that name in these traces"
                     + (f"; repeated ranges there: {listed}" if listed else ""))


def window_of(rows: list[dict[str, Any]], summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The report's ``window`` from the rows of trace_report_windows: the window the findings judge, per rank and
    for the report (trace.window): its kind ('steps', 'capture_range', 'whole_trace'), how its steps were found
    (``steps``), its bounds (ns), its steady steps and the warm-up steps before it. The report's own is the first
    rank's, over every rank's bounds."""
    ranks = [{"rank": r["rank"], "kind": r["kind"], "steps": steps_found(r), "start_ns": r["start_ns"],
              "end_ns": r["end_ns"], "step_count": r["step_count"], "warmup_steps": r["warmup_steps"]}
             for r in rows]
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
        return f"the profiler's steps '{row['detail']}'" if row["detail"] else "ProfilerStep#N annotations"
    if row["method"] == "kernel":
        from tracedoc.ingest.ncu.ncu_model import short_name  # here: ncu_model imports pyarrow, which a run needs not

        return f"the repeating kernel {short_name(str(row['detail']))}"
    name = str(row["detail"])
    return f"the host ranges '{name[:-1]}N'" if name.endswith(" #") else f"the host range '{name}'"


# The parts of the report that are more than their views' rows: the function that makes the part from them (and
# the trace's summary).
PRESENTERS: dict[str, Callable[[list[dict[str, Any]], dict[str, Any]], Any]] = {
    "window": window_of, "memory": first_devices}

# Every view the report reads (a distributed run ships the per-rank ones by name).
REPORT_TABLES: tuple[ReportTable, ...] = report_views()


def collect_metrics(store: Store, tables: dict[str, ReportTable] | None = None) -> dict[str, list[dict[str, Any]]]:
    """The measured tables the report carries for renderers and the dashboard (ms and %, rounded); ``tables``
    picks other ones than all of them. A table of an analysis of inputs the store does not hold is empty."""
    return {name: section_rows(store, Section(f"metrics.{name}", (table,)))
            for name, table in (tables or METRICS).items()}
