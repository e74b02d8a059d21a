"""PyTorch CUDA allocator snapshots (``torch.cuda.memory._dump_snapshot()``: the ``_snapshot()`` dict, pickled) into
memory_segments, memory_blocks, memory_actions and memory_annotations (schema_memory.sql).

A snapshot holds the allocator's segments (each cut into blocks, live ones with the Python frames that allocated
them) and, when ``_record_memory_history`` was on, each device's recent history (``device_traces``: alloc,
free_requested, free_completed, segment_alloc, segment_free, oom, ... with a time in µs since the epoch, an address,
a size and frames) with the annotations opened and closed meanwhile (``external_annotations``: the
``record_function`` ranges, ``ProfilerStep#N`` among them). It is untrusted input: read by snapshot_pickle's opcode
machine, which builds only plain data (every opcode that would look up or call a class or function is refused;
nothing in the file runs) and hands over each record of the segment list and of each device's history as soon as it
is complete, so the rows are built and written as the file is read and the snapshot is never held whole. Most of a
history comes as runs of records read in bulk (snapshot_bulk's ``Records``), whose rows are built a column at a
time; the rows go to DuckDB as Arrow columns (strings as dictionaries: a stack is hundreds of bytes, shared by
thousands of rows). Every field is checked against the shape torch writes; a missing or malformed field becomes
NULL, and a device id out of range is bad input.

What a snapshot can make the reader do is bounded by limits, not by what it claims (and by its structure: a list of
segments or of a device's history whose first 1,000 records have none of torch's fields is refused): the file is at
most ``TRACEDOC_MAX_SNAPSHOT_BYTES`` (default 4 GiB; a 1 GB snapshot is read in under 1 GiB of memory), at most 32
marks are open at once, and the reader turns at most ``TRACEDOC_MAX_SNAPSHOT_VALUES`` values into rows (by default
one per 8 bytes of the file, at least 2,000,000: each segment, block, history entry, item of another top-level list
and the frames of each distinct stack count, once per place that refers to them, before a batch's rows are built).
A gzip or xz snapshot is read as it unpacks (``load_stream``), never written to disk: those limits count its bytes
as they come.
Of each stack, 256 frames are looked at (a stack recorded with C++ frames, torch's default, has dozens before the
first Python frame) and 8 kept. A snapshot belongs to no rank of its own (``per_host``, tracedoc/formats.py): the memory
analyses tie it to the trace of the same run by time and address.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from itertools import repeat
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracedoc.errors import InputError
from tracedoc.ingest import arrow_values
from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.ingest.memory import snapshot_pickle
from tracedoc.ingest.memory.snapshot_bulk import Records
from tracedoc.ingest.safe_pickle import PICKLE_MAGIC, Budget, check_nesting, env_limit
from tracedoc.store import Store
from tracedoc.store.engine import scanning

FORMAT = "memory_snapshot"
_BYTES_VAR, _DEFAULT_MAX_BYTES = "TRACEDOC_MAX_SNAPSHOT_BYTES", 4 << 30
_VALUES_VAR, _DEFAULT_MAX_VALUES = "TRACEDOC_MAX_SNAPSHOT_VALUES", 2_000_000
_BYTES_PER_VALUE = 8  # torch's snapshots hold one record per 80 to 100 bytes, and a frame per 20 or more
_FLUSH_ROWS = 500_000
_FRAMES_CACHED = 100_000
_MAX_DEPTH = 32
_FRAMES_SCANNED = 256
_FRAMES_KEPT = 8
_MAX_TEXT = 300
_INT64 = 1 << 63
_SHAPE_WITHIN = 1000  # records of a list read before one of torch's shape must have come
_MAX_DEVICE = 1 << 31  # device ids are written as 32-bit integers
# Frames of these files are the framework's, not the user's: a site is the innermost frame outside them.
_LIBRARY = re.compile(r"(^|/)(site-packages|dist-packages|torch|lib/python3\.\d+)/|^<")
# A Python source file: every other frame of a stack recorded with C++ frames (torch's default, stacks="all") is
# the unwinder's (torch::unwind::unwind, CapturedTraceback::gather), CPython's (PyEval_*, _start), the framework's
# C++ (c10::, at::, torch::, .cpp/.h/.cc sources) or an address without a symbol ('??'): never where a fix goes.
_PYTHON_FILE = re.compile(r"\.py$")
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

# The columns written from Python; the source's id is added by the INSERT and time_ns made from time_us there.
_SEGMENTS = pa.schema([("device", pa.int32()), ("address", pa.int64()), ("total_size", pa.int64()),
                       ("allocated_size", pa.int64()), ("active_size", pa.int64()), ("stream", pa.int64()),
                       ("segment_type", pa.string()), ("is_expandable", pa.bool_()), ("blocks", pa.int32())])
_BLOCKS = pa.schema([("device", pa.int32()), ("segment_address", pa.int64()), ("address", pa.int64()),
                     ("size", pa.int64()), ("requested_size", pa.int64()), ("state", pa.string()),
                     ("site", pa.string()), ("stack", pa.string())])
_ACTIONS = pa.schema([("device", pa.int32()), ("seq", pa.int32()), ("action", pa.string()), ("addr", pa.int64()),
                      ("size", pa.int64()), ("device_free", pa.int64()), ("stream", pa.int64()),
                      ("time_us", pa.int64()), ("site", pa.string()), ("stack", pa.string())])
_TIME_NS = f"CASE WHEN time_us > -{_INT64 // 1000} AND time_us < {_INT64 // 1000} THEN time_us * 1000 END"
_ACTION_INTS = ("addr", "size", "device_free", "stream", "time_us")
_ANNOTATIONS = pa.schema([("device", pa.int32()), ("stage", pa.string()), ("name", pa.string()),
                          ("time_us", pa.int64())])


def sniff(path: Path, head: bytes) -> bool:
    """True for a pickle whose first keys are a snapshot's (``segments``, then segment fields or the history)."""
    return (PICKLE_MAGIC.match(head) is not None and b"segments" in head
            and (b"total_size" in head or b"device_traces" in head))


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one snapshot into the memory tables under ``source_id``, record by record (snapshot_pickle)."""
    return _load_file(store, source_id, path, path)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """Read a compressed snapshot as it unpacks (snapshot_pickle.read_stream), never whole on disk or in memory:
    the size limit counts the unpacked bytes, and the values budget grows with them as it would with the file's
    size. A pickle without frames (protocol 2 or 3, which torch no longer writes) is unpacked to a file first."""
    start = stream.head(3)
    if not PICKLE_MAGIC.match(start):
        raise InputError(f"{name}: not an allocator snapshot (not a pickle)")
    if start[2:3] != snapshot_pickle.FRAME:
        copy = workdir / "unpacked-snapshot.pickle"
        try:
            stream.save(copy)
            return _load_file(store, source_id, copy, name)
        finally:
            copy.unlink(missing_ok=True)
    limit = env_limit(_BYTES_VAR, _DEFAULT_MAX_BYTES)
    given = env_limit(_VALUES_VAR, 0)  # 0: not given, the budget grows with the bytes
    budget = _budget(name, given or _DEFAULT_MAX_VALUES)

    def counted(chunks: Iterator[bytes]) -> Iterator[bytes]:
        unpacked = 0
        for chunk in chunks:
            unpacked += len(chunk)
            if unpacked > limit:
                raise InputError(f"{name}: unpacks to more than {limit:,} bytes, over the limit for an allocator "
                                 f"snapshot (set {_BYTES_VAR} to read more)")
            if not given:
                budget.grow_to(unpacked // _BYTES_PER_VALUE)
            yield chunk

    with closing(_Rows(store, source_id, budget, name)) as rows:
        return _rows_of(rows, snapshot_pickle.read_stream(counted(stream.chunks()), name, rows.take,
                                                           "allocator snapshot", _MAX_DEPTH), name)


def _budget(name: Path, limit: int) -> Budget:
    """The values a snapshot may make the reader build."""
    return Budget(name, limit, _VALUES_VAR, "the allocator snapshot",
                  "a record referred to from many places counts each time")


def _load_file(store: Store, source_id: int, path: Path, name: Path) -> LoadResult:
    """Read the snapshot at ``path`` (mapped, snapshot_pickle.read), errors naming it as ``name``."""
    limit = env_limit(_BYTES_VAR, _DEFAULT_MAX_BYTES)
    size = path.stat().st_size
    if size > limit:
        raise InputError(f"{name}: a {size:,}-byte allocator snapshot, over the limit of {limit:,} bytes (set "
                         f"{_BYTES_VAR} to read more)")
    with path.open("rb") as f:
        if not PICKLE_MAGIC.match(f.read(2)):
            raise InputError(f"{name}: not an allocator snapshot (not a pickle)")
    budget = _budget(name, env_limit(_VALUES_VAR, max(_DEFAULT_MAX_VALUES, size // _BYTES_PER_VALUE)))
    with closing(_Rows(store, source_id, budget, name)) as rows:
        return _rows_of(rows, snapshot_pickle.read(path, rows.take, "allocator snapshot", _MAX_DEPTH, name), name)


def _rows_of(rows: _Rows, snapshot: dict, path: Path) -> LoadResult:
    """The rows of what the reader handed over and of the rest of the snapshot (its small top-level dict), written;
    what the file held."""
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
    annotations = snapshot.get("external_annotations")
    if isinstance(annotations, list):
        rows.annotations(annotations)
    rows.flush()
    history = "with its allocator history" if rows.actions else \
        "no allocator history (_record_memory_history was off)"
    return LoadResult(rank=None, world_size=None, event_count=rows.blocks + rows.actions,
                      tool=f"torch.cuda.memory snapshot, {rows.segments} segments, {history}")


class _Columns:
    """One table's rows, held as a list per column until they are written together."""

    def __init__(self, table: str, schema: pa.Schema, select: str = "*") -> None:
        self.table, self.schema, self.select = table, schema, select
        self.values: dict[str, list] = {name: [] for name in schema.names}

    def __len__(self) -> int:
        return len(self.values[self.schema.names[0]])

    def write(self, store: Store, source_id: int) -> None:
        if not len(self):
            return
        arrays = [_strings(self.values[field.name]) if field.type == pa.string()
                  else arrow_values.array(self.values[field.name], field.type) for field in self.schema]
        with scanning(store.con, "_memory_rows_in", pa.Table.from_arrays(arrays, names=self.schema.names)):
            store.con.execute(f"INSERT INTO {self.table} BY NAME SELECT {self.select}, {source_id:d} AS source_id "
                              "FROM _memory_rows_in")
        for column in self.values.values():
            column.clear()


class _Rows:
    """Rows of memory_segments, memory_blocks and memory_actions built from each batch of records as the reader
    hands them over (a run of records read in bulk, ``Records``, column by column), written to the store every
    _FLUSH_ROWS rows; a store in memory is compressed then, so that it holds at most that many rows uncompressed, on
    a helper thread while the next records are read (Store.compress_aside: the checkpoint runs on one thread, and
    so does the reader)."""

    def __init__(self, store: Store, source_id: int, budget: Budget, path: Path) -> None:
        self.store, self.source_id, self.budget, self.path = store, source_id, budget, path
        self.tables = (_Columns("memory_segments", _SEGMENTS), _Columns("memory_blocks", _BLOCKS),
                       _Columns("memory_actions", _ACTIONS, f"* EXCLUDE (time_us), {_TIME_NS} AS time_ns"),
                       _Columns("memory_annotations", _ANNOTATIONS, f"* EXCLUDE (time_us), {_TIME_NS} AS time_ns"))
        self.segments = self.blocks = self.actions = 0
        self.frames: dict[int, tuple[Any, str | None, str | None]] = {}
        self.sites: dict[int, str | None] = {}  # the same by id alone, to look up a column at once
        self.texts: dict[tuple[int, ...], tuple[Any, str | None, str | None]] = {}
        self.stacks: dict[int, str | None] = {}
        self.shaped: set[snapshot_pickle.Sink] = set()  # the sinks that have had a record of torch's shape
        self._compressing = store.compress_aside()

    def take(self, sink: snapshot_pickle.Sink, items: list) -> None:
        if sink.kind == snapshot_pickle.UNREAD:  # a list no row is made of: counted, then dropped
            self.budget.spend(sum(item.count if type(item) is Records else 1 for item in items))
            return
        if sink.kind == snapshot_pickle.ANNOTATIONS:  # the record_function ranges (ProfilerStep#N among them)
            self.annotations(items)
            return
        if sink not in self.shaped:
            self._check_shape(sink, items)
        if sink.kind == "segments":
            self._segments([d for item in items for d in (item.dicts() if type(item) is Records else (item,))])
        else:
            self._actions(sink.device, sink.count, items)
        if sum(map(len, self.tables)) >= _FLUSH_ROWS:
            self.flush()
            self._compressing.start()  # 12.6 M history rows held uncompressed took 3.2 GB, under 0.8 GB so

    def _check_shape(self, sink: snapshot_pickle.Sink, items: list) -> None:
        """Refuse a list of segments or of a device's history none of whose first _SHAPE_WITHIN records has the
        field torch always writes (a segment's total_size, an entry's action): millions of empty or foreign dicts
        are not a snapshot, and would otherwise be read to the end before there is nothing to analyse."""
        key = "total_size" if sink.kind == "segments" else "action"
        if any(type(item) is Records and item.column(key) is not None
               or type(item) is dict and key in item for item in items):
            self.shaped.add(sink)
        elif sink.count + len(items) >= _SHAPE_WITHIN:
            what = "segments" if sink.kind == "segments" else f"history entries of device {sink.device}"
            raise InputError(f"{self.path}: not an allocator snapshot (none of its first {sink.count + len(items):,} "
                             f"{what} has a {key})")

    def flush(self) -> None:
        """Write the rows held, once the store's rows written before are compressed."""
        self._compressing.wait()
        for table in self.tables:
            table.write(self.store, self.source_id)

    def close(self) -> None:
        """Wait for a compression still running, its error dropped (the read failed, or Ctrl-C)."""
        self._compressing.close()

    def site(self, frames: Any) -> tuple[str | None, str | None]:
        """_frames of a stack, once per stack object (an allocation's stack is shared by its block's events), and
        its words once per sequence of frame objects (torch shares each frame among the stacks)."""
        hit = self.frames.get(id(frames))
        if hit is not None and hit[0] is frames:
            return hit[1], hit[2]
        site = stack = None
        if isinstance(frames, list | tuple) and frames:
            looked = frames[:_FRAMES_SCANNED]
            self.budget.spend(len(looked))
            key = tuple(map(id, looked))
            known = self.texts.get(key)
            if known is None:
                if len(self.texts) >= _FRAMES_CACHED:
                    self.texts.clear()
                known = self.texts[key] = (looked, *_frames(looked))  # the frames kept alive: ids not reused
            site, stack = known[1], known[2]
        if len(self.frames) >= _FRAMES_CACHED:
            self.frames.clear()
            self.sites.clear()
            self.stacks.clear()
        self.frames[id(frames)] = (frames, site, stack)  # kept alive with it: its id is not reused
        self.sites[id(frames)], self.stacks[id(frames)] = site, stack
        return site, stack

    def annotations(self, entries: list) -> None:
        """The snapshot's annotations (each a dict: stage, name, device, time_us)."""
        self.budget.spend(len(entries))
        out = self.tables[3].values
        for a in entries:
            if type(a) is dict:
                device = _int(a.get("device"))
                _append(out, device=device if device is not None and 0 <= device < 1 << 31 else None,
                        stage=_text(a.get("stage")), name=_text(a.get("name")), time_us=_int(a.get("time_us")))

    def _segments(self, segments: list) -> None:
        self.budget.spend(sum(1 + len(s["blocks"]) if isinstance(s, dict) and isinstance(s.get("blocks"), list)
                              else 1 for s in segments))  # before any row is built
        seg, block = self.tables[0].values, self.tables[1].values
        for s in segments:
            if not isinstance(s, dict):
                continue
            device, address = self._device(s.get("device")), _int(s.get("address"))
            listed = s.get("blocks")
            blocks = listed if isinstance(listed, list) else []
            self.segments += 1
            _append(seg, device=device, address=address, total_size=_int(s.get("total_size")),
                    allocated_size=_int(s.get("allocated_size")), active_size=_int(s.get("active_size")),
                    stream=_int(s.get("stream")), segment_type=_text(s.get("segment_type")),
                    is_expandable=s.get("is_expandable") if isinstance(s.get("is_expandable"), bool) else None,
                    blocks=len(blocks))
            for b in blocks:
                if not isinstance(b, dict):
                    continue
                site, stack = self.site(b.get("frames"))
                self.blocks += 1
                _append(block, device=device, segment_address=address, address=_int(b.get("address")),
                        size=_int(b.get("size")), requested_size=_int(b.get("requested_size")),
                        state=_text(b.get("state")), site=site, stack=stack)

    def _device(self, value: Any) -> int | None:
        """A segment's device id (NULL when missing); one that no device has (the column is 32-bit) is bad input."""
        device = _int(value)
        if device is not None and not 0 <= device < _MAX_DEVICE:
            raise InputError(f"{self.path}: malformed allocator snapshot (a segment's device id {device} is out of "
                             "range)")
        return device

    def _actions(self, device: int, seq: int, entries: list) -> None:
        self.budget.spend(sum(e.count if type(e) is Records else 1 for e in entries))  # before any row is built
        out = self.tables[2].values
        for entry in entries:
            if type(entry) is Records:
                self._records(device, seq, entry)
                seq += entry.count
                continue
            if type(entry) is dict:
                site, stack = self.site(entry.get("frames"))
                self.actions += 1
                _append(out, device=device, seq=seq, action=_text(entry.get("action")), addr=_int(entry.get("addr")),
                        size=_int(entry.get("size")), device_free=_int(entry.get("device_free")),
                        stream=_int(entry.get("stream")), time_us=_int(entry.get("time_us")), site=site, stack=stack)
            seq += 1

    def _records(self, device: int, seq: int, records: Records) -> None:
        """A run of history entries, column by column."""
        n = records.count
        out = self.tables[2].values
        self.actions += n
        out["device"].extend(repeat(device, n))
        out["seq"].extend(range(seq, seq + n))
        out["action"].extend(_texts(records.column("action"), n))
        for key in _ACTION_INTS:
            values = records.column(key)
            out[key].extend(repeat(None, n) if values is None else values if records.holds_ints(key)
                            else map(_int, values))
        frames = records.column("frames") or [None] * n
        ids = list(map(id, frames))
        try:  # every stack seen before
            sites, stacks = list(map(self.sites.__getitem__, ids)), list(map(self.stacks.__getitem__, ids))
        except KeyError:
            found = {key: self.site(value) for key, value in dict(zip(ids, frames)).items()}
            sites = [found[key][0] for key in ids]
            stacks = [found[key][1] for key in ids]
        out["site"].extend(sites)
        out["stack"].extend(stacks)


class _Codes(dict):
    """Each distinct string's index in the order first seen (None: null)."""

    def __missing__(self, key: str) -> int:
        self[key] = code = len(self) - 1
        return code


def _strings(values: list[str | None]) -> pa.Array:
    """A string column as a dictionary array: a stack, hundreds of bytes, is converted once, not once a row."""
    codes = _Codes({None: None})
    indices = arrow_values.array(list(map(codes.__getitem__, values)), pa.int32())
    return pa.DictionaryArray.from_arrays(indices, arrow_values.array(list(codes)[1:], pa.string()))


def _append(columns: dict[str, list], **row: Any) -> None:
    for name, value in row.items():
        columns[name].append(value)


def _texts(values: Sequence[Any] | None, n: int) -> Iterable[str | None]:
    """_text of each value, once per distinct value."""
    if values is None:
        return repeat(None, n)
    try:
        distinct = {value: _text(value) for value in set(values)}
    except TypeError:  # an unhashable value
        return map(_text, values)
    return map(distinct.__getitem__, values)


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64:
        return value
    return None


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return _CONTROLS.sub("", value[:_MAX_TEXT])


def _frames(looked: list | tuple) -> tuple[str | None, str | None]:
    """The allocation site and the stack, from the first _FRAMES_SCANNED frames. The site is the innermost Python
    frame outside the framework (the user's first frame), else the innermost Python frame, else None (a stack of
    C++ frames only: the analyses name it by the range it fell in); the stack is up to _FRAMES_KEPT frames,
    innermost first, of the Python frames where there are any (as torch's _memory_viz leaves the unwinder,
    CPython and C++ frames out), else of the C++ frames with a symbol."""
    named = []
    for f in looked:
        if not isinstance(f, dict):
            continue
        filename, line, name = _text(f.get("filename")) or "?", _int(f.get("line")), _text(f.get("name")) or "?"
        named.append((filename, f"{_short(filename)}:{line if line is not None else '?'} ({name})"))
    if not named:
        return None, None
    python = [(filename, text) for filename, text in named if _PYTHON_FILE.search(filename)]
    if not python:  # C++ frames only (autograd's backward thread): no site; the analyses name it otherwise
        symbols = [text for filename, text in named if filename != "??"] or [text for _, text in named]
        return None, " ← ".join(symbols[:_FRAMES_KEPT])
    site = next((text for filename, text in python if not _LIBRARY.search(filename)), python[0][1])
    return site, " ← ".join(text for _, text in python[:_FRAMES_KEPT])


def _short(filename: str) -> str:
    """The file's last two path components: enough to find it, and no home directories in reports."""
    return "/".join(filename.replace("\\", "/").split("/")[-2:])
