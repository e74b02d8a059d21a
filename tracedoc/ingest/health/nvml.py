"""NVML recordings (``tracedoc health --record``) beside traces: a health snapshot of the GPUs they ran on.

The recording is replayed through the same reader ``tracedoc health`` uses on a live GPU, and the snapshot goes
into gpu_health and gpu_health_nvlink, so ``tracedoc analyze`` judges ECC, clocks, PCIe and NVLink of the
machine the traces came from. A snapshot covers a host, not a rank: the source holds no rank.
"""

from __future__ import annotations

from pathlib import Path

from tracedoc.errors import InputError
from tracedoc.health.nvml import NoGpuError, Snapshot, read_snapshot
from tracedoc.health.replay import Replay, is_recording
from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.store import Store

FORMAT = "nvml"


def sniff(path: Path, head: bytes) -> bool:
    """True for a JSON document that opens with the NVML recording's format tag."""
    return is_recording(head)


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Replay one recording into the health tables under ``source_id``."""
    return _replayed(store, source_id, Replay.load(path), path)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """The same of a compressed recording, read whole from its stream (at most the format's 32 MiB)."""
    return _replayed(store, source_id, Replay.parse(b"".join(stream.chunks()), name), name)


def _replayed(store: Store, source_id: int, replay: Replay, path: Path) -> LoadResult:
    """The snapshot a recording replays, written under ``source_id``."""
    try:
        snapshot = read_snapshot(replay, taken_ns=replay.recorded_ns)
    except NoGpuError as exc:
        raise InputError(f"{path}: recorded on a machine NVML could not use ({exc})") from None
    insert_snapshot(store, source_id, snapshot)
    return LoadResult(rank=None, world_size=None, event_count=len(snapshot.gpus), tool=snapshot_tool(snapshot))


def snapshot_tool(snapshot: Snapshot) -> str:
    """How a snapshot names what wrote it, for the sources table."""
    return f"NVML (NVIDIA driver {snapshot.driver_version or 'unknown'})"


def insert_snapshot(store: Store, source_id: int, snapshot: Snapshot) -> None:
    """Write a snapshot's rows into gpu_health and gpu_health_nvlink."""
    for table, rows in (("gpu_health", snapshot.gpus), ("gpu_health_nvlink", snapshot.nvlinks)):
        columns = [r[0] for r in store.con.execute(f"DESCRIBE {table}").fetchall() if r[0] != "source_id"]
        if rows:
            store.con.executemany(
                f"INSERT INTO {table} (source_id, {', '.join(columns)}) VALUES (?{', ?' * len(columns)})",
                [[source_id, *(row.get(c) for c in columns)] for row in rows])
