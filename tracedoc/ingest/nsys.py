"""Nsight Systems reports into the store: ``.sqlite`` exports read directly, ``.nsys-rep`` exported first.

An export is versioned, lazy and sparse: a table exists only when its data was captured and columns are added
with every release (nsys 2021.x to 2026.x). So every table and column is probed first, a missing column reads as
NULL, and only the columns tracedoc needs are read. Rows travel SQLite → Arrow → DuckDB (tracedoc.ingest.
sqlite_arrow); names are resolved through the export's StringIds dictionary and normalized in SQL.

Privacy: the export keeps the profiled process's whole environment (META_DATA_CAPTURE ``PROCESS_n:
ENVIRONMENT_VARIABLE`` rows, TARGET_INFO_SYSTEM_ENV ``DeviceEnvironment``). Neither table is ever read; of the
export's metadata only the product and schema versions are.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

import duckdb
import pyarrow as pa

from tracedoc.errors import InputError, first_line
from tracedoc.ingest.kineto import LoadResult
from tracedoc.ingest.nsys_sql import NORMALIZE_SQL, TABLES, TableSpec
from tracedoc.ingest.sqlite_arrow import SQLITE_MAGIC, SqliteSource
from tracedoc.store import Store

FORMAT = "nsys"

_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # the first bytes of an .nsys-rep (nsys 2025.3)
# Table names that only an Nsight Systems export has; found in the schema text near the start of the file.
_MARKERS = (b"CUPTI_ACTIVITY_KIND_", b"TARGET_INFO_GPU", b"NVTX_EVENTS", b"META_DATA_EXPORT")
_EXPORT_TIMEOUT_S = 3600


def sniff(path: Path, head: bytes) -> bool:
    """An nsys report by its extension or header, or an SQLite file whose schema holds nsys tables."""
    if _is_report(path, head):
        return True
    if not head.startswith(SQLITE_MAGIC):
        return False
    if any(m in head for m in _MARKERS):
        return True
    try:
        source = SqliteSource(path)
    except InputError:
        return False
    try:
        return _is_export(source)
    finally:
        source.close()


def _is_report(path: Path, head: bytes) -> bool:
    return path.name.lower().endswith(_REPORT_SUFFIXES) or head.startswith(_REPORT_MAGIC)


def _export_beside(report: Path) -> Path | None:
    """``run.sqlite`` beside ``run.nsys-rep``, when it is an SQLite file."""
    export = report.with_suffix(".sqlite")
    return export if export.is_file() and _read_head(export).startswith(SQLITE_MAGIC) else None


def redundant_in_directory(path: Path, head: bytes) -> bool:
    """A report whose export sits beside it (``run.nsys-rep`` and ``run.sqlite``, as `nsys stats` and
    `nsys analyze` leave them): in a directory only the export is read, or the rank would count twice."""
    return _is_report(path, head) and _export_beside(path) is not None


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one report or export into the store's tables under ``source_id``.

    A report is read through the export beside it when there is one (the same data, no nsys needed), else
    exported with nsys first.
    """
    if _read_head(path).startswith(SQLITE_MAGIC):
        sqlite_path = path
    else:
        sqlite_path = _export_beside(path) or export_report(path, workdir)
    source = SqliteSource(sqlite_path)
    try:
        if not _is_export(source):
            raise InputError(f"{path}: an SQLite database, but not an Nsight Systems export")
        event_count = _load_tables(store.con, source, path, source_id)
        rank = _mpi_rank(source)
        tool = _tool(source)
    finally:
        source.close()
        if sqlite_path.parent == workdir:
            sqlite_path.unlink(missing_ok=True)
    if event_count == 0:
        raise InputError(f"{path}: the export holds no CUDA, NVTX or OS runtime events")
    return LoadResult(rank, None, event_count, tool)


def export_command(report: Path, output: Path, nsys: str = "nsys", overwrite: bool = False) -> list[str]:
    """The `nsys export` command line that turns a report into an SQLite export."""
    force = ["--force-overwrite", "true"] if overwrite else []
    return [nsys, "export", "--type", "sqlite", *force, "--output", str(output), str(report)]


def export_report(report: Path, workdir: Path) -> Path:
    """Export ``report`` to SQLite under ``workdir`` with the nsys on PATH; without nsys, say how to do it."""
    nsys = shutil.which("nsys")
    if nsys is None:
        command = " ".join(export_command(report, report.with_suffix(".sqlite")))
        raise InputError(f"{report}: reading an .nsys-rep needs Nsight Systems' nsys on PATH; export it and "
                         f"analyse the .sqlite instead: {command}")
    target = workdir / (report.stem + ".sqlite")
    cmd = export_command(report, target, nsys, overwrite=True)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_EXPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"{report}: nsys export failed ({exc})") from None
    if done.returncode != 0 or not target.is_file():
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        raise InputError(f"{report}: nsys export failed ({lines[-1] if lines else f'exit {done.returncode}'})")
    return target


def _read_head(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(len(SQLITE_MAGIC))


def _is_export(source: SqliteSource) -> bool:
    return any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in source.columns) or source.has("NVTX_EVENTS") \
        or source.has("TARGET_INFO_GPU") or source.has("META_DATA_EXPORT", "name", "value")


def _load_tables(con: duckdb.DuckDBPyConnection, source: SqliteSource, path: Path, source_id: int) -> int:
    """Stream every known table into a DuckDB temp table, then normalize them into the store; return events read."""
    events = 0
    try:
        for spec in TABLES:
            table = next((t for t in spec.tables if source.has(t)), None)
            reader = source.arrow(_select(source, spec, table), _schema(spec)) if table else _empty(spec)
            con.register("_nsys_in", reader)
            con.execute(f"CREATE OR REPLACE TEMP TABLE {spec.temp} AS SELECT * FROM _nsys_in")
            con.unregister("_nsys_in")
            if spec.counts:
                events += con.execute(f"SELECT count(*) FROM {spec.temp}").fetchall()[0][0]
        con.execute(f"SET VARIABLE source_id = {int(source_id)}")
        con.execute(NORMALIZE_SQL)
    except (duckdb.Error, pa.ArrowException) as exc:
        raise InputError(f"{path}: malformed Nsight Systems export ({first_line(exc)})") from None
    finally:
        with contextlib.suppress(duckdb.Error):
            con.unregister("_nsys_in")  # still registered when a read failed half-way
        for spec in TABLES:
            con.execute(f"DROP TABLE IF EXISTS {spec.temp}")
    return events


def _select(source: SqliteSource, spec: TableSpec, table: str) -> str:
    """SELECT of the spec's columns from ``table``, each under the first of its export names that exists; a
    column this export lacks reads as NULL. Text reads as '' instead of NULL (ADBC types a column from its first
    rows) and becomes NULL again in SQL."""
    have = source.columns[table]
    parts = []
    for name, typ, *candidates in spec.columns:
        expr = next((f'"{c}"' for c in candidates if c in have), "NULL")
        parts.append(f"ifnull({expr}, '') AS {name}" if typ == "text" else f"{expr} AS {name}")
    where = f" WHERE {spec.where}" if spec.where and _where_columns_present(spec, have) else ""
    return f'SELECT {", ".join(parts)} FROM "{table}"{where}'


def _where_columns_present(spec: TableSpec, have: set[str]) -> bool:
    return all(c in have for c in spec.where_columns)


def _schema(spec: TableSpec) -> pa.Schema:
    return pa.schema([(name, pa.string() if typ == "text" else pa.int64()) for name, typ, *_ in spec.columns])


def _empty(spec: TableSpec) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(_schema(spec), iter(()))


def _mpi_rank(source: SqliteSource) -> int | None:
    """The MPI rank when the capture traced MPI (``--trace=mpi``) and holds exactly one rank."""
    if not source.has("MPI_RANKS", "rank"):
        return None
    ranks = source.rows('SELECT DISTINCT "rank" FROM MPI_RANKS')
    rank = ranks[0][0] if len(ranks) == 1 else None
    return rank if isinstance(rank, int) and 0 <= rank < 1 << 31 else None


def _tool(source: SqliteSource) -> str:
    """'Nsight Systems <version>, export schema <x.y.z>' from META_DATA_EXPORT (no other metadata is read)."""
    meta: dict[str, str] = {}
    if source.has("META_DATA_EXPORT", "name", "value"):
        meta = {str(n): str(v)[:40] for n, v in source.rows(
            "SELECT name, value FROM META_DATA_EXPORT WHERE name IN ('EXPORT_PRODUCT_VERSION', "
            "'EXPORT_SCHEMA_VERSION')")}
    parts = ["Nsight Systems " + meta.get("EXPORT_PRODUCT_VERSION", "(version unknown)")]
    if "EXPORT_SCHEMA_VERSION" in meta:
        parts.append(f"export schema {meta['EXPORT_SCHEMA_VERSION']}")
    return ", ".join(parts)

