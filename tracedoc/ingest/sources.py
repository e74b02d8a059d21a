"""The rows of the store's ``sources`` table (store/schema.sql): one ``SourceRow`` per source, written by
``insert_sources``, the table's one writer (ingest, and the health report of a live NVML snapshot)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb  # only for types: DuckDB is imported where a store is used (a cached report needs none)


@dataclass(frozen=True)
class SourceRow:
    """One source: an input file, or one rank of an input that holds several (schema.sql says what each column
    holds). ``reported_rank`` is the rank the input names itself, ``rank`` the one assigned from it
    (ingest.assign_ranks); ``pid`` is set only for a rank of an input that holds several."""

    source_id: int
    path: str
    format: str
    rank: int | None = None
    world_size: int | None = None
    content_key: str | None = None
    size_bytes: int | None = None
    event_count: int | None = None
    tool: str | None = None
    reported_rank: int | None = None
    input_index: int | None = None
    pid: int | None = None

    @property
    def is_part(self) -> bool:
        """Whether the source is one rank of an input that holds several (its rank is never read from the name)."""
        return self.pid is not None


_COLUMNS = tuple(f.name for f in fields(SourceRow))


def insert_sources(con: duckdb.DuckDBPyConnection, rows: Sequence[SourceRow]) -> None:
    """Write the rows into ``sources``, by column name, in one statement (row by row, a thousand ranks' sources
    took seconds)."""
    if rows:  # a list per column, unnested side by side (no pyarrow: a PyTorch run imports none)
        columns = ", ".join(f"unnest(?) AS {name}" for name in _COLUMNS)
        con.execute(f"INSERT INTO sources ({', '.join(_COLUMNS)}) SELECT {columns}",
                    [[getattr(row, name) for row in rows] for name in _COLUMNS])
