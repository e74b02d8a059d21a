"""GPU telemetry written by ``tracedoc health --watch`` (``*.telemetry.parquet``) into the store's gpu_telemetry.

A file is claimed only when it is Parquet and its schema carries tracedoc's telemetry metadata key (or when it is
named ``*.telemetry.parquet``, so that a damaged one gets a clear error instead of being skipped). Telemetry
covers every GPU of a host, not one rank: the source holds no rank, and analyses match its devices to the ranks
that used them. DuckDB reads the Parquet columns straight into the table; every value is cast to its column's
type, so a file with the right names but wrong contents fails as bad input. Parquet is read by seeking (its
footer first): a compressed file is unpacked into the work directory by ingest, not read as it unpacks.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracedoc.errors import InputError, first_line
from tracedoc.health.watch import SCHEMA, TELEMETRY_KEY
from tracedoc.ingest.base import LoadResult
from tracedoc.ingest.content import PARQUET_MAGIC
from tracedoc.store import Store
from tracedoc.store.engine import duckdb

FORMAT = "telemetry"

_SUFFIX = ".telemetry.parquet"
_SQL_TYPES = {pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.string(): "VARCHAR"}


def sniff(path: Path, head: bytes) -> bool:
    """True for a Parquet file with tracedoc's telemetry metadata, or one named ``*.telemetry.parquet``."""
    if head[:4] != PARQUET_MAGIC:
        return False
    if path.name.lower().endswith(_SUFFIX):
        return True
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException):
        return False
    return TELEMETRY_KEY in metadata


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one telemetry file into gpu_telemetry under ``source_id``."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: corrupt or truncated telemetry Parquet ({first_line(exc)})") from None
    metadata = schema.metadata or {}
    if TELEMETRY_KEY not in metadata:
        raise InputError(f"{path}: Parquet without tracedoc telemetry metadata (not written by tracedoc health)")
    missing = [name for name in SCHEMA.names if name not in schema.names]
    if missing:
        raise InputError(f"{path}: telemetry without the column(s) {', '.join(missing)}")
    columns = ", ".join(f'CAST("{f.name}" AS {_SQL_TYPES[f.type]}) AS "{f.name}"' for f in SCHEMA)
    try:
        store.con.execute(f"INSERT INTO gpu_telemetry BY NAME SELECT ?::INTEGER AS source_id, {columns} "
                          "FROM read_parquet(?)", [source_id, str(path)])
    except duckdb.Error as exc:
        raise InputError(f"{path}: unreadable telemetry ({first_line(exc)})") from None
    count = store.scalar("SELECT count(*) FROM gpu_telemetry WHERE source_id = ?", [source_id])
    tool = "tracedoc health --watch"
    if driver := metadata.get(b"driver_version"):
        tool += f" (NVIDIA driver {driver.decode('utf-8', 'replace')[:32]})"
    return LoadResult(rank=None, world_size=None, event_count=count, tool=tool)
