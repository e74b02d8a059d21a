"""The memory cap: how much DuckDB may hold for a store and its analyses before it spills to disk (store._connect
sets both on every connection).

`tracedoc analyze --memory-limit` sets $TRACEDOC_MEMORY_LIMIT, so that local worker processes inherit it. Beyond the
cap, DuckDB spills to a directory of this process's own under the system's temporary directory (slower, but the
peak memory stays near the cap). Unset: DuckDB's default, 80 % of the machine's memory.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from tracedoc.units import parse_size

MEMORY_LIMIT_ENV_VAR = "TRACEDOC_MEMORY_LIMIT"
_spill_dir: Path | None = None


def memory_limit() -> int | None:
    """The cap in bytes that $TRACEDOC_MEMORY_LIMIT sets (e.g. 2G), or None."""
    text = os.environ.get(MEMORY_LIMIT_ENV_VAR, "").strip()
    return parse_size(text, MEMORY_LIMIT_ENV_VAR) if text else None


def out_of_memory_advice() -> str:
    """What to say after DuckDB ran out of memory: raise the cap when one is set."""
    limit = memory_limit()
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
