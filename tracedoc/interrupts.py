"""Ctrl-C, remembered for the rest of a command: a KeyboardInterrupt that a library caught and turned into an error
of its own (DuckDB, reading Arrow batches from a Python generator when Ctrl-C came, says only 'Unknown error') is
still an interrupt to the command line, exit 130, not bad input. Standard library only: the console installs the
handler before anything else."""

from __future__ import annotations

from types import FrameType

_seen = False


def handler(signum: int, frame: FrameType | None) -> None:
    """SIGINT's handler while a command runs: Python's own (raise KeyboardInterrupt), remembering that it came."""
    global _seen
    _seen = True
    raise KeyboardInterrupt


def seen() -> bool:
    """True once Ctrl-C came during this command."""
    return _seen
