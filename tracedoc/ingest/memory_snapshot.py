"""PyTorch CUDA allocator snapshots (``torch.cuda.memory._dump_snapshot()``: the ``_snapshot()`` dict, pickled) into
memory_segments, memory_blocks and memory_actions (schema_memory.sql).

A snapshot holds the allocator's segments (each cut into blocks, live ones with the Python frames that allocated
them) and, when ``_record_memory_history`` was on, each device's recent history (``device_traces``: alloc,
free_requested, free_completed, segment_alloc, segment_free, oom, ... with a time in µs since the epoch, an
address, a size and frames). It is untrusted input: read by snapshot_pickle's opcode machine, which builds only
plain data (every opcode that would look up or call a class or function is refused; nothing in the file runs) and
hands over each record of the segment list and of each device's history as soon as it is complete, so the rows are
built and written as the file is read and the snapshot is never held whole. Every field is checked against the
shape torch writes; a missing or malformed field becomes NULL.

What a snapshot can make the reader do is bounded by limits, not by what it claims: the file is at most
``TRACEDOC_MAX_SNAPSHOT_BYTES`` (default 4 GiB; a 1 GB snapshot is read in under 1 GiB of memory), at most 32 marks
are open at once, and the reader turns at most ``TRACEDOC_MAX_SNAPSHOT_VALUES`` values into rows (by default one
per 8 bytes of the file, at least 2,000,000: each segment, block, history entry and the frames of each distinct
stack count, once per place that refers to them, before a batch's rows are built). Of each stack, 64 frames are looked
at and 8 kept. A snapshot belongs to no rank of its own (``per_host``, ingest/base.py): the memory analyses tie it
to the trace of the same run by time and address.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracedoc.errors import InputError
from tracedoc.ingest import snapshot_pickle
from tracedoc.ingest.base import LoadResult
from tracedoc.ingest.safe_pickle import PICKLE_MAGIC, Budget, check_nesting, env_limit
from tracedoc.store import Store

FORMAT = "memory_snapshot"
_BYTES_VAR, _DEFAULT_MAX_BYTES = "TRACEDOC_MAX_SNAPSHOT_BYTES", 4 << 30
_VALUES_VAR, _DEFAULT_MAX_VALUES = "TRACEDOC_MAX_SNAPSHOT_VALUES", 2_000_000
_BYTES_PER_VALUE = 8  # torch's snapshots hold one record per 80 to 100 bytes, and a frame per 20 or more
_FLUSH_ROWS = 200_000
_FRAMES_CACHED = 100_000
_MAX_DEPTH = 32
_FRAMES_SCANNED = 64
_FRAMES_KEPT = 8
_MAX_TEXT = 300
_INT64 = 1 << 63
# Frames of these files are the framework's, not the user's: a site is the innermost frame outside them.
_LIBRARY = re.compile(r"(^|/)(site-packages|dist-packages|torch|lib/python3\.\d+)/|^<")
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

_SEGMENTS = pa.schema([("source_id", pa.int32()), ("device", pa.int32()), ("address", pa.int64()),
                       ("total_size", pa.int64()), ("allocated_size", pa.int64()), ("active_size", pa.int64()),
                       ("stream", pa.int64()), ("segment_type", pa.string()), ("is_expandable", pa.bool_()),
                       ("blocks", pa.int32())])
_BLOCKS = pa.schema([("source_id", pa.int32()), ("device", pa.int32()), ("segment_address", pa.int64()),
                     ("address", pa.int64()), ("size", pa.int64()), ("requested_size", pa.int64()),
                     ("state", pa.string()), ("site", pa.string()), ("stack", pa.string())])
_ACTIONS = pa.schema([("source_id", pa.int32()), ("device", pa.int32()), ("seq", pa.int32()),
                      ("action", pa.string()), ("addr", pa.int64()), ("size", pa.int64()),
                      ("device_free", pa.int64()), ("stream", pa.int64()), ("time_ns", pa.int64()),
                      ("site", pa.string()), ("stack", pa.string())])


def sniff(path: Path, head: bytes) -> bool:
    """True for a pickle whose first keys are a snapshot's (``segments``, then segment fields or the history)."""
    return (PICKLE_MAGIC.match(head) is not None and b"segments" in head
            and (b"total_size" in head or b"device_traces" in head))


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one snapshot into the memory tables under ``source_id``, record by record (snapshot_pickle)."""
    limit = env_limit(_BYTES_VAR, _DEFAULT_MAX_BYTES)
    size = path.stat().st_size
    if size > limit:
        raise InputError(f"{path}: a {size:,}-byte allocator snapshot, over the limit of {limit:,} bytes (set "
                         f"{_BYTES_VAR} to read more)")
    with path.open("rb") as f:
        if not PICKLE_MAGIC.match(f.read(2)):
            raise InputError(f"{path}: not an allocator snapshot (not a pickle)")
    budget = Budget(path, env_limit(_VALUES_VAR, max(_DEFAULT_MAX_VALUES, size // _BYTES_PER_VALUE)), _VALUES_VAR,
                    "the allocator snapshot", "a record referred to from many places counts each time")
    rows = _Rows(store, source_id, budget, path)
    snapshot = snapshot_pickle.read(path, rows.take, "allocator snapshot", _MAX_DEPTH)
    check_nesting(snapshot, path, _MAX_DEPTH, "an allocator snapshot")
    segments, traces = snapshot.get("segments"), snapshot.get("device_traces")
    if isinstance(segments, list):  # not streamed (not where torch puts it): read now
        rows.take(snapshot_pickle.Sink("segments", 0), segments)
    elif not isinstance(segments, snapshot_pickle.Sink):
        raise InputError(f"{path}: not an allocator snapshot (no list of segments at the top level)")
    if traces is not None:
        if not isinstance(traces, list):
            raise InputError(f"{path}: malformed allocator snapshot ('device_traces' is not a list per device)")
        for device, entries in enumerate(traces):
            if isinstance(entries, list):
                rows.take(snapshot_pickle.Sink("trace", device), entries)
    rows.flush()
    history = "with its allocator history" if rows.actions else \
        "no allocator history (_record_memory_history was off)"
    return LoadResult(rank=None, world_size=None, event_count=rows.blocks + rows.actions,
                      tool=f"torch.cuda.memory snapshot, {rows.segments} segments, {history}")


class _Rows:
    """Rows of memory_segments, memory_blocks and memory_actions built from each batch of records as the reader
    hands them over, written to the store every _FLUSH_ROWS rows."""

    def __init__(self, store: Store, source_id: int, budget: Budget, path: Path) -> None:
        self.store, self.source_id, self.budget, self.path = store, source_id, budget, path
        self.out: dict[str, list[dict]] = {"memory_segments": [], "memory_blocks": [], "memory_actions": []}
        self.segments = self.blocks = self.actions = 0
        self.frames: dict[int, tuple[Any, str | None, str | None]] = {}

    def take(self, sink: snapshot_pickle.Sink, items: list) -> None:
        if sink.kind == "segments":
            self._segments(items)
        else:
            self._actions(sink.device, sink.count - len(items), items)
        if sum(len(rows) for rows in self.out.values()) >= _FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        for table, schema in (("memory_segments", _SEGMENTS), ("memory_blocks", _BLOCKS),
                              ("memory_actions", _ACTIONS)):
            rows = self.out[table]
            if rows:
                self.store.con.register("_memory_rows_in", pa.Table.from_pylist(rows, schema=schema))
                try:
                    self.store.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _memory_rows_in")
                finally:
                    self.store.con.unregister("_memory_rows_in")
                rows.clear()

    def site(self, frames: Any) -> tuple[str | None, str | None]:
        """_frames of a stack, once per stack object (torch's snapshots share each distinct stack)."""
        hit = self.frames.get(id(frames))
        if hit is not None and hit[0] is frames:
            return hit[1], hit[2]
        site, stack = _frames(frames, self.budget)
        if len(self.frames) >= _FRAMES_CACHED:
            self.frames.clear()
        self.frames[id(frames)] = (frames, site, stack)  # kept alive with it: its id is not reused
        return site, stack

    def _segments(self, segments: list) -> None:
        self.budget.spend(sum(1 + len(s["blocks"]) if isinstance(s, dict) and isinstance(s.get("blocks"), list)
                              else 1 for s in segments))  # before any row is built
        seg_rows, block_rows = self.out["memory_segments"], self.out["memory_blocks"]
        source_id = self.source_id
        for seg in segments:
            if not isinstance(seg, dict):
                continue
            device, address = _int(seg.get("device")), _int(seg.get("address"))
            blocks = seg.get("blocks") if isinstance(seg.get("blocks"), list) else []
            self.segments += 1
            seg_rows.append({"source_id": source_id, "device": device, "address": address,
                             "total_size": _int(seg.get("total_size")),
                             "allocated_size": _int(seg.get("allocated_size")),
                             "active_size": _int(seg.get("active_size")), "stream": _int(seg.get("stream")),
                             "segment_type": _text(seg.get("segment_type")),
                             "is_expandable": seg.get("is_expandable") if isinstance(seg.get("is_expandable"), bool)
                             else None, "blocks": len(blocks)})
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                site, stack = self.site(block.get("frames"))
                self.blocks += 1
                block_rows.append({"source_id": source_id, "device": device, "segment_address": address,
                                   "address": _int(block.get("address")), "size": _int(block.get("size")),
                                   "requested_size": _int(block.get("requested_size")),
                                   "state": _text(block.get("state")), "site": site, "stack": stack})

    def _actions(self, device: int, first_seq: int, entries: list) -> None:
        self.budget.spend(len(entries))  # before any row is built
        rows = self.out["memory_actions"]
        source_id = self.source_id
        for seq, entry in enumerate(entries, first_seq):
            if type(entry) is not dict:
                continue
            time_us = _int(entry.get("time_us"))
            site, stack = self.site(entry.get("frames"))
            self.actions += 1
            rows.append({"source_id": source_id, "device": device, "seq": seq, "action": _text(entry.get("action")),
                         "addr": _int(entry.get("addr")), "size": _int(entry.get("size")),
                         "device_free": _int(entry.get("device_free")), "stream": _int(entry.get("stream")),
                         "time_ns": time_us * 1000 if time_us is not None and abs(time_us) < _INT64 // 1000
                         else None, "site": site, "stack": stack})


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64:
        return value
    return None


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return _CONTROLS.sub("", value[:_MAX_TEXT])


def _frames(frames: Any, budget: Budget) -> tuple[str | None, str | None]:
    """The allocation site (innermost frame outside the framework, else the innermost frame) and the stack."""
    if not isinstance(frames, list | tuple) or not frames:
        return None, None
    looked = frames[:_FRAMES_SCANNED]
    budget.spend(len(looked))
    named = []
    for f in looked:
        if not isinstance(f, dict):
            continue
        filename, line, name = _text(f.get("filename")) or "?", _int(f.get("line")), _text(f.get("name")) or "?"
        named.append((filename, f"{_short(filename)}:{line if line is not None else '?'} ({name})"))
    if not named:
        return None, None
    site = next((text for filename, text in named if not _LIBRARY.search(filename)), named[0][1])
    return site, " ← ".join(text for _, text in named[:_FRAMES_KEPT])


def _short(filename: str) -> str:
    """The file's last two path components: enough to find it, and no home directories in reports."""
    return "/".join(filename.replace("\\", "/").split("/")[-2:])
