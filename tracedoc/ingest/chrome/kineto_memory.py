"""The PyTorch profiler's allocator events (``profile_memory=True``) into ``memory_events`` (schema_memory.sql).

Kineto writes every allocation and free of the caching allocator as an instant event ``[memory]`` and every failed
request as ``[OutOfMemory]``, with ``Device Type``, ``Device Id``, ``Addr`` (not for an OOM), ``Bytes`` (> 0
allocated, < 0 freed; an OOM: the request), ``Total Allocated`` and ``Total Reserved``. Their ``Bytes`` differs from
the ``bytes`` of copies only in case, and DuckDB's struct fields cannot tell the two apart, so the part files of a
trace that holds such events are read a second time for these fields alone (``read``): a trace recorded without
``profile_memory`` costs a count in the statement that counts its events (``EventFormat.also_read_when``) and
nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracedoc.ingest.chrome import chrome_trace
from tracedoc.store.store import sql_literal

if TYPE_CHECKING:
    import duckdb  # only for types: DuckDB is imported where a store is used (a cached report needs none)

NAMES = ("[memory]", "[OutOfMemory]")
_COLUMNS = (
    "{ph: 'VARCHAR', name: 'VARCHAR', tid: 'VARCHAR', ts: 'DOUBLE', "
    "args: 'STRUCT(\"Device Type\" VARCHAR, \"Device Id\" VARCHAR, \"Addr\" VARCHAR, \"Bytes\" VARCHAR, "
    "\"Total Allocated\" VARCHAR, \"Total Reserved\" VARCHAR)'}"
)


# The events just parsed (the temp table ``_raw``) that are the allocator's: where one is, ``read`` reads the parts.
PRESENT = "ph = 'i' AND name IN ('[memory]', '[OutOfMemory]')"


def read(con: duckdb.DuckDBPyConnection, parts: Sequence[Any]) -> None:
    """Read the allocator events of the part files (each with .file, .source_id, .rank) into memory_events."""
    files = [sql_literal(str(p.file)) for p in parts]
    source_id, rank, filename = chrome_trace.part_labels(parts)
    con.execute(f"""
        INSERT INTO memory_events
        SELECT {source_id}, {rank},
               TRY_CAST(tid AS BIGINT), TRY_CAST(round(ts * 1000) AS BIGINT),
               CASE WHEN name = '[OutOfMemory]' THEN 'oom'
                    WHEN TRY_CAST(args."Bytes" AS BIGINT) < 0 THEN 'free' ELSE 'alloc' END,
               TRY_CAST(args."Device Type" AS INTEGER), TRY_CAST(args."Device Id" AS INTEGER),
               TRY_CAST(args."Addr" AS BIGINT), TRY_CAST(args."Bytes" AS BIGINT),
               TRY_CAST(args."Total Allocated" AS BIGINT), TRY_CAST(args."Total Reserved" AS BIGINT)
        FROM read_json([{', '.join(files)}], format = 'array', columns = {_COLUMNS},
                       maximum_object_size = 16777216{filename})
        WHERE {PRESENT} AND ts IS NOT NULL
          AND TRY_CAST(round(ts * 1000) AS BIGINT) IS NOT NULL""")


def record_clock(con: duckdb.DuckDBPyConnection, source_id: int, meta: dict[str, Any]) -> None:
    """Keep the trace's epoch (baseTimeNanoseconds) where it holds allocator events: a snapshot's times are
    epoch times, so this puts both on one clock."""
    base = meta.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 1 << 63:
        con.execute("INSERT INTO memory_trace_clock SELECT $id, $base "
                    "WHERE EXISTS (SELECT 1 FROM memory_events WHERE source_id = $id)", {"id": source_id, "base": base})
