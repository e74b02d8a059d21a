"""What runs on a worker, one rank's input at a time: ingest it into its per-rank store (in the cache, keyed by
content), then hand back its summaries (first pass) or, given the collectives the client lined up, its per-rank
analyses (second pass). Only tables of summaries leave the worker."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracedoc.api import open_store
from tracedoc.ingest import InputFile
from tracedoc.ingest.compressed import set_limits
from tracedoc.scale.exports import BASE_TABLES, SUMMARY_EXPORTS, Export
from tracedoc.scale.summary_store import SummaryStore
from tracedoc.scale.tables import Table, create_table, fetch
from tracedoc.store import Store
from tracedoc.store.cache import discard_damaged, is_damage


@dataclass(frozen=True)
class RankInput:
    """The inputs of one rank that go into one store: a timeline, or the flight-recorder dumps of one rank (a
    rank may leave several, and the analyses choose among them). ``indices`` are their source ids in the job
    (their positions among all the inputs, as on one machine); in their own store they are 0, 1, …"""

    indices: tuple[int, ...]
    items: tuple[InputFile, ...]
    cache_dir: Path
    max_inflate_bytes: int | None = None

    @property
    def label(self) -> str:
        first = str(self.items[0].path)
        return first if len(self.items) == 1 else f"{first} (+{len(self.items) - 1} more)"


def summarize_rank(task: RankInput) -> dict[str, Table]:
    """First pass: ingest (or reuse) the rank's store and return its store tables that the client keeps whole and
    the summaries the cross-rank analyses read."""
    with _rank_store(task) as store:
        tables = {name: fetch(store.con, f"SELECT * FROM {name}") for name in BASE_TABLES}
        return {**tables, **_exports(store, SUMMARY_EXPORTS)}


def analyse_rank(task: RankInput, collectives: Table, exports: Sequence[Export]) -> dict[str, Table]:
    """Second pass: the rank's per-rank analyses with its collectives as lined up across ranks (its own rows, and
    the last rank's row of each of its collectives, in job-wide source ids)."""
    with _rank_store(task) as opened:
        store = SummaryStore(opened.con, opened.path, provided={"ranks_collectives"})
        # Job-wide source ids become the store's: its own inputs 0, 1, …; the other ranks' rows get negative ids.
        cases = " ".join(f"WHEN {g} THEN {j}" for j, g in enumerate(task.indices))
        local = f"CASE {{c}} {cases} ELSE -1 - {{c}} END"
        create_table(store.con, "ranks_collectives", [collectives],
                     f"* REPLACE ({local.format(c='source_id')} AS source_id, "
                     f"{local.format(c='ref_source_id')} AS ref_source_id)")
        return _exports(store, exports)


def _exports(store: Store, exports: Sequence[Export]) -> dict[str, Table]:
    tables = {}
    for export in exports:
        store.include(export.module)
        tables[export.name] = fetch(store.con, export.query, export.params or None)
    return tables


@contextlib.contextmanager
def _rank_store(task: RankInput) -> Iterator[Store]:
    """The rank's store, from the cache or ingested now; a cached store found damaged is rebuilt once."""
    set_limits(task.max_inflate_bytes)
    store, cached = open_store(list(task.items), task.cache_dir)
    try:
        store.include("trace.window")
    except Exception as exc:
        store.close()
        if not (cached and store.path is not None and is_damage(exc, store.path)):
            raise
        discard_damaged(store.path, exc)
        store, _ = open_store(list(task.items), task.cache_dir)
    try:
        yield store
    finally:
        store.close()
