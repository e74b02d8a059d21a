"""The memory cap of a run whose inputs hold a large Nsight Systems export: a module of its own, without pyarrow,
because every run asks (tracedoc.pipeline.open_store) and most read no export."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from tracedoc.limits import Limits

# Exports from this size on are read under a memory cap fitted to them when the run sets none (fitted_limits):
# MEMORY_PER_EXPORT_BYTE bytes of DuckDB memory per byte of the exports read, FITTED_MEMORY_FLOOR_BYTES at least.
FITTED_MEMORY_FROM_BYTES = 64 << 20
MEMORY_PER_EXPORT_BYTE = 2
FITTED_MEMORY_FLOOR_BYTES = 256 << 20


def fitted_limits(limits: Limits, inputs: Iterable[tuple[str, int]]) -> Limits:
    """The run's limits with DuckDB's memory capped at MEMORY_PER_EXPORT_BYTE times the size of the Nsight Systems
    exports among its inputs (``inputs``: each one's format and bytes), FITTED_MEMORY_FLOOR_BYTES at least, when
    they come to FITTED_MEMORY_FROM_BYTES or more and the run set no cap; beyond it the store and its analyses
    spill. Without a cap DuckDB takes up to 80 % of the machine's memory and an export's analyses grow into it (a
    199 MB export peaked at 6.4 GB); under the cap they spill instead, for the same report (669 MiB, about 1.3x the
    CPU time). Given when the store is made or opened, so that a cached store is analysed under it too."""
    export_bytes = sum(size for fmt, size in inputs if fmt == "nsys")
    if limits.memory_bytes is not None or export_bytes < FITTED_MEMORY_FROM_BYTES:
        return limits
    return replace(limits, memory_bytes=max(FITTED_MEMORY_FLOOR_BYTES, MEMORY_PER_EXPORT_BYTE * export_bytes))
