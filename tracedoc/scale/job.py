"""The client's side of a distributed run: map the ranks, line them up over their summaries, map them again with
their collectives, and build the report over the summaries with the function the local path uses."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracedoc.api import _METRICS, Progress, build_report
from tracedoc.errors import InputError
from tracedoc.ingest import _RANK_IN_NAME, STDIN, InputFile, _assign_ranks, discover, format_module
from tracedoc.ingest.compressed import max_inflate_bytes
from tracedoc.judge import load_rules
from tracedoc.judge.rule import check_thresholds
from tracedoc.report import Report
from tracedoc.scale.exports import BASE_TABLES, COMPUTE_BUSY_KEYS, SUMMARY_EXPORTS, Export, report_exports
from tracedoc.scale.summary_store import SummaryStore, summary_connection
from tracedoc.scale.tables import Table, create_table, fetch, insert_parts
from tracedoc.scale.worker import RankInput, analyse_rank, summarize_rank
from tracedoc.store.cache import default_cache_dir

# Inputs that are one rank each: timelines and flight-recorder dumps. Per-host health recordings and kernel
# profiles are not split by rank; a distributed run refuses them (analyse them without --workers).
_RANK_FORMATS = ("torch", "nsys", "flight_recorder")


@dataclass(frozen=True)
class ClusterSpec:
    """Where the per-rank work runs: ``workers`` local processes, or the Dask scheduler at ``scheduler`` (an
    address) or named in ``scheduler_file`` (what `dask scheduler --scheduler-file` writes)."""

    workers: int | None = None
    scheduler: str | None = None
    scheduler_file: Path | None = None


@dataclass
class MissingRank:
    """An input the report lacks: its path, its rank when known (from the file name), and why."""

    path: str
    rank: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rank": self.rank, "reason": self.reason}


def analyze_distributed(paths: Sequence[Path | str] | Path | str, cluster: ClusterSpec,
                        rules_dirs: Sequence[Path] = (), cache_dir: Path | None = None, use_cache: bool = True,
                        thresholds: dict[str, dict[str, float]] | None = None,
                        progress: Progress | None = None) -> Report:
    """``tracedoc.api.analyze`` with the per-rank work on a Dask cluster: the same report. A rank that cannot be
    read (bad input, a worker that died) is left out and named in ``summary['missing_ranks']``; only when no rank
    can be read is that an error."""
    from tracedoc.scale import cluster as dask_side  # Dask is imported here, only for distributed runs

    rules = load_rules(tuple(rules_dirs))
    check_thresholds(rules, thresholds or {})
    inputs = discover([Path(p) for p in ([paths] if isinstance(paths, str | os.PathLike) else paths)])
    _check_distributable(inputs)
    exports = report_exports(rules, thresholds, _METRICS)
    with contextlib.ExitStack() as stack:
        if use_cache:
            store_dir = (cache_dir or default_cache_dir()).absolute()
        else:  # the per-rank stores must outlive the first pass: on this machine, removed at the end
            store_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tracedoc-ranks-")))
        tasks = _tasks(inputs, store_dir)
        labels = [t.label for t in tasks]
        client = stack.enter_context(dask_side.connect(dask_side.ClusterSpec(**cluster.__dict__)))
        first = dask_side.map_ranks(client, summarize_rank, [(t,) for t in tasks], labels, "reading", progress)
        missing = [MissingRank(str(item.path), _rank_in_name(item), r.reason)
                   for t, r in zip(tasks, first) if isinstance(r, dask_side.RankFailure) for item in t.items]
        read = [(t, r) for t, r in zip(tasks, first) if not isinstance(r, dask_side.RankFailure)]
        if not read:
            raise InputError(f"no rank could be read: {missing[0].path}: {missing[0].reason}")
        job = _Job(read)
        if progress:
            progress("lining up the ranks' collectives")
        collectives = job.align()
        second = dask_side.map_ranks(client, analyse_rank, [(t, collectives[t.indices], exports) for t, _ in read],
                                     [t.label for t, _ in read], "analysing", progress)
        for (t, _), r in zip(read, second):
            if isinstance(r, dask_side.RankFailure):
                missing += [MissingRank(str(item.path), job.ranks[i], f"per-rank analyses: {r.reason}")
                            for i, item in zip(t.indices, t.items)]
        job.add_analyses(exports, [(t, r) for (t, _), r in zip(read, second)
                                   if not isinstance(r, dask_side.RankFailure)])
    paths_read = sorted((i, str(item.path)) for t, _ in read for i, item in zip(t.indices, t.items))
    report = build_report(job.store, rules, thresholds, progress, paths=[p for _, p in paths_read])
    job.store.close()
    report.summary["missing_ranks"] = [m.to_dict() for m in missing]
    return report


def _check_distributable(inputs: Sequence[InputFile]) -> None:
    """Refuse inputs a distributed run does not split by rank (one line, exit 2)."""
    for item in inputs:
        if item.path == STDIN:
            raise InputError("-: a distributed run reads files its workers can open, not standard input")
        if item.format not in _RANK_FORMATS or getattr(format_module(item.format), "PER_HOST", False):
            raise InputError(f"{item.path}: a distributed run analyses per-rank timelines and flight-recorder dumps; "
                             f"analyse {item.format} inputs without --workers")


def _tasks(inputs: Sequence[InputFile], store_dir: Path) -> list[RankInput]:
    """One task per timeline, and one per rank's flight-recorder dumps (the rank in their file names): the
    dumps a rank left are read together, as one machine reads them, so that an empty one beside a full one is
    no error."""
    groups: dict[Any, list[int]] = {}
    for i, item in enumerate(inputs):
        rank = _rank_in_name(item)
        several = getattr(format_module(item.format), "SEVERAL_PER_RANK", False) and rank is not None
        groups.setdefault((item.format, rank) if several else i, []).append(i)
    return [RankInput(tuple(ix), tuple(replace(inputs[i], data=inputs[i].file.absolute()) for i in ix), store_dir,
                      max(max_inflate_bytes(inputs[i].size_bytes) for i in ix))
            for ix in groups.values()]


def _rank_in_name(item: InputFile) -> int | None:
    m = _RANK_IN_NAME.search(item.path.name)
    return int(m.group(1)) if m else None


class _Job:
    """The client's store of summaries: every read rank's store tables and summaries, in job-wide source ids and
    ranks, then its per-rank analyses."""

    def __init__(self, read: Sequence[tuple[RankInput, dict[str, Table]]]) -> None:
        self.ranks = self._ranks(read)
        self.store = SummaryStore(summary_connection())
        con = self.store.con
        for name in BASE_TABLES:
            self._insert(name, read)
        for export in SUMMARY_EXPORTS:
            parts = [tables[export.name] for _, tables in read]
            create_table(con, export.name, parts, [self._remap(t, p) for (t, _), p in zip(read, parts)])
            self.store.provided.add(export.name)
        busy = "ranks_compute_busy"
        con.execute(f"ALTER TABLE {busy} RENAME TO {busy}_rows")
        con.execute(f"CREATE TEMP TABLE {busy} AS SELECT {COMPUTE_BUSY_KEYS} FROM {busy}_rows")

    def _ranks(self, read: Sequence[tuple[RankInput, dict[str, Table]]]) -> dict[int, int | None]:
        """Each input's rank (by job-wide source id), as one machine numbers them: from the trace, else the file
        name, else its position (a rank's store that found neither says 0); two traces of one format claiming one
        rank are an error. Also keeps, per task, how its store's ranks map to the job's."""
        items, reported, indices = [], [], []
        for task, tables in read:
            local = tables["sources"].data.column("rank").to_pylist()
            for index, item, rank in zip(task.indices, task.items, local):
                items.append(item)
                indices.append(index)
                reported.append(None if rank == 0 and _rank_in_name(item) is None else rank)
        order = sorted(range(len(items)), key=lambda k: indices[k])
        assigned = _assign_ranks([items[k] for k in order], [reported[k] for k in order])
        ranks = {indices[k]: r for k, r in zip(order, assigned)}
        self._rank_maps = {task.indices: dict(zip(tables["sources"].data.column("rank").to_pylist(),
                                                  (ranks[i] for i in task.indices))) for task, tables in read}
        return ranks

    def _remap(self, task: RankInput, part: Table) -> str:
        """The select list that puts a rank's rows into job-wide source ids and ranks."""
        columns = {c for c, _ in part.types}
        replaced = []
        if "source_id" in columns:
            cases = " ".join(f"WHEN {j} THEN {g}" for j, g in enumerate(task.indices))
            replaced.append(f"CASE source_id {cases} END AS source_id")
        if "rank" in columns:
            cases = " ".join(f"WHEN {a} THEN {'NULL' if b is None else b}"
                             for a, b in self._rank_maps[task.indices].items() if a is not None)
            replaced.append(f"CASE rank {cases} END AS rank" if cases else "rank")
        return f"* REPLACE ({', '.join(replaced)})" if replaced else "*"

    def _insert(self, table: str, read: Sequence[tuple[RankInput, dict[str, Table]]]) -> None:
        parts = [tables[table] for _, tables in read]
        insert_parts(self.store.con, table, parts, [self._remap(t, p) for (t, _), p in zip(read, parts)])

    def align(self) -> dict[tuple[int, ...], Table]:
        """Line the ranks up (ranks.collectives over the summaries) and, per input, the rows its second pass needs:
        its own collectives and, for each, the last rank's row."""
        self.store.include("ranks.collectives")
        out = {}
        for indices in self._rank_maps:
            out[indices] = fetch(self.store.con, """
                SELECT * FROM ranks_collectives c
                WHERE list_contains($s, c.source_id) OR (c.is_last AND (c.channel, c.instance) IN
                      (SELECT (channel, instance) FROM ranks_collectives WHERE list_contains($s, source_id)))
                ORDER BY c.channel, c.instance, c.source_id""", {"s": list(indices)})
        self.store.provided.add("ranks_collectives")
        return out

    def add_analyses(self, exports: Sequence[Export], analysed: Sequence[tuple[RankInput, dict[str, Table]]]) -> None:
        """The per-rank analyses of every rank as tables (a rule's table macro as a macro over its rows)."""
        con = self.store.con
        for export in exports:
            parts = [tables[export.name] for _, tables in analysed]
            if not parts:
                continue
            table = f"{export.name}__rows" if export.macro_args is not None else export.name
            create_table(con, table, parts, [self._remap(t, p) for (t, _), p in zip(analysed, parts)])
            if export.macro_args is not None:
                args = ", ".join(f"_arg{i}" for i in range(export.macro_args))
                con.execute(f"CREATE TEMP MACRO {export.name}({args}) AS TABLE SELECT * FROM {table}")
            self.store.provided.add(export.name)
