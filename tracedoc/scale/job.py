"""The client's side of a distributed run: map the ranks, line them up over their summaries, map them again with
their collectives, and build the report over the summaries with the function the local path uses."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracedoc.errors import InputError
from tracedoc.formats import BY_NAME
from tracedoc.ingest import STDIN, InputFile, assign_ranks
from tracedoc.ingest.cycles import set_aside_rows
from tracedoc.ingest.names import rank_in_name
from tracedoc.judge import load_rules
from tracedoc.judge.rule import check_thresholds
from tracedoc.options import AnalysisOptions
from tracedoc.pipeline import REPORT_TABLES, Progress, build_report, input_files
from tracedoc.report import Report
from tracedoc.scale.exports import BASE_TABLES, SUMMARY_EXPORTS, Export, report_exports
from tracedoc.scale.spec import ClusterSpec
from tracedoc.scale.summary_store import SummaryStore, summary_connection
from tracedoc.scale.tables import Table, create_table, fetch, insert_parts, without_sources
from tracedoc.scale.worker import BatchSummary, RankInput, analyse_ranks, summarize_ranks
from tracedoc.store.cache import store_location
from tracedoc.store.store import cores

# Inputs that are one rank each: timelines and flight-recorder dumps. Per-host health recordings and kernel
# profiles are not split by rank; a distributed run refuses them (analyse them without --workers).
# The most input bytes (on disk) one batch takes, unless a single rank is larger: a batch's ranks are held in one
# in-memory store on its worker.
_BATCH_BYTES = 64 << 20


@dataclass
class MissingRank:
    """An input the report lacks: its path, its rank when known (from the file name), and why."""

    path: str
    rank: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rank": self.rank, "reason": self.reason}


def analyze_distributed(paths: Sequence[Path | str] | Path | str, cluster: ClusterSpec,
                        options: AnalysisOptions | None = None, cache_dir: Path | None = None,
                        use_cache: bool = True, progress: Progress | None = None) -> Report:
    """``tracedoc.api.run_analysis`` with the per-rank work on a Dask cluster: the same report. A rank that cannot
    be read (bad input, a worker that died) is left out and named in ``summary['missing_ranks']``; only when no rank
    can be read is that an error. ``options`` (None: the defaults, with the limits the environment sets) go whole
    with each rank's task to the worker that ingests it (its limits and step range)."""
    from tracedoc.scale import cluster as dask_side  # Dask is imported here, only for distributed runs

    options = AnalysisOptions() if options is None else options
    rules = load_rules(options.rules_dirs)
    thresholds = {rule: dict(values) for rule, values in options.thresholds.items()}
    check_thresholds(rules, thresholds)
    inputs = input_files(paths, options.limits)
    _check_distributable(inputs)
    exports = report_exports(rules, thresholds, REPORT_TABLES)
    with contextlib.ExitStack() as stack:
        location = store_location(cache_dir, use_cache)
        if location is not None:
            store_dir = location.absolute()
        else:  # the per-rank stores must outlive the first pass: on this machine, removed at the end
            store_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tracedoc-ranks-")))
        tasks = _tasks(inputs, store_dir, options)
        client = stack.enter_context(dask_side.connect(cluster))
        slots = max(1, sum(client.nthreads().values())) * max(1, cluster.batches_per_thread)
        batches = plan_batches(tasks, slots)
        # A local cluster's processes share this machine's cores: DuckDB in each gets its share, not all of them.
        threads = max(1, cores() // cluster.workers) if cluster.workers else None
        first, missing = _summarize(client, batches, (threads, None), progress)
        if not first:
            raise InputError(f"no rank could be read: {missing[0].path}: {missing[0].reason}")
        again = False
        while True:
            job = _Job(first, options)
            stale = tuple(batch for batch, summary in first if summary.warmup_steps != job.warmup_steps)
            if stale:  # summarized with their own ranks' warm-up steps, not the job's: summarized again with them
                job.store.close()
                redone, lost = _summarize(client, stale, (threads, job.warmup_steps), progress)
                first = sorted([r for r in first if r[0] not in stale] + redone, key=_job_order)
                missing += lost
                if not first:
                    raise InputError(f"no rank could be read: {missing[-1].path}: {missing[-1].reason}")
                continue
            if progress:
                progress("lining up the ranks' collectives" + (" again, without the failed ranks" if again else ""))
            job.align()
            second, failed = dask_side.map_batches(
                client, analyse_ranks, [batch for batch, _ in first],
                job.analysis_args(exports, threads), _batch_label, "analysing", progress)
            missing += [MissingRank(str(item.path), job.ranks[i],
                                    f"per-rank analyses: {_unprefixed(r.reason, item.path)}")
                        for t, r in failed for i, item in zip(t.indices, t.items)]
            if not failed:
                break
            # The others were lined up with the failed ranks: line them up again without them, as one machine
            # would without their inputs, and analyse them again.
            job.store.close()
            first = _without_sources(first, {i for t, _ in failed for i in t.indices})
            if not first:
                raise InputError(f"no rank could be analysed: {missing[-1].path}: {missing[-1].reason}")
            again = True
        job.add_analyses(exports, sorted(second, key=_job_order))
    read = [t for batch, _ in first for t in batch]
    paths_read = sorted((i, str(item.path)) for t in read for i, item in zip(t.indices, t.items))
    report = build_report(job.store, options, progress, paths=[p for _, p in paths_read],
                          set_aside=set_aside_rows(inputs))
    job.store.close()
    report.summary["missing_ranks"] = [m.to_dict() for m in missing]
    return report


def _summarize(client: Any, batches: Sequence[tuple[RankInput, ...]], args: tuple[int | None, int | None],
               progress: Progress | None) -> tuple[list[tuple[tuple[RankInput, ...], BatchSummary]], list[MissingRank]]:
    """The first pass over ``batches`` (``args``: DuckDB's threads and the job's warm-up steps, None before they
    are known): each batch that was read with its summaries, in job order, and the ranks that were not."""
    from tracedoc.scale import cluster as dask_side

    read, failed = dask_side.map_batches(client, summarize_ranks, batches, lambda b: args, _batch_label, "reading",
                                         progress)
    return sorted(read, key=_job_order), [MissingRank(str(item.path), rank_in_name(item.path),
                                                      _unprefixed(r.reason, item.path))
                                          for t, r in failed for item in t.items]


def _unprefixed(reason: str, path: Path) -> str:
    """Why an input could not be read, without the path its error opens with: the missing rank names it."""
    return reason.removeprefix(f"{path}: ")


def _job_order(result: tuple[tuple[RankInput, ...], Any]) -> tuple[int, ...]:
    """A batch's place in the job: the ranks' rows in job order, as on one machine."""
    return result[0][0].indices


def _without_sources(read: Sequence[tuple[tuple[RankInput, ...], BatchSummary]],
                     lost: set[int]) -> list[tuple[tuple[RankInput, ...], BatchSummary]]:
    """The first pass's batches without the ``lost`` source ids: their tasks, their ranks and their rows; a batch
    left with no task is dropped."""
    kept = []
    for batch, summary in read:
        tasks = tuple(t for t in batch if lost.isdisjoint(t.indices))
        if tasks:
            kept.append((tasks, BatchSummary({i: r for i, r in summary.reported_ranks.items() if i not in lost},
                                             {n: without_sources(t, lost) for n, t in summary.tables.items()})))
    return kept


def _check_distributable(inputs: Sequence[InputFile]) -> None:
    """Refuse inputs a distributed run does not split by rank (one line, exit 2)."""
    for item in inputs:
        if item.path == STDIN:
            raise InputError("-: a distributed run reads files its workers can open, not standard input")
        if not BY_NAME[item.format].distributable:
            raise InputError(f"{item.path}: a distributed run analyses per-rank timelines and flight-recorder dumps; "
                             f"analyse {item.format} inputs without --workers")


def _tasks(inputs: Sequence[InputFile], store_dir: Path, options: AnalysisOptions) -> list[RankInput]:
    """One task per timeline, and one per rank's flight-recorder dumps (the rank in their file names): the
    dumps a rank left are read together, as one machine reads them, so that an empty one beside a full one is
    no error."""
    groups: dict[Any, list[int]] = {}
    for i, item in enumerate(inputs):
        rank = rank_in_name(item.path)
        several = BY_NAME[item.format].several_per_rank and rank is not None
        groups.setdefault((item.format, rank) if several else i, []).append(i)
    return [RankInput(tuple(ix), tuple(replace(inputs[i], data=inputs[i].file.absolute()) for i in ix), store_dir,
                      options)
            for ix in groups.values()]


def plan_batches(tasks: Sequence[RankInput], slots: int) -> list[tuple[RankInput, ...]]:
    """The tasks, in job order, cut into about ``slots`` runs of about equal input bytes (more when the input is
    larger than ``slots`` × _BATCH_BYTES). A task larger than a batch's share goes alone, so that it holds no
    other rank back; else it joins the run unless that would take the run past its share by more than half the
    task. Largest batch first."""
    total = sum(t.size_bytes for t in tasks)
    share = max(total, 1) / max(1, min(len(tasks), max(slots, -(-total // _BATCH_BYTES))))
    batches: list[list[RankInput]] = []
    size = 0
    for task in tasks:
        alone = task.size_bytes > share
        if not batches or alone or batches[-1][-1].size_bytes > share or size + task.size_bytes / 2 > share:
            batches.append([])
            size = 0
        batches[-1].append(task)
        size += task.size_bytes
    return sorted((tuple(b) for b in batches), key=lambda b: -sum(t.size_bytes for t in b))


def _batch_label(batch: Sequence[RankInput]) -> str:
    return batch[0].label if len(batch) == 1 else f"{batch[0].label} (+{len(batch) - 1} more ranks)"


class _Job:
    """The client's store of summaries: every read rank's store tables and summaries, in job-wide ranks, then its
    per-rank analyses. Source ids are job-wide from the workers on."""

    def __init__(self, read: Sequence[tuple[tuple[RankInput, ...], BatchSummary]], options: AnalysisOptions) -> None:
        self.ranks = self._ranks(read)
        self.store = SummaryStore(summary_connection(options.limits), limits=options.limits)
        self.store.set_step_range(options.step_range)
        con = self.store.con
        selects = [self._with_ranks(summary) for _, summary in read]
        for name in BASE_TABLES:
            insert_parts(con, name, [summary.tables[name] for _, summary in read],
                         [select(summary.tables[name]) for (_, summary), select in zip(read, selects)])
        for export in SUMMARY_EXPORTS:
            parts = [summary.tables[export.name] for _, summary in read]
            create_table(con, export.name, parts, [select(p) for p, select in zip(parts, selects)])
            self.store.provided.add(export.name)
        self.store.include("trace.steps")
        # The job's warm-up steps (trace.steps), over the slow leading steps every rank handed back.
        self.warmup_steps = int(self.store.scalar("SELECT steps FROM trace_warmup"))

    @staticmethod
    def _ranks(read: Sequence[tuple[tuple[RankInput, ...], BatchSummary]]) -> dict[int, int | None]:
        """Each input's rank (by job-wide source id), numbered by ``assign_ranks`` from what each trace reported, as
        one machine numbers them: from the trace, else the file name, else its position; two traces of one format
        claiming one rank are an error."""
        inputs = sorted((index, item, summary.reported_ranks[index]) for batch, summary in read for task in batch
                        for index, item in zip(task.indices, task.items))
        assigned = assign_ranks([item for _, item, _ in inputs], [rank for _, _, rank in inputs])
        return {index: rank for (index, _, _), rank in zip(inputs, assigned)}

    def _with_ranks(self, summary: BatchSummary) -> Callable[[Table], str]:
        """The select list that puts the job's ranks into a batch's rows (the worker numbered each input by its
        source id)."""
        cases = " ".join(f"WHEN {i} THEN {'NULL' if self.ranks[i] is None else self.ranks[i]}"
                         for i in summary.reported_ranks)

        def select(part: Table) -> str:
            return f"* REPLACE (CASE source_id {cases} END AS rank)" if "rank" in {c for c, _ in part.types} else "*"

        return select

    def align(self) -> None:
        """Line the ranks up: ranks.collectives over the summaries."""
        self.store.include("ranks.collectives")
        self.store.provided.add("ranks_collectives")

    def collectives(self, batch: Sequence[RankInput]) -> Table:
        """The rows a batch's second pass needs: its ranks' own collectives and, for each, the last rank's row."""
        return fetch(self.store.con, """
            SELECT * FROM ranks_collectives c
            WHERE list_contains($s, c.source_id) OR (c.is_last AND (c.channel, c.instance) IN
                  (SELECT (channel, instance) FROM ranks_collectives WHERE list_contains($s, source_id)))
            ORDER BY c.channel, c.instance, c.source_id""", {"s": [i for t in batch for i in t.indices]})

    def analysis_args(self, exports: Sequence[Export],
                      threads: int | None) -> Callable[[tuple[RankInput, ...]], tuple[Any, ...]]:
        """The second pass's arguments for a batch (after the batch): the job's ranks, the batch's collectives and the
        job's warm-up steps."""
        return lambda batch: (self.ranks, self.collectives(batch), exports, threads, self.warmup_steps)

    def add_analyses(self, exports: Sequence[Export],
                     analysed: Sequence[tuple[tuple[RankInput, ...], dict[str, Table]]]) -> None:
        """The per-rank analyses of every rank as tables (a rule's table macro as a macro over its rows)."""
        con = self.store.con
        for export in exports:
            parts = [tables[export.name] for _, tables in analysed]
            if not parts:
                continue
            table = f"{export.name}__rows" if export.macro_args is not None else export.name
            create_table(con, table, parts)
            if export.macro_args is not None:
                args = ", ".join(f"_arg{i}" for i in range(export.macro_args))
                con.execute(f"CREATE TEMP MACRO {export.name}({args}) AS TABLE SELECT * FROM {table}")
            self.store.provided.add(export.name)
