"""Nsight Compute: ``.ncu-rep`` reports (via the optional ``ncu-report`` package) and ncu raw-page CSV exports.

Both readers yield the same launch tables (ncu_model.LaunchTables), written here to the ncu tables of
schema_ncu.sql in a few SQL statements: one row per profiled launch, every metric in base units, and ncu's stored
rule results when the report has them.
The format is recognised by content: the report's magic bytes, or the CSV's fixed header columns.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tracedoc.errors import InputError, TracedocError
from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.ingest.ncu import ncu_csv, ncu_rep
from tracedoc.ingest.ncu.ncu_model import INT32_MAX, LaunchTables, check_fixed, launch_tables, out_of_range
from tracedoc.store import Store
from tracedoc.store.engine import duckdb, scanning

FORMAT = "ncu"
# Launch-configuration metrics the analyses read as whole numbers (BIGINT).
_COUNT_METRICS = ("launch__grid_size", "launch__block_size", "launch__sm_count",
                  "device__attribute_multiprocessor_count")
# Averages of a unit's throughput are at most about 100 % of its sustained peak; far beyond it is no measurement.
_MAX_PCT_OF_PEAK = 1000.0
_KERNEL_COLUMNS = ("source_id", "launch_id", "name", "demangled_name", "device", "device_name", "compute_capability",
                   "context", "stream", "grid", "block", "registers_per_thread", "shared_memory_bytes", "duration_ns")
_SHARED_MEMORY = ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
_DRAWN = ("device__attribute_display_name", "launch__registers_per_thread", *_SHARED_MEMORY, "gpu__time_duration.sum")
# Metric rows stored between checkpoints, which compress what is stored so far (the store's memory stays small).
_CHECKPOINT_ROWS = 1_000_000

# Each launch with the columns of ncu_kernels drawn from its stored metrics (the last of a name wins, as in a
# dict); the integers still DOUBLE (truncated), so that _CHECK_SQL sees values past any integer type.
_LAUNCHES_SQL = f"""
    WITH drawn AS (
        SELECT launch_id,
               arg_max(text, rowid) FILTER (WHERE metric = 'device__attribute_display_name') AS device_name,
               arg_max(value, rowid) FILTER (WHERE metric = 'launch__registers_per_thread') AS registers,
               arg_max(value, rowid) FILTER (WHERE metric = '{_SHARED_MEMORY[0]}') AS smem_static,
               arg_max(value, rowid) FILTER (WHERE metric = '{_SHARED_MEMORY[1]}') AS smem_dynamic,
               arg_max(value, rowid) FILTER (WHERE metric = 'gpu__time_duration.sum') AS duration_ns
        FROM ncu_metrics WHERE source_id = {{source_id}} AND metric IN {_DRAWN} GROUP BY launch_id
    )
    SELECT k.*, d.device_name, trunc(d.registers) AS registers_per_thread,
           CASE WHEN d.smem_static IS NOT NULL OR d.smem_dynamic IS NOT NULL
                THEN trunc(coalesce(d.smem_static, 0) + coalesce(d.smem_dynamic, 0)) END AS shared_memory_bytes,
           d.duration_ns
    FROM _ncu_kernels_in k LEFT JOIN drawn d USING (launch_id)"""

# The first launch (by launch id) with a number no profiler writes: its launch id, what (a column or a metric),
# the value, and whether it is a metric. A launch's columns are checked before its metrics, metrics in order.
_CHECK_SQL = f"""
    SELECT launch_id, what, value, is_metric FROM (
        SELECT launch_id, 0 AS k, 'launch_id' AS what, CAST(launch_id AS DOUBLE) AS value, false AS is_metric
        FROM _ncu_launches WHERE NOT launch_id BETWEEN {-INT32_MAX - 1} AND {INT32_MAX}
        UNION ALL SELECT launch_id, 1, 'device', device, false FROM _ncu_launches
        WHERE NOT device BETWEEN {-INT32_MAX - 1} AND {INT32_MAX}
        UNION ALL SELECT launch_id, 2, 'registers_per_thread', registers_per_thread, false FROM _ncu_launches
        WHERE NOT registers_per_thread BETWEEN {-INT32_MAX - 1} AND {INT32_MAX}
        UNION ALL SELECT launch_id, 5, 'shared_memory_bytes', shared_memory_bytes, false FROM _ncu_launches
        WHERE NOT (shared_memory_bytes >= -9223372036854775808.0 AND shared_memory_bytes < 9223372036854775808.0)
        UNION ALL SELECT launch_id, 10 + rowid, metric, value, true FROM ncu_metrics
        WHERE source_id = {{source_id}}
          AND ((metric IN {_COUNT_METRICS} AND NOT (value >= 0 AND value < 9223372036854775808.0))
               OR (contains(metric, '.avg.pct_of_peak_sustained_') AND abs(value) > {_MAX_PCT_OF_PEAK}))
    ) ORDER BY launch_id, k LIMIT 1"""


def sniff(path: Path, head: bytes) -> bool:
    """True for an Nsight Compute report or an ncu CSV export."""
    return ncu_rep.is_report(head) or ncu_csv.is_export(head)


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one report or export into the ncu tables under ``source_id``."""
    with path.open("rb") as f:
        is_report = ncu_rep.is_report(f.read(4))
    if is_report:
        launches = ncu_rep.read(path)
        for launch in launches:
            check_fixed(path, launch.launch_id, {"device": launch.device, "context": launch.context,
                                                 "stream": launch.stream})
        tables = launch_tables(launches)
    else:
        tables = ncu_csv.read(path, workdir)
    _write(store, source_id, tables, path)
    tool = "Nsight Compute report (ncu_report)" if is_report else "Nsight Compute CSV export"
    return LoadResult(rank=None, world_size=None, event_count=tables.count, tool=tool)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """A compressed report or export, saved from its stream into ``workdir`` and read as ``load`` reads it (both
    need a file); a report that needs the missing ncu-report package is refused before it is unpacked, naming the
    user's file (``name``) and how to export it."""
    if ncu_rep.is_report(stream.head(4)):
        ncu_rep.check_readable(name, stream.compression)
    plain = workdir / f"unpacked-ncu-{source_id}"
    stream.save(plain)
    try:
        return load(store, source_id, plain, workdir)
    except TracedocError as exc:
        raise type(exc)(str(exc).replace(str(plain), str(name))) from None
    finally:
        plain.unlink(missing_ok=True)


def _write(store: Store, source_id: int, tables: LaunchTables, path: Path) -> None:
    """Store the launches: their metrics batch by batch as they are made (checkpointing now and then, so that what
    is stored is compressed), then the kernels with the columns drawn from their metrics, checked, and ncu's rule
    results; all in SQL over whole tables, no per-row work."""
    con = store.con
    unchecked = 0
    for batch in tables.metrics:
        _insert(con, "ncu_metrics", source_id, batch)
        unchecked += batch.num_rows
        if unchecked >= _CHECKPOINT_ROWS:
            con.execute("CHECKPOINT")
            unchecked = 0
    try:
        with scanning(con, "_ncu_kernels_in", tables.kernels):
            con.execute(f"CREATE OR REPLACE TEMP TABLE _ncu_launches AS {_LAUNCHES_SQL.format(source_id=source_id)}")
        _check(con, source_id, path)
        con.execute(f"INSERT INTO ncu_kernels ({', '.join(_KERNEL_COLUMNS)}) SELECT ?, "
                    f"{', '.join(_KERNEL_COLUMNS[1:])} FROM _ncu_launches ORDER BY row", [source_id])
    finally:
        con.execute("DROP TABLE IF EXISTS _ncu_launches")
    _insert(con, "ncu_rule_results", source_id, tables.rules)


def _insert(con: duckdb.DuckDBPyConnection, table: str, source_id: int, rows: pa.Table) -> None:
    """Append an Arrow table's rows to ``table`` under ``source_id``, in their order, in one statement."""
    if not rows.num_rows:
        return
    names = ", ".join(rows.column_names)
    with scanning(con, "_ncu_rows_in", rows):
        con.execute(f"INSERT INTO {table} (source_id, {names}) SELECT ?, {names} FROM _ncu_rows_in", [source_id])


def _check(con: duckdb.DuckDBPyConnection, source_id: int, path: Path) -> None:
    """Reject numbers no profiler writes — ids past their column's range, counts past 2^63, throughputs far past
    100 % of peak — with one line naming the first launch that has one, instead of an overflow deep in ingestion
    or analysis."""
    bad = con.execute(_CHECK_SQL.format(source_id=source_id)).fetchall()
    if not bad:
        return
    launch_id, what, value, is_metric = bad[0]
    if not is_metric:
        raise InputError(out_of_range(path, launch_id, what, value))
    where = f"{path}: launch {launch_id}" if 0 <= launch_id <= INT32_MAX else f"{path}"
    if what in _COUNT_METRICS:
        raise InputError(f"{where}: {what} = {value:.6g} is out of range (corrupt export?)")
    raise InputError(f"{where}: {what} = {value:.6g}% of peak is no measurement (corrupt export?)")
