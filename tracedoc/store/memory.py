"""The memory cap: how much DuckDB may hold for a store and its analyses before it spills to disk (store.connect
sets both on every connection, from the store's ``Limits``).

The cap comes with the run (``tracedoc.limits.Limits.memory_bytes``: `--memory-limit`, $TRACEDOC_MEMORY_LIMIT).
Beyond it, DuckDB spills to a directory of this process's own under the system's temporary directory (slower, but
the peak memory stays near the cap). None: DuckDB's default, 80 % of the machine's memory, unless a large Nsight
Systems export is among the inputs (tracedoc.ingest.nsys.memory_cap.fitted_limits).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from tracedoc.limits import MEMORY_LIMIT_ENV_VAR

__all__ = ["MEMORY_LIMIT_ENV_VAR", "MEMORY_PER_THREAD_BYTES", "out_of_memory_advice", "spill_directory",
           "threads_under_cap"]

# Each of DuckDB's threads holds buffers of its own, so a cap needs memory for each: on 16 threads the 205 MB
# PyTorch trace ran out of memory under 80 MiB (5 MiB a thread) and was analysed on 8 (10 MiB a thread); the 199 MB
# Nsight Systems export ran out under 192 MiB on 16 threads (12 MiB a thread), on 32 under 448 MiB (14 MiB), and on
# 8 under 192 MiB once in two runs (24 MiB). A cap gets one thread per MEMORY_PER_THREAD_BYTES (one at least), and
# the cap fitted to a large export gives every core as much (tracedoc.ingest.nsys.memory_cap).
MEMORY_PER_THREAD_BYTES = 32 << 20

_spill_dir: Path | None = None


def threads_under_cap(limit: int | None, available: int) -> int:
    """DuckDB's threads for a connection under the memory cap ``limit`` (bytes; None: no cap) on ``available``
    cores: every core, but no more than one per MEMORY_PER_THREAD_BYTES of the cap (one at least)."""
    if limit is None:
        return available
    return max(1, min(available, limit // MEMORY_PER_THREAD_BYTES))


def out_of_memory_advice(limit: int | None) -> str:
    """What to say after DuckDB ran out of memory under the cap ``limit`` (bytes): raise it when one is set."""
    if limit is None:
        return ""
    cap = f"{limit / (1 << 20):,.0f} MiB"
    return f"; the memory cap is {cap}: a larger --memory-limit ({MEMORY_LIMIT_ENV_VAR}) may help"


def spill_directory() -> Path:
    """This process's directory for what DuckDB spills beyond the cap (made once, removed when the process ends);
    its own, since processes spilling into one directory would take each other's files."""
    global _spill_dir
    if _spill_dir is None:
        _spill_dir = Path(tempfile.mkdtemp(prefix="tracedoc-spill-"))
        atexit.register(shutil.rmtree, _spill_dir, ignore_errors=True)
    return _spill_dir
