"""The store of traces for exploring it with SQL: ``with tracedoc.open_store(paths) as store: ...``.

The store is the DuckDB database tracedoc ingests the traces into (cached as for ``analyze``). ``store.con`` is its
DuckDB connection, with everything the duckdb package offers (relations, ``.pl()``, Arrow);
``store.include("gpu.idle")`` loads an analysis module (``tracedoc/analyses/gpu/idle.sql``) and the modules it
includes, whose views then answer SQL like the stored tables.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tracedoc.limits import Limits
from tracedoc.pipeline import input_files
from tracedoc.pipeline import open_store as open_inputs_store
from tracedoc.store import Store
from tracedoc.store.cache import store_location
from tracedoc.store.engine import with_python_objects


@contextmanager
def open_store(paths: Sequence[Path | str] | Path | str, cache_dir: Path | None = None,
               use_cache: bool = True) -> Iterator[Store]:
    """The store of the traces at ``paths`` (files or directories of ranks, as for ``analyze``; one path may be given
    as it is; of a trace per cycle of the profiler's schedule, the last, as ``analyze`` judges: its ``sources`` table
    names the files read), ingested unless cached, closed on leaving the ``with`` block. Without the cache it lives
    in memory. The limits are those the environment sets (``tracedoc.limits``). The connection has the duckdb
    package's Python layer, which tracedoc's own runs leave out (``tracedoc.store.engine``): a user's queries build
    relations."""
    with_python_objects()
    limits = Limits.from_env()
    store, _ = open_inputs_store(input_files(paths, limits), store_location(cache_dir, use_cache), limits=limits)
    try:
        yield store
    finally:
        store.close()
