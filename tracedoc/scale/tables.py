"""Arrow tables that keep the DuckDB types they came from, so a table handed from a worker to the client (or
back) reads the same in SQL on the other side: DuckDB's HUGEINT sums, for one, come through Arrow as decimals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tracedoc.store.engine import duckdb, scanning, with_python_objects


@dataclass
class Table:
    """Rows as an Arrow table, with each column's DuckDB type."""

    data: pa.Table
    types: list[tuple[str, str]]

    @property
    def nbytes(self) -> int:
        return self.data.nbytes


def fetch(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> Table:
    """The result of ``sql`` as a Table, its text columns dictionary-encoded: kernel names and channels repeat in
    every step, and a templated kernel name is hundreds of bytes."""
    with_python_objects()
    rel = con.sql(sql, params=params) if params else con.sql(sql)
    data = rel.to_arrow_table()
    for i, column in enumerate(data.columns):
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            data = data.set_column(i, data.field(i).name, pc.dictionary_encode(column))
    return Table(data, [(name, str(kind)) for name, kind in zip(rel.columns, rel.types)])


def quote(name: str) -> str:
    """An SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def create_table(con: duckdb.DuckDBPyConnection, name: str, parts: Sequence[Table], select: str | Sequence[str] = "*",
                 temp: bool = True) -> None:
    """Create ``name`` with the columns of the first part (its DuckDB types) and insert every part, each through
    ``select`` (an SQL select list over the part's columns, e.g. ``* REPLACE (3 AS source_id)``; a list of them,
    one per part, when they differ)."""
    columns = ", ".join(f"{quote(c)} {t}" for c, t in parts[0].types)
    con.execute(f"CREATE {'TEMP ' if temp else ''}TABLE {name} ({columns})")
    insert_parts(con, name, parts, select)


def insert_parts(con: duckdb.DuckDBPyConnection, name: str, parts: Sequence[Table],
                 select: str | Sequence[str] = "*") -> None:
    """Insert the parts into an existing table (by column position), each through its select list."""
    selects = [select] * len(parts) if isinstance(select, str) else list(select)
    for part, projection in zip(parts, selects):
        with scanning(con, "__tracedoc_part", part.data):
            con.execute(f"INSERT INTO {name} SELECT {projection} FROM __tracedoc_part")


def without_sources(table: Table, source_ids: set[int]) -> Table:
    """The table's rows of other sources than ``source_ids`` (every table a rank hands back has ``source_id``)."""
    column = table.data.column("source_id")
    lost = pa.array(sorted(source_ids), type=column.type)
    return Table(table.data.filter(pc.invert(pc.is_in(column, value_set=lost))), table.types)
