"""What runs on a worker, a batch of ranks at a time: each rank's input ingested into its own per-rank store (in the
cache, keyed by content, so that ``serve`` and a second run reuse it), the batch's stores copied into one in-memory
store, and the analysis modules run once over it, so that DuckDB plans them once per batch and not once per rank.
It hands back the batch's summaries (first pass) or, given the collectives the client lined up, its per-rank
analyses (second pass). Only tables of summaries leave the worker."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracedoc.errors import InputError
from tracedoc.ingest import InputFile
from tracedoc.options import AnalysisOptions
from tracedoc.pipeline import open_store, store_key
from tracedoc.scale.exports import BASE_TABLES, CLIENT_ONLY, SUMMARY_EXPORTS, Export
from tracedoc.scale.summary_store import SummaryStore, summary_connection
from tracedoc.scale.tables import Table, create_table, fetch, quote
from tracedoc.store.cache import discard_damaged, is_damage
from tracedoc.store.engine import duckdb
from tracedoc.store.store import scalar


@dataclass(frozen=True)
class RankInput:
    """The inputs of one rank that go into one store: a timeline, or the flight-recorder dumps of one rank (a
    rank may leave several, and the analyses choose among them). ``indices`` are their source ids in the job
    (their positions among all the inputs, as on one machine); in their own store they are 0, 1, … ``options``:
    the run's (its memory and inflate caps for the stores the worker ingests them into, its step range)."""

    indices: tuple[int, ...]
    items: tuple[InputFile, ...]
    cache_dir: Path
    options: AnalysisOptions = field(default_factory=AnalysisOptions)

    @property
    def label(self) -> str:
        first = str(self.items[0].path)
        return first if len(self.items) == 1 else f"{first} (+{len(self.items) - 1} more)"

    @property
    def size_bytes(self) -> int:
        return sum(item.size_bytes for item in self.items)


@dataclass
class BatchSummary:
    """What the first pass hands back for a batch: the rank each input names itself (by job-wide source id; None
    when it names none: the job's ranks are assigned on the client, over every rank, as one machine assigns them),
    the batch's tables, and the warm-up steps they leave out (trace.steps: the batch's own ranks', unless the
    client gave the job's)."""

    reported_ranks: dict[int, int | None]
    tables: dict[str, Table]
    warmup_steps: int = 0


def summarize_ranks(batch: Sequence[RankInput], threads: int | None = None,
                    warmup_steps: int | None = None) -> BatchSummary:
    """First pass: ingest (or reuse) each rank's store and return the store tables the client keeps whole and the
    summaries the cross-rank analyses read. The job's ranks are not known yet: each input's rank is its job-wide
    source id here, unique as on one machine, and the client puts the job's rank in its place. ``threads``: DuckDB's
    threads for the batch (None: as many as the machine has cores); the range that marks steps is the run's
    options'; ``warmup_steps``: the job's warm-up steps, once the client knows them (None: the batch's own ranks')."""
    reported: dict[int, int | None] = {}
    with _batch_store(batch, None, reported, threads) as store:
        store.set_step_range(batch[0].options.step_range)
        _give_warmup(store, warmup_steps)
        tables = {name: fetch(store.con, f"SELECT * FROM {name}") for name in BASE_TABLES}
        summaries = _exports(store, SUMMARY_EXPORTS)
        return BatchSummary(reported, {**tables, **summaries}, int(store.scalar("SELECT steps FROM trace_warmup")))


def analyse_ranks(batch: Sequence[RankInput], ranks: Mapping[int, int | None], collectives: Table,
                  exports: Sequence[Export], threads: int | None = None,
                  warmup_steps: int | None = None) -> dict[str, Table]:
    """Second pass: the batch's per-rank analyses, its inputs numbered as in the job (``ranks``: the job's rank of
    each job-wide source id), with its collectives as lined up across ranks (its own rows, and the last rank's row
    of each of its collectives) and the job's warm-up steps."""
    with _batch_store(batch, ranks, {}, threads) as store:
        store.set_step_range(batch[0].options.step_range)
        _give_warmup(store, warmup_steps)
        create_table(store.con, "ranks_collectives", [collectives])
        return _exports(store, exports)


def _give_warmup(store: SummaryStore, steps: int | None) -> None:
    """The job's warm-up steps as trace.steps' ``trace_warmup``, when the client gives them: every rank leaves out
    as many as the rank that has the most, and a batch's ranks are not the job."""
    if steps is not None:
        store.con.execute("CREATE TEMP TABLE trace_warmup AS SELECT $steps::BIGINT AS steps", {"steps": steps})
        store.provided.add("trace_warmup")


def _exports(store: SummaryStore, exports: Sequence[Export]) -> dict[str, Table]:
    tables = {}
    for export in exports:
        store.include(export.module)
        tables[export.name] = fetch(store.con, export.query, export.params or None)
    return tables


@contextlib.contextmanager
def _batch_store(batch: Sequence[RankInput], ranks: Mapping[int, int | None] | None,
                 reported: dict[int, int | None], threads: int | None) -> Iterator[SummaryStore]:
    """An in-memory store of the batch's ranks, in job-wide source ids, with ``ranks`` (None: each source's job-wide
    id as its rank); ``reported`` gets the rank each input names itself. The statements that only the
    client needs (the alignment across ranks) are left out."""
    limits = batch[0].options.limits  # the run's, as every task of it carries them
    con = summary_connection(limits)
    if threads is not None and threads < int(scalar(con, "SELECT current_setting('threads')")):
        con.execute(f"SET threads = {int(threads)}")  # fewer, never more than the cap holds (store.connect)
    try:
        for n, task in enumerate(batch):
            _attach_rank(con, f"rank_store_{n}", task, reported)
        try:
            _copy_tables(con, batch, ranks)
        except duckdb.Error as exc:
            # A cached store damaged inside: rebuilt once when it is the batch's only one (a larger batch runs again
            # one rank at a time, which finds it).
            if len(batch) > 1 or not is_damage(exc, _cached_path(batch[0])):
                raise
            con.execute("DETACH rank_store_0")
            discard_damaged(_cached_path(batch[0]), exc)
            _attach_rank(con, "rank_store_0", batch[0], reported)
            _copy_tables(con, batch, ranks)
        for n in range(len(batch)):
            con.execute(f"DETACH rank_store_{n}")
        yield SummaryStore(con, provided=set(CLIENT_ONLY), limits=limits)
    finally:
        con.close()


def _cached_path(task: RankInput) -> Path:
    return task.cache_dir / f"{store_key(task.items)}.duckdb"


def _attach_rank(con: duckdb.DuckDBPyConnection, alias: str, task: RankInput,
                 reported: dict[int, int | None]) -> None:
    """Attach the rank's store from the cache (read-only), ingested first when it is not there; one found damaged
    or incomplete is ingested again, once. Notes the rank each input names itself (``sources.reported_rank``)."""
    path = _cached_path(task)
    for attempt in (1, 2):
        if not path.exists():
            store, _ = open_store(list(task.items), task.cache_dir, limits=task.options.limits)
            store.close()
        else:
            with contextlib.suppress(OSError):
                os.utime(path)  # its age in `tracedoc cache list` counts from the last use
        try:
            con.execute(f"ATTACH '{str(path).replace(chr(39), chr(39) * 2)}' AS {alias} (READ_ONLY)")
            row = con.execute(f"""
                SELECT (SELECT value FROM {alias}.store_meta WHERE key = 'complete'),
                       (SELECT list(reported_rank ORDER BY source_id) FROM {alias}.sources)""").fetchone()
            complete, local = row if row is not None else (None, [])  # one row, whatever the store holds
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DETACH {alias}")
            if attempt == 2 or not is_damage(exc, path):
                raise
            discard_damaged(path, exc)
            continue
        if complete == "true" and len(local) == len(task.indices):
            reported.update(zip(task.indices, local))
            return
        if complete == "true" and len(local) > len(task.indices):
            con.execute(f"DETACH {alias}")
            raise InputError(f"{task.label}: holds {len(local)} ranks (a report of several processes); a distributed "
                             "run takes one trace per rank: analyse it without --workers")
        con.execute(f"DETACH {alias}")
        path.unlink(missing_ok=True)
    raise InputError(f"{task.label}: its cached store could not be rebuilt")


def _copy_tables(con: duckdb.DuckDBPyConnection, batch: Sequence[RankInput],
                 ranks: Mapping[int, int | None] | None) -> None:
    """Insert the attached stores' rows into the batch's tables, one statement per table, their source ids
    (0, 1, … in each) made the job's (and, a rank being one input, the input's index too), in one transaction."""
    tables = con.execute("""
        SELECT t.table_name, list(DISTINCT t.database_name),
               list(DISTINCT c.column_name) FILTER (WHERE c.column_name IN ('source_id', 'rank', 'input_index'))
        FROM duckdb_tables() t JOIN duckdb_columns() c USING (database_name, schema_name, table_name)
        WHERE t.database_name LIKE 'rank_store_%' AND t.estimated_size > 0 AND t.table_name <> 'store_meta'
        GROUP BY t.table_name""").fetchall()
    con.execute("BEGIN")
    try:
        for table, databases, columns in tables:
            parts = []
            for n, task in enumerate(batch):
                if f"rank_store_{n}" not in databases:
                    continue
                source = " ".join(f"WHEN {j} THEN {g}" for j, g in enumerate(task.indices))
                rank = " ".join(f"WHEN {j} THEN {_sql_int(g if ranks is None else ranks[g])}"
                                for j, g in enumerate(task.indices))
                replaced = [f"CASE source_id {source} END AS source_id"] if "source_id" in columns else []
                replaced += [f"CASE source_id {source} END AS input_index"] if "input_index" in columns else []
                replaced += [f"CASE source_id {rank} END AS rank"] if "rank" in columns else []
                select = f"* REPLACE ({', '.join(replaced)})" if replaced else "*"
                parts.append(f"SELECT {select} FROM rank_store_{n}.{quote(table)}")
            con.execute(f"INSERT INTO {quote(table)} {' UNION ALL '.join(parts)}")
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _sql_int(value: int | None) -> str:
    return "NULL" if value is None else str(int(value))
