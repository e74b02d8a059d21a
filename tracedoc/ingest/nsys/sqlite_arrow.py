"""Read tables of an untrusted SQLite file as Arrow streams, for DuckDB to ingest without Python rows.

DuckDB's own sqlite extension is downloaded on first use, so it is not available offline. ADBC's SQLite driver
(``pip install tracedoc[nsys]``) reads straight into an Arrow C stream through its low-level API, which DuckDB scans
as it comes: no pyarrow on that path (its import alone is 0.15 s of CPU and about 45 MiB of memory). ADBC types each
column from its first batch of rows (_BATCH_ROWS), so the select that reads a stream (``select_as``) casts every
column to its field's type and refuses what is not an integer in an integer field. Without ADBC the standard
library's sqlite3 is used, through pyarrow: a table of integers comes as one CSV text per chunk of rows, written by
SQLite and parsed by pyarrow (no Python object per row), any other as rows turned into Arrow columns. The file is
opened read-only and immutable (no locks, no journal), and a file shorter than its header says is rejected before
any query runs.
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from tracedoc.errors import InputError, first_line
from tracedoc.ingest.nsys import SQLITE_MAGIC

if TYPE_CHECKING:
    import pyarrow as pa

    from tracedoc.store.engine import duckdb

_BATCH_ROWS = 65536
_ROWID_NAMES = frozenset({"rowid", "_rowid_", "oid"})
_INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
                            "UBIGINT", "HUGEINT", "UHUGEINT", "BOOLEAN"})
# sqlite3 decodes SQLite's own error text as UTF-8: a damaged file's schema in it raises UnicodeDecodeError.
_SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)
# A text longer than this (characters) is cut to TEXT_KEPT_CHARS and a hash of the whole (distinct texts stay
# distinct): an export names kernels, calls and ranges once in StringIds and every row that uses a name gets a copy,
# so one name of 10 MB used by a thousand kernels took the analyses to 7.8 GB for an 11.5 MB file. The longest name
# in the samples is 1,772 characters.
TEXT_MAX_CHARS = 16384
TEXT_KEPT_CHARS = 16000

Field = tuple[str, str]
"""A column as read: its name and 'int' (64-bit integer) or 'text'."""


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


class _StreamHandle(Protocol):
    """ADBC's ArrowArrayStreamHandle: valid until the stream is released (by DuckDB's scan, or here)."""

    is_valid: bool

    def release(self) -> None: ...


class _Released:
    """An ADBC stream handle closed as the others are: released, unless DuckDB's scan has released it already, before
    its statement closes (an error between the query and the scan leaves it unread)."""

    def __init__(self, handle: _StreamHandle) -> None:
        self._handle = handle

    def close(self) -> None:
        if self._handle.is_valid:
            self._handle.release()


class SqliteSource:
    """One SQLite file opened read-only: its tables and columns, and queries streamed as Arrow."""

    def __init__(self, path: Path) -> None:
        check_header(path)
        self.path = path
        self._uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
        try:
            self._con = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            names = [r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            self.columns = {n: {r[0] for r in self._con.execute(
                "SELECT name FROM pragma_table_xinfo(?) WHERE hidden <> 1", (n,))} for n in names}  # generated too
        except _SQLITE_ERRORS as exc:
            raise InputError(f"{path}: unreadable SQLite database ({exc})") from None
        self._keep: list[_Closable] = []

    def has(self, table: str, *columns: str) -> bool:
        """True when the table exists and has every named column."""
        return table in self.columns and set(columns) <= self.columns[table]

    @property
    def streams_apart(self) -> bool:
        """Whether each stream reads through a connection of its own (ADBC's), so that streams may be read at once
        on several threads; the standard library's path reads every stream through the one connection."""
        return _adbc_module() is not None

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """A small query's rows as tuples (metadata, enumerations)."""
        try:
            return self._con.execute(sql, params).fetchall()
        except _SQLITE_ERRORS as exc:
            raise InputError(f"{self.path}: unreadable SQLite database ({exc})") from None

    def stream(self, table: str, columns: Sequence[str], where: str, fields: Sequence[Field]) -> object:
        """Stream ``columns`` (SQL expressions, one per field) of ``table``'s rows that meet ``where`` (every row
        when empty) as an Arrow stream DuckDB can scan (``__arrow_c_stream__``), named as ``fields``; read it through
        ``select_as``, which gives each field its type."""
        adbc = _adbc_module()
        select = ", ".join(f"{c} AS {name}" for c, (name, _) in zip(columns, fields))
        sql = f'SELECT {select} FROM "{table}"' + (f" WHERE {where}" if where else "")
        if adbc is not None:
            return self._adbc_stream(adbc, sql)
        import pyarrow as pa

        schema = pa.schema([(name, pa.string() if typ == "text" else pa.int64()) for name, typ in fields])
        if all(typ != "text" for _, typ in fields) and not self.columns.get(table, set()) & _ROWID_NAMES:
            return pa.RecordBatchReader.from_batches(schema, self._text_batches(table, columns, where, schema))
        return pa.RecordBatchReader.from_batches(schema, self._sqlite3_batches(sql, schema))

    def _adbc_stream(self, adbc: ModuleType, sql: str) -> object:
        # The stream reads through the statement, its connection and database: all three stay open until close(),
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
            self._keep.append(_Released(stream))
        except Exception as exc:  # the driver raises its own error classes
            raise InputError(f"{self.path}: unreadable SQLite database ({first_line(exc)})") from None
        return stream

    def _sqlite3_batches(self, sql: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

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
        import pyarrow as pa
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
            except _SQLITE_ERRORS as exc:
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


def select_as(con: duckdb.DuckDBPyConnection, view: str, fields: Sequence[Field]) -> str:
    """The select list that reads ``view`` (a ``stream`` registered on ``con``) as ``fields``' types.

    A stream's column types are those ADBC saw in its first batch of rows (a column of NULLs reads as an integer;
    an integer field holding 1.5 or '7' there reads as a float or text; a value of another type in a later batch
    fails the read in ADBC). An integer field read as text is cast where each value is a whole number, else the
    read fails; one read as a float fails whatever its values (ADBC has made every value of the batch a float:
    beyond 2^53 they are no longer the integers stored). A text field is cast to text (a blob decoded as UTF-8),
    bounded at TEXT_MAX_CHARS. DESCRIBE reads the stream's schema, not its rows.
    """
    described = {name: typ for name, typ, *_ in con.execute(f"DESCRIBE SELECT * FROM {view}").fetchall()}
    return ", ".join(_cast_to(name, typ, described[name]) for name, typ in fields)


def _cast_to(name: str, typ: str, stream_type: str) -> str:
    if typ == "text":  # a blob is its bytes as UTF-8 (invalid bytes fail the read), not as escapes
        text = name if stream_type == "VARCHAR" else f"decode({name})" if stream_type == "BLOB" else \
            f"CAST({name} AS VARCHAR)"
        return (f"CASE WHEN length({text}) > {TEXT_MAX_CHARS} THEN left({text}, {TEXT_KEPT_CHARS}) || '…' || "
                f"md5({text}) ELSE {text} END AS {name}")
    if stream_type == "BIGINT":
        return name
    if stream_type in _INTEGER_TYPES:
        return f"CAST({name} AS BIGINT) AS {name}"
    whole = f"regexp_full_match({name}, '[+-]?[0-9]+')" if stream_type == "VARCHAR" else "false"
    return (f"CASE WHEN {name} IS NULL OR {whole} THEN CAST({name} AS BIGINT) "
            f"ELSE error('{name}: a value that is not an integer') END AS {name}")
