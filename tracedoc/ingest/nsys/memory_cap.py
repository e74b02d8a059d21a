"""The memory cap of a run whose inputs hold a large Nsight Systems export: a module of its own, without pyarrow,
because every run asks (tracedoc.pipeline.open_store) and most read no export."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from tracedoc.ingest.nsys import is_sqlite
from tracedoc.limits import Limits
from tracedoc.store.memory import MEMORY_PER_THREAD_BYTES
from tracedoc.store.store import cores

if TYPE_CHECKING:
    from tracedoc.ingest import InputFile

# Exports from this size on are read under a memory cap fitted to them when the run sets none (fitted_limits):
# MEMORY_PER_EXPORT_BYTE bytes of DuckDB memory per byte of the exports read, FITTED_MEMORY_FLOOR_BYTES at least.
# The process holds about 135 MiB beside DuckDB's memory with ADBC (DuckDB's library, Python, tracedoc's modules),
# and DuckDB reaches its cap in both the ingest and the analyses: the peak is the cap plus that. Once per byte keeps
# a 199 MB export at 1.7x the file on 2 cores; twice per byte took it to about three times.
FITTED_MEMORY_FROM_BYTES = 64 << 20
MEMORY_PER_EXPORT_BYTE = 1
FITTED_MEMORY_FLOOR_BYTES = 192 << 20


def fitted_limits(limits: Limits, inputs: Iterable[InputFile]) -> Limits:
    """The run's limits with DuckDB's memory capped at MEMORY_PER_EXPORT_BYTE times the size of the Nsight Systems
    exports among its inputs read as they are on disk (export_bytes), FITTED_MEMORY_FLOOR_BYTES and
    store.memory.MEMORY_PER_THREAD_BYTES for each core the process may run on (DuckDB's threads) at least, when
    they come to FITTED_MEMORY_FROM_BYTES or more and the run set no cap; beyond it the store and its analyses
    spill. Without a cap DuckDB takes up to 80 % of the machine's memory and an export's analyses grow into it (a
    199 MB export peaked at 6.4 GB); under the cap they spill instead, for the same report (327 MiB on 2 cores;
    twice the export's size took it to 600 MiB, for 0.9x the CPU time). Given when the store is made or opened, so
    that a cached store is analysed under it too."""
    exports = export_bytes(inputs)
    if limits.memory_bytes is not None or not exports or exports < FITTED_MEMORY_FROM_BYTES:
        return limits
    return replace(limits, memory_bytes=max(FITTED_MEMORY_FLOOR_BYTES, MEMORY_PER_THREAD_BYTES * cores(),
                                            MEMORY_PER_EXPORT_BYTE * exports))


def export_bytes(inputs: Iterable[InputFile]) -> int:
    """The bytes of the inputs that are SQLite exports read as they are. A compressed export or an .nsys-rep is
    left out: the export read from it is larger than the file, by an amount known only once it is unpacked or
    exported, and a cap fitted to the file would be too tight for it, so those are read without a fitted cap."""
    return sum(i.size_bytes for i in inputs if i.format == "nsys" and i.compression is None and is_sqlite(i.file))
