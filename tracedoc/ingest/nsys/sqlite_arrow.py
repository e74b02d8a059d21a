"""Read tables of an untrusted SQLite file as Arrow record batches, for DuckDB to ingest without Python rows.

DuckDB's own sqlite extension is downloaded on first use, so it is not available offline. ADBC's SQLite driver
(``pip install tracedoc[nsys]``) reads straight into Arrow through its low-level API; without it the standard
library's sqlite3 is used: a table of integers comes as one CSV text per chunk of rows, written by SQLite and parsed
by pyarrow (no Python object per row), any other as rows turned into Arrow columns. The file is opened read-only and
immutable (no locks, no journal), and a file shorter than its header says is rejected before any query runs.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Protocol
from urllib.parse import quote

import pyarrow as pa

from tracedoc.errors import InputError, first_line
from tracedoc.ingest.nsys import SQLITE_MAGIC

_BATCH_ROWS = 65536
_ROWID_NAMES = frozenset({"rowid", "_rowid_", "oid"})


def _adbc_module() -> ModuleType | None:
    """ADBC's driver manager when its SQLite driver is installed (about 3x faster than sqlite3 on nsys kernel tables).

    Imported on first use, and only its low-level API: the DB-API module (``adbc_driver_sqlite.dbapi``) imports
    pyarrow.dataset, pandas and polars, about 1 s of CPU on every Nsight Systems input.
    """
    try:
        import adbc_driver_manager
        import adbc_driver_sqlite  # noqa: F401 - the driver the manager loads (adbc_driver_sqlite.connect)
    except ImportError:  # pragma: no cover - depends on the installed extras
        return None
    return adbc_driver_manager


def check_header(path: Path) -> None:
    """Reject a file that is not SQLite or is shorter than the page count its header records (truncated)."""
    with path.open("rb") as f:
        header = f.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise InputError(f"{path}: not an SQLite database")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, page_count, valid_for = (struct.unpack(">I", header[o:o + 4])[0] for o in (24, 28, 92))
    if page_count and change_counter == valid_for and path.stat().st_size < page_size * page_count:
        raise InputError(f"{path}: truncated SQLite database ({path.stat().st_size} of "
                         f"{page_size * page_count} bytes)")


class _Closable(Protocol):
    """A connection, cursor or reader: whatever the source keeps open until it is closed."""

    def close(self) -> None: ...


class SqliteSource:
    """One SQLite file opened read-only: its tables and columns, and queries streamed as Arrow."""

    def __init__(self, path: Path) -> None:
        check_header(path)
        self.path = path
        self._uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
        try:
            self._con = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            names = [r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            self.columns = {n: {r[0] for r in self._con.execute("SELECT name FROM pragma_table_info(?)", (n,))}
                            for n in names}
        except sqlite3.Error as exc:
            raise InputError(f"{path}: unreadable SQLite database ({exc})") from None
        self._keep: list[_Closable] = []

    def has(self, table: str, *columns: str) -> bool:
        """True when the table exists and has every named column."""
        return table in self.columns and set(columns) <= self.columns[table]

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A small query's rows as tuples (metadata, enumerations)."""
        try:
            return self._con.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise InputError(f"{self.path}: unreadable SQLite database ({exc})") from None

    def arrow(self, table: str, columns: Sequence[str], where: str, schema: pa.Schema) -> pa.RecordBatchReader:
        """Stream ``columns`` (SQL expressions, one per field of ``schema``: int64 or string) of ``table``'s rows
        that meet ``where`` (every row when empty) as Arrow batches of ``schema``."""
        adbc = _adbc_module()
        select = ", ".join(f"{c} AS {f.name}" for c, f in zip(columns, schema))
        sql = f'SELECT {select} FROM "{table}"' + (f" WHERE {where}" if where else "")
        if adbc is not None:
            return self._adbc_reader(adbc, sql, schema)
        if all(f.type == pa.int64() for f in schema) and not self.columns.get(table, set()) & _ROWID_NAMES:
            return pa.RecordBatchReader.from_batches(schema, self._text_batches(table, columns, where, schema))
        return pa.RecordBatchReader.from_batches(schema, self._sqlite3_batches(sql, schema))

    def _adbc_reader(self, adbc: ModuleType, sql: str, schema: pa.Schema) -> pa.RecordBatchReader:
        # The reader reads through the statement, its connection and database: all four stay open until close(),
        # which closes them in reverse order (a database closed before its statement raises, even from the
        # collector).
        import adbc_driver_sqlite

        try:
            database = adbc_driver_sqlite.connect(self._uri)
            self._keep.append(database)
            con = adbc.AdbcConnection(database)
            self._keep.append(con)
            statement = adbc.AdbcStatement(con)
            self._keep.append(statement)
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(_BATCH_ROWS)})
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            reader = pa.RecordBatchReader._import_from_c(stream.address)
            self._keep.append(reader)
        except Exception as exc:  # the driver raises its own error classes
            raise InputError(f"{self.path}: unreadable SQLite database ({first_line(exc)})") from None
        return pa.RecordBatchReader.from_batches(schema, _cast(reader, schema))

    def _sqlite3_batches(self, sql: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        cur = self._con.execute(sql)
        while rows := cur.fetchmany(_BATCH_ROWS):
            columns = zip(*rows)
            yield pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)],
                                             schema=schema)

    def _text_batches(self, table: str, columns: Sequence[str], where: str,
                      schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Integer columns without a Python object per row: SQLite writes each chunk of rows (in rowid order) as
        one CSV text, NULL as an empty field, and pyarrow parses it. A value that is not an integer fails the
        parse; one whose text holds a comma or a line break changes the fields or the rows counted, and is
        refused as well. pyarrow's CSV module is imported here, by the runs that read this way only."""
        import pyarrow.csv as pa_csv

        line = "printf('" + ",".join(["%s"] * len(columns)) + "', " + ", ".join(columns) + ")"
        chunk = (f"SELECT group_concat(line, char(10)), max(r), count(*) FROM (SELECT rowid AS r, {line} AS line "
                 f'FROM "{table}" WHERE rowid >= ?' + (f" AND ({where})" if where else "")
                 + f" ORDER BY rowid LIMIT {_BATCH_ROWS})")
        read = pa_csv.ReadOptions(column_names=schema.names, use_threads=False)
        parse = pa_csv.ParseOptions(ignore_empty_lines=False)
        convert = pa_csv.ConvertOptions(column_types=schema)
        start = -(1 << 63)
        while True:
            try:
                text, last, count = self._con.execute(chunk, (start,)).fetchone()
            except sqlite3.Error as exc:
                raise InputError(f"{self.path}: unreadable SQLite database ({exc})") from None
            if not count:
                return
            batches = pa_csv.read_csv(io.BytesIO(str(text).encode()), read_options=read, parse_options=parse,
                                      convert_options=convert, memory_pool=pa.system_memory_pool()).to_batches()
            if sum(b.num_rows for b in batches) != count:
                raise pa.ArrowInvalid(f"{table}: a value that is not an integer")
            yield from batches
            if count < _BATCH_ROWS or last >= (1 << 63) - 1:
                return
            start = last + 1

    def close(self) -> None:
        """Close every reader, cursor and connection, newest first; a failure to close one (after an error
        half-way through a read) does not keep the others open, nor hide the error being reported."""
        for obj in reversed(self._keep):
            with contextlib.suppress(Exception):
                obj.close()
        self._keep.clear()
        self._con.close()


def _cast(reader: pa.RecordBatchReader, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """ADBC types each column from its first rows (an all-NULL column reads as int64): cast to the schema."""
    for batch in reader:
        yield pa.RecordBatch.from_arrays([batch.column(i).cast(f.type) for i, f in enumerate(schema)],
                                         schema=schema)

