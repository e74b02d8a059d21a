"""Allocator snapshots that are hostile by their numbers or their structure: a real sample's snapshot with one
value changed, and pickles of plain data written opcode by opcode (no Python object per record is made here, so a
file of millions of records is built in a moment)."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from typing import Any

from tests.conftest import SAMPLES

SOURCE = SAMPLES / "memory-oom" / "snapshot.pickle.gz"
_BATCH = 1000  # records per APPENDS, as pickle writes lists


def sample_snapshot() -> dict[str, Any]:
    """samples/memory-oom's snapshot, unpickled (a file of this repository: plain data)."""
    return pickle.loads(gzip.decompress(SOURCE.read_bytes()))


def edited_snapshot(path: Path, edit: Any) -> Path:
    """samples/memory-oom's snapshot with ``edit(snapshot)`` applied, pickled again."""
    snapshot = sample_snapshot()
    edit(snapshot)
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return path


def _text(value: str) -> bytes:
    raw = value.encode()
    return b"\x8c" + bytes([len(raw)]) + raw  # SHORT_BINUNICODE


def _list_of(count: int, record: bytes) -> bytes:
    """EMPTY_LIST, then ``count`` copies of ``record`` appended a batch at a time."""
    full, rest = divmod(count, _BATCH)
    batches = (b"(" + record * _BATCH + b"e") * full + (b"(" + record * rest + b"e" if rest else b"")
    return b"]" + batches


def plain_dicts_snapshot(path: Path, count: int, where: str) -> Path:
    """A snapshot pickle of an empty segment list and ``count`` empty dicts: device 0's whole history
    (``where="history"``) or the list of a top-level key tracedoc does not read (``where`` names it)."""
    empty = b"}"  # EMPTY_DICT
    if where == "history":
        traces = b"](" + _list_of(count, empty) + b"e"  # device_traces: [[{}, {}, ...]]
        items = _text("segments") + b"]" + _text("device_traces") + traces
    else:
        items = _text("segments") + b"]" + _text("device_traces") + b"]" + _text(where) + _list_of(count, empty)
    path.write_bytes(b"\x80\x04}(" + items + b"u.")
    return path
