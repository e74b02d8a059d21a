"""What a trace file's name tells of where it came from: the rank it gives (``rank3``, ``rank_3``), and the worker
that wrote it where the PyTorch profiler's ``tensorboard_trace_handler`` named it
(``{worker}.{time_ns}.pt.trace.json[.gz]``, the worker being ``{host}_{pid}`` unless the handler was given one)."""

from __future__ import annotations

import re
from pathlib import Path

RANK_IN_NAME = re.compile(r"rank[_\-.]?([0-9]{1,9})(?![0-9])", re.IGNORECASE)
_HANDLER_NAME = re.compile(r"(.+)\.[0-9]{1,20}\.pt\.trace\.json(?:\.gz)?", re.IGNORECASE)


def rank_in_name(path: Path) -> int | None:
    """The rank a file's name gives, else None."""
    m = RANK_IN_NAME.search(path.name)
    return int(m.group(1)) if m else None


def worker_in_name(path: Path) -> str | None:
    """The worker ``tensorboard_trace_handler`` named the file by (``vm_476`` of
    ``vm_476.1796246817917751109.pt.trace.json.gz``), else None."""
    m = _HANDLER_NAME.fullmatch(path.name)
    return m.group(1) if m else None
