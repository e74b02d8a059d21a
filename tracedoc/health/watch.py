"""Sample GPU telemetry into a Parquet file while a job runs, until interrupted or for a set duration.

Samples are buffered and written in row groups by a pyarrow ParquetWriter into a hidden temporary file beside the
target; when sampling stops (the duration, Ctrl-C or SIGTERM) the writer is closed and the file renamed into
place, so the named file is always complete and valid. The schema's metadata key ``tracedoc.telemetry`` marks the
file as tracedoc telemetry: that is what ``tracedoc analyze`` recognises next to traces. Timestamps are the wall
clock (ns since the Unix epoch), so samples can later be placed on a trace's timeline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracedoc.health.nvml import Backend, NvmlError, read_devices, read_sample

TELEMETRY_KEY = b"tracedoc.telemetry"
TELEMETRY_VERSION = b"1"

SCHEMA = pa.schema([
    ("ts_ns", pa.int64()), ("device", pa.int64()), ("uuid", pa.string()), ("pci_bus_id", pa.string()),
    ("sm_clock_mhz", pa.int64()), ("sm_clock_max_mhz", pa.int64()), ("mem_clock_mhz", pa.int64()),
    ("gpu_util_pct", pa.int64()), ("mem_util_pct", pa.int64()), ("memory_used_bytes", pa.int64()),
    ("power_w", pa.float64()), ("power_limit_w", pa.float64()), ("power_default_limit_w", pa.float64()),
    ("temperature_c", pa.int64()), ("clocks_event_reasons", pa.int64()), ("pstate", pa.int64()),
    ("pcie_gen", pa.int64()), ("pcie_gen_max", pa.int64()), ("pcie_width", pa.int64()),
    ("pcie_width_max", pa.int64()),
])


@dataclass
class WatchResult:
    """What a watch wrote."""

    path: Path
    samples: int
    devices: int
    seconds: float


class _Stop(Exception):
    """SIGTERM arrived: stop sampling and close the file."""


def watch(backend: Backend, out: Path, interval_s: float, duration_s: float | None = None,
          flush_every_s: float = 5.0, clock: Callable[[], int] = time.time_ns,
          stop: threading.Event | None = None) -> WatchResult:
    """Sample every GPU each ``interval_s`` into ``out`` until ``duration_s`` passed, the user interrupts or
    ``stop`` is set (how a thread sampling beside a job, as `tracedoc workload run` does, is ended)."""
    stop = stop or threading.Event()
    devices = read_devices(backend)
    metadata = {TELEMETRY_KEY: TELEMETRY_VERSION, b"interval_s": str(interval_s).encode(),
                b"hostname": socket.gethostname().encode()}
    driver = backend_value(backend, "nvmlSystemGetDriverVersion")
    if isinstance(driver, str):
        metadata[b"driver_version"] = driver.encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    buffer: list[dict[str, Any]] = []
    samples = 0
    began = time.monotonic()
    try:
        with pq.ParquetWriter(tmp, SCHEMA.with_metadata(metadata), compression="zstd") as writer, _sigterm_stops():
            last_flush = began
            next_tick = began
            with contextlib.suppress(KeyboardInterrupt, _Stop):
                while not stop.is_set() and (duration_s is None or time.monotonic() - began < duration_s):
                    buffer.extend(read_sample(backend, info, clock) for info in devices)
                    now = time.monotonic()
                    if now - last_flush >= flush_every_s:
                        samples += _flush(writer, buffer)
                        last_flush = now
                    next_tick = max(next_tick + interval_s, now)
                    stop.wait(max(0.0, next_tick - time.monotonic()))
            samples += _flush(writer, buffer)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return WatchResult(out, samples, len(devices), time.monotonic() - began)


def backend_value(backend: Backend, fn: str) -> Any:
    """One optional system-wide answer (None when NVML does not give it)."""
    try:
        return backend.call(fn)
    except NvmlError:
        return None


def _flush(writer: pq.ParquetWriter, buffer: list[dict[str, Any]]) -> int:
    """Write the buffered samples as one row group; returns how many."""
    if not buffer:
        return 0
    writer.write_table(pa.Table.from_pylist(buffer, schema=writer.schema))
    count = len(buffer)
    buffer.clear()
    return count


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """While sampling, SIGTERM (how job runners stop helpers) ends the watch like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise _Stop

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
