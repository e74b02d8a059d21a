"""Nsight Systems reports into the store: ``.sqlite`` exports read directly, ``.nsys-rep`` exported first.

Both need a file (SQLite opens a path; ``nsys export`` reads one): a compressed report or export is unpacked into
the work directory by ingest, the one timeline format not read as it unpacks.

An export is versioned, lazy and sparse: a table exists only when its data was captured and columns are added
with every release (nsys 2021.x to 2026.x). So every table and column is probed first, a missing column reads as
NULL, and only the columns tracedoc needs are read. Rows travel SQLite → Arrow → DuckDB (tracedoc.ingest.
sqlite_arrow); names are resolved through the export's StringIds dictionary and normalized in SQL.

Ranks and clocks: a report of one process is one rank (from MPI, else the launcher's ``RANK`` variable, else the
file name); a report of several processes with GPU work is one rank per process (nsys_sql). Times are moved from
the report's session clock onto UTC (its recorded session start), so that reports written by several processes or
hosts share one clock; what clock offsets remain is measured on the collectives (ranks.collectives).

Privacy: the export keeps the profiled process's whole environment (META_DATA_CAPTURE ``PROCESS_n:
ENVIRONMENT_VARIABLE`` rows, TARGET_INFO_SYSTEM_ENV ``DeviceEnvironment``). Of the environment only the value of
``RANK`` is read, by a query that returns nothing else; of the rest of the export's metadata only the product and
schema versions and the session's start time are.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracedoc.errors import InputError, first_line
from tracedoc.ingest.base import LoadResult, Part
from tracedoc.ingest.nsys import SQLITE_MAGIC, is_sqlite
from tracedoc.ingest.nsys.nsys_sql import GPU_TEMP, NORMALIZE_GPU_SQL, NORMALIZE_HOST_SQL, TABLES, TIMED, TableSpec
from tracedoc.ingest.nsys.sqlite_arrow import SqliteSource, select_as
from tracedoc.store import Store
from tracedoc.store.engine import duckdb, scanning
from tracedoc.store.memory import out_of_memory_advice
from tracedoc.store.store import cores, scalar, sql_literal

FORMAT = "nsys"

_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_REPORT_MAGIC = b"NVIDIA Tegra Profiler Report"  # the first bytes of an .nsys-rep (nsys 2025.3)
# Table names that only an Nsight Systems export has; found in the schema text near the start of the file.
_MARKERS = (b"CUPTI_ACTIVITY_KIND_", b"TARGET_INFO_GPU", b"NVTX_EVENTS", b"META_DATA_EXPORT")
_EXPORT_TIMEOUT_S = 3600
_UTC_2100_NS = 4_102_444_800 * 10**9
_RANK_VALUE = re.compile(r'^RANK="?([0-9]{1,9})"?$')
# The export's tables read at once (_read_tables): at most this many, the largest of them first.
_MAX_READS = 4
_LARGEST = ("_ns_kernel", "_ns_api", "_ns_osrt", "_ns_nvtx", "_ns_memcpy", "_ns_sync")
# The temp tables the normalisation makes (nsys_sql), dropped once it is done.
_NORMALIZE_TEMP = ("_ns_gpu_processes", "_ns_pid_source")


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
    return export if export.is_file() and is_sqlite(export) else None


def redundant_in_directory(path: Path, head: bytes) -> bool:
    """A report whose export sits beside it (``run.nsys-rep`` and ``run.sqlite``, as `nsys stats` and
    `nsys analyze` leave them): in a directory only the export is read, or the rank would count twice."""
    return _is_report(path, head) and _export_beside(path) is not None


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one report or export into the store's tables under ``source_id``.

    A report is read through the export beside it when there is one (the same data, no nsys needed), else
    exported with nsys first.
    """
    sqlite_path = path if is_sqlite(path) else _export_beside(path) or export_report(path, workdir)
    source = SqliteSource(sqlite_path)
    try:
        if not _is_export(source):
            raise InputError(f"{path}: an SQLite database, but not an Nsight Systems export")
        event_count, parts = _load_tables(store, source, path, source_id)
        rank = _mpi_rank(source) if not parts else None
        if rank is None and not parts:
            rank = _launch_rank(source)
        tool = _tool(source)
    finally:
        source.close()
        if sqlite_path.parent == workdir:
            sqlite_path.unlink(missing_ok=True)
    if event_count == 0:
        raise InputError(f"{path}: the export holds no CUDA, NVTX or OS runtime events")
    return LoadResult(rank, len(parts) or None, event_count, tool, parts)


def export_command(report: Path, output: Path, nsys: str = "nsys", overwrite: bool = False) -> list[str]:
    """The `nsys export` command line that turns a report into an SQLite export."""
    force = ["--force-overwrite", "true"] if overwrite else []
    return [nsys, "export", "--type", "sqlite", *force, "--output", str(output), str(report)]


def prepare(paths: Sequence[Path], workdir: Path) -> None:
    """Export the reports among ``paths`` that have no export beside them, in parallel (one nsys process each, as
    many at once as there are cores this process may run on), into ``workdir``, where ``load`` then finds them: a
    job's reports, one per rank, are exported side by side instead of one after the other."""
    pending = [p for p in paths if not is_sqlite(p) and _export_beside(p) is None]
    if len(pending) < 2 or shutil.which("nsys") is None:
        return  # load exports a single report itself, and says how when there is no nsys
    with ThreadPoolExecutor(max_workers=min(len(pending), cores())) as pool:
        for _ in pool.map(lambda report: export_report(report, workdir), pending):
            pass


def export_report(report: Path, workdir: Path) -> Path:
    """Export ``report`` to SQLite under ``workdir`` with the nsys on PATH (unless ``prepare`` did already); without
    nsys, say how to do it."""
    target = _export_target(report, workdir)
    if target.is_file():
        return target
    nsys = shutil.which("nsys")
    if nsys is None:
        if report.parent == workdir:  # unpacked from the gzip or xz file given: no command runs on that one
            raise InputError(f"{report}: reading an .nsys-rep needs Nsight Systems' nsys on PATH; unpack it "
                             "(unxz -k or gunzip -k), export it (nsys export --type sqlite REPORT.nsys-rep) and "
                             "analyse the .sqlite instead")
        command = " ".join(export_command(report, report.with_suffix(".sqlite")))
        raise InputError(f"{report}: reading an .nsys-rep needs Nsight Systems' nsys on PATH; export it and "
                         f"analyse the .sqlite instead: {command}")
    cmd = export_command(report, target, nsys, overwrite=True)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_EXPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"{report}: nsys export failed ({exc})") from None
    if done.returncode != 0 or not target.is_file():
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        raise InputError(f"{report}: nsys export failed ({lines[-1] if lines else f'exit {done.returncode}'})")
    return target


def _export_target(report: Path, workdir: Path) -> Path:
    """Where a report's export goes in ``workdir``: its name and a hash of its path (the rank0.nsys-rep of two
    folders are two reports)."""
    digest = hashlib.blake2b(str(report.resolve()).encode(), digest_size=6).hexdigest()
    return workdir / f"{report.stem}-{digest}.sqlite"


def _is_export(source: SqliteSource) -> bool:
    return any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in source.columns) or source.has("NVTX_EVENTS") \
        or source.has("TARGET_INFO_GPU") or source.has("META_DATA_EXPORT", "name", "value")


def _load_tables(store: Store, source: SqliteSource, path: Path, source_id: int) -> tuple[int, tuple[Part, ...]]:
    """Read every known table (``_read_tables``), then normalize them into the store, the GPU's rows first: their
    raw tables are then dropped and the store compressed (``Store.compress``), so that the CUDA calls'
    normalisation, the largest, runs beside the GPU's rows compressed instead of beside them and their raw rows, all
    uncompressed. Return the events read and, when the export holds several ranks, its parts (else none)."""
    con = store.con
    raw = f"_nsys_raw_{int(source_id)}"
    database, search_path = con.execute("SELECT current_database(), current_setting('search_path')").fetchall()[0]
    con.execute(f"ATTACH ':memory:' AS {raw}")
    try:
        _read_tables(con, source, raw, _session_start(source))
        # The normalisation reads the raw tables by their names: after the store's, in the database they were read
        # into (the store's own tables and the temp ones come first).
        quoted = '"' + str(database).replace('"', '""') + '"'
        con.execute(f"SET search_path = {sql_literal(f'{quoted}.main,{raw}.main')}")
        events, twice = con.execute(
            "SELECT " + " + ".join(f"(SELECT count(*) FROM {spec.temp})" for spec in TABLES if spec.counts)
            + ", (SELECT min(id) FROM (SELECT id FROM _ns_str GROUP BY id HAVING count(*) > 1))").fetchall()[0]
        if twice is not None:  # StringIds' key: each row naming it would count once per copy
            raise InputError(f"{path}: malformed Nsight Systems export (string id {twice} appears more than once)")
        con.execute(f"SET VARIABLE source_id = {int(source_id)}")
        con.execute(NORMALIZE_GPU_SQL)
        for table in GPU_TEMP:
            con.execute(f"DROP TABLE {raw}.main.{table}")
        store.compress()
        con.execute(NORMALIZE_HOST_SQL)
        parts = _parts(con)
    except duckdb.OutOfMemoryException as exc:
        raise InputError(f"{path}: out of memory while reading the export ({first_line(exc)})"
                         f"{out_of_memory_advice(store.limits.memory_bytes)}") from None
    except duckdb.Error as exc:
        raise InputError(f"{path}: malformed Nsight Systems export ({first_line(exc)})") from None
    finally:
        con.execute(f"SET search_path = {sql_literal(search_path)}")
        con.execute(f"DETACH DATABASE IF EXISTS {raw}")
        for table in _NORMALIZE_TEMP:
            con.execute(f"DROP TABLE IF EXISTS {table}")
    return events, parts


def _read_tables(con: duckdb.DuckDBPyConnection, source: SqliteSource, raw: str, start_ns: int) -> None:
    """Stream every known table of the export into a table of the database ``raw``, its times put on UTC on the
    way in (an empty one where the export lacks it). The tables are read at once, each on a cursor of its own, as
    many as DuckDB has threads (four at most), the largest first: SQLite reads a table on one thread, and the
    kernels and the CUDA calls, read one after the other, left a core idle (a 199 MB export's reads took 1.1 s
    instead of 1.8–2.0 s on 2 cores). Where the source reads through one SQLite connection (without ADBC), one at
    a time. An error is the first table's in ``TABLES``' order."""
    def read(spec: TableSpec, cur: duckdb.DuckDBPyConnection) -> None:
        fields = [(name, typ) for name, typ, *_ in spec.columns]
        table = next((t for t in spec.tables if source.has(t)), None)
        if table is None:
            cur.execute(f"CREATE TABLE {raw}.main.{spec.temp} AS SELECT "
                        + ", ".join(f"CAST(NULL AS {'VARCHAR' if typ == 'text' else 'BIGINT'}) AS {name}"
                                    for name, typ in fields) + " LIMIT 0")
            return
        stream = source.stream(table, _columns(source, spec, table), _where(spec, source.columns[table]), fields)
        with scanning(cur, "_nsys_in", stream):
            cur.execute(f"CREATE TABLE {raw}.main.{spec.temp} AS SELECT {_on_utc(spec, start_ns)} "
                        f"FROM (SELECT {select_as(cur, '_nsys_in', fields)} FROM _nsys_in)")

    workers = min(_MAX_READS, int(scalar(con, "SELECT current_setting('threads')")))
    if workers < 2 or not source.streams_apart:
        for spec in TABLES:
            read(spec, con)
        return
    cursors = [con.cursor() for _ in range(workers)]
    free = list(cursors)
    lock = threading.Lock()

    def read_on_a_cursor(spec: TableSpec) -> None:
        with lock:
            cur = free.pop()
        try:
            read(spec, cur)
        finally:
            with lock:
                free.append(cur)

    largest_first = sorted(TABLES, key=lambda spec: _LARGEST.index(spec.temp) if spec.temp in _LARGEST
                           else len(_LARGEST))
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {spec.temp: pool.submit(read_on_a_cursor, spec) for spec in largest_first}
            try:
                for spec in TABLES:
                    futures[spec.temp].result()
            except BaseException:
                for future in futures.values():
                    future.cancel()
                for cur in cursors:
                    cur.interrupt()
                raise
    finally:
        for cur in cursors:
            cur.close()


def _session_start(source: SqliteSource) -> int:
    """When the capture session started, UTC ns (TARGET_INFO_SESSION_START_TIME), else 0 (times stay on the
    session's clock). A value beyond 2100 is not a clock reading and reads as 0."""
    if not source.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        return 0
    rows = source.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
    start = rows[0][0] if rows else None
    return start if isinstance(start, int) and 0 < start < _UTC_2100_NS else 0


def _on_utc(spec: TableSpec, start_ns: int) -> str:
    """The select list that moves a table's times (``TIMED``) from the session's clock onto UTC, adding the
    session's start: a row whose times a clock cannot read (within 2^62 ns of the start) keeps them as they are,
    for ingest's check of the times to refuse them. Done as the rows come in: no second version of the largest
    tables (kernels, CUDA calls) is written, as an UPDATE afterwards would."""
    if not start_ns or spec.temp not in TIMED:
        return "*"
    keep = f"greatest(ts, te) >= {(1 << 62) - int(start_ns)}"
    return (f"* REPLACE (CASE WHEN {keep} THEN ts ELSE ts + {int(start_ns)} END AS ts, "
            f"CASE WHEN {keep} THEN te ELSE te + {int(start_ns)} END AS te)")


def _parts(con: duckdb.DuckDBPyConnection) -> tuple[Part, ...]:
    """The ranks of an export of several GPU processes, in source order, with their events (none for one)."""
    rows = con.execute("""
        SELECT m.pid, m.mpi_rank,
               (SELECT count(*) FROM gpu_activity g WHERE g.source_id = m.source_id)
               + (SELECT count(*) FROM cpu_activity c WHERE c.source_id = m.source_id) AS events
        FROM _ns_pid_source m WHERE (SELECT count(DISTINCT source_id) FROM _ns_pid_source) > 1
        ORDER BY m.source_id""").fetchall()
    return tuple(Part(int(pid), _valid_rank(rank), int(events)) for pid, rank, events in rows)


def _columns(source: SqliteSource, spec: TableSpec, table: str) -> list[str]:
    """The spec's columns of ``table``, each under the first of its export names that exists; a column this export
    lacks reads as NULL. Text reads as '' instead of NULL (ADBC types a column from its first batch of rows) and becomes
    NULL again in SQL."""
    have = source.columns[table]
    exprs = []
    for _, typ, *candidates in spec.columns:
        expr = next((f'"{c}"' for c in candidates if c in have), "NULL")
        exprs.append(f"ifnull({expr}, '')" if typ == "text" else expr)
    return exprs


def _where(spec: TableSpec, have: set[str]) -> str:
    """The spec's filter, when the export has its columns (else every row)."""
    return spec.where if spec.where and _where_columns_present(spec, have) else ""


def _where_columns_present(spec: TableSpec, have: set[str]) -> bool:
    return all(c in have for c in spec.where_columns)


def _mpi_rank(source: SqliteSource) -> int | None:
    """The MPI rank when the capture traced MPI (``--trace=mpi``) and holds exactly one rank."""
    if not source.has("MPI_RANKS", "rank"):
        return None
    ranks = source.rows('SELECT DISTINCT "rank" FROM MPI_RANKS')
    return _valid_rank(ranks[0][0]) if len(ranks) == 1 else None


def _launch_rank(source: SqliteSource) -> int | None:
    """The ``RANK`` variable of the launched process (``torchrun ... nsys profile python train.py``), when the
    export records exactly one value. The query returns that variable's rows alone: no other variable of the
    environment leaves the export."""
    if not source.has("META_DATA_CAPTURE", "name", "value"):
        return None
    values = {str(v) for (v,) in source.rows(
        "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE' "
        "AND value LIKE 'RANK=%'")}
    found = {m.group(1) for v in values if (m := _RANK_VALUE.match(v))}
    return _valid_rank(int(found.pop())) if len(found) == 1 else None


def _valid_rank(rank: object) -> int | None:
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 1 << 31 else None


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

