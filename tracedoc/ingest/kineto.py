"""PyTorch profiler traces (Kineto chrome-trace JSON) into the store; gzip and xz files are read as they unpack.

The hot path never builds a Python object per event. The file is cut into its small header and tail (parsed
with the json module) and the ``traceEvents`` array (``event_array`` finds where it starts and ends, whatever
members follow it; a bare top-level array of events is read too), which is split at event boundaries into a few
part files that DuckDB's JSON reader parses in parallel straight into columns. Normalization into the store's
tables is SQL.
A compressed trace is cut into parts as it streams out of the decompressor (``load_compressed``), a few parts at
a time, so it is never unpacked whole.
"""

from __future__ import annotations

import itertools
import json
import mmap
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import duckdb

from tracedoc import strict_json
from tracedoc.errors import InputError, first_line
from tracedoc.ingest import compressed, event_array, kineto_memory
from tracedoc.ingest.base import LoadResult
from tracedoc.store import Store
from tracedoc.store.memory import out_of_memory_advice
from tracedoc.store.store import scalar, sql_literal

FORMAT = "torch"

_EVENTS_KEY = event_array.EVENTS_KEY
# Kineto writes one event per line (or per block of lines): a raw newline never occurs inside a JSON string, so
# '},' + newline + '{' can only be a boundary between two array elements.
_EVENT_BOUNDARY = re.compile(rb"\}\s*,[ \t]*\r?\n\s*\{")
_HEADER_SEARCH_BYTES = 64 << 20
_TAIL_BYTES = 1 << 20  # the array's closing ']' and the members after it are looked for in the file's last MiB
_PART_BYTES = 32 << 20
_ARRAY_SNIFF_BYTES = 1 << 16  # a bare array's first event is looked for in the first 64 KiB
_MIN_PART_BYTES = 1 << 20  # smaller arrays are one part: parsing them in parallel would not pay for the split
# More threads than one per _BYTES_PER_THREAD of events do not read faster, and each adds its parts and buffers: on
# 16 cores the 205 MB trace was ingested in 1.75-1.93 s on 4 threads against 1.78-1.86 s on 16, its peak memory
# 403-463 MB against 724-751 MB. Two at least, so that both cores of a small machine parse a 25 MB rank.
_BYTES_PER_THREAD = 64 << 20
_DIGITS = re.compile(r"-?[0-9]{1,18}")

# Fields read from each event's "args"; everything is read as text and cast in SQL, so a trace that writes a
# number as a string (or the reverse) still loads.
_ARGS_TYPE = (
    'STRUCT("device" VARCHAR, "stream" VARCHAR, "correlation" VARCHAR, "External id" VARCHAR, '
    '"bytes" VARCHAR, "registers per thread" VARCHAR, "shared memory" VARCHAR, '
    '"Collective name" VARCHAR, "grid" JSON, "block" JSON, '
    # record_param_comms (collective calls): process group and message sizes
    '"Process Group Name" VARCHAR, "Process Group Description" VARCHAR, "Group size" VARCHAR, "dtype" VARCHAR, '
    '"In msg nelems" VARCHAR, "Out msg nelems" VARCHAR, "In split size" VARCHAR, "Out split size" VARCHAR, '
    # record_shapes=True: operators' input shapes and types
    '"Input Dims" JSON, "Input type" JSON, "Concrete Inputs" JSON)'
)
_COLUMNS = (
    "{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', "
    f"ts: 'DOUBLE', dur: 'DOUBLE', id: 'VARCHAR', args: '{_ARGS_TYPE}'}}"
)


def sniff(path: Path, head: bytes) -> bool:
    """True when the first bytes (decompressed) look like a chrome trace: an object with a ``traceEvents`` array, or
    an array of events."""
    text = head.lstrip()
    if text[:1] == b"[":
        return event_array.array_format_start(head) is not None
    return text[:1] == b"{" and _EVENTS_KEY.search(head) is not None


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one trace file (plain JSON) into the store's tables under ``source_id``."""
    return load_many(store, [(source_id, path)], workdir)[0]


def load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path,
              started: Callable[[int], None] | None = None) -> list[LoadResult]:
    """Read plain trace files into the store, each under its source id; ``started(i)`` is told as the i-th begins.

    Each event array is cut into parts at event boundaries, and the parts of consecutive files are parsed together,
    ``threads`` at a time: DuckDB parses a group in parallel, many small ranks keep every core busy, and memory
    stays bounded by one group whatever the files' sizes.
    """
    total = sum(path.stat().st_size for _, path in sources)
    with _parsing_threads(store, total) as threads:
        return _load_many(store, sources, workdir, started, threads, _part_bytes(total, threads))


def _load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path,
               started: Callable[[int], None] | None, threads: int, part_bytes: int) -> list[LoadResult]:
    metas: list[dict[str, Any]] = []
    counts: dict[int, int] = {}
    pending: list[_Part] = []
    try:
        for index, (source_id, path) in enumerate(sources):
            if started:
                started(index)
            with path.open("rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise InputError(f"{path}: empty file")
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    meta, body_start, body_end = _locate_events(mm, path)
                    metas.append(meta)
                    rank = _distributed(meta)[0] or 0
                    cuts = _event_cuts(mm, body_start, body_end, part_bytes)
                    for a, b in zip(cuts, cuts[1:]):
                        written = _write_part(mm, f.fileno(), a, b, workdir / f"part{source_id}-{a}.json", path)
                        if written is not None:
                            pending.append(_Part(written, source_id, rank, path))
                        if len(pending) >= threads:
                            _add_counts(counts, _ingest_parts(store, pending))
                            pending = []
        _add_counts(counts, _ingest_parts(store, pending))
    finally:
        for part in pending:
            part.file.unlink(missing_ok=True)
    return _finish(store, [(source_id, path, meta, counts.get(source_id, 0))
                           for (source_id, path), meta in zip(sources, metas)])


def load_compressed(store: Store, source_id: int, path: Path, kind: str, limit: int, workdir: Path,
                    name: Path) -> LoadResult:
    """Read a gzip or xz trace as it unpacks (``compressed.chunks``, at most ``limit`` bytes): the event array is
    cut into part files at event boundaries as it streams, and each ``threads`` parts are parsed once written, so
    the unpacked trace never lies whole on disk or in memory. Errors name the input as given (``name``)."""
    unpacked = compressed.size_hint(path, kind)
    if unpacked is not None and unpacked < path.stat().st_size:  # the trailer is modulo 4 GiB, and untrusted
        unpacked = None
    with _parsing_threads(store, unpacked) as threads:
        parts = _StreamParts(workdir, _part_bytes(unpacked or threads * _PART_BYTES, threads))
        return _load_stream(store, source_id, compressed.chunks(path, kind, limit, name), name, threads, parts)


def _load_stream(store: Store, source_id: int, stream: Iterator[bytes], name: Path, threads: int,
                 parts: _StreamParts) -> LoadResult:
    """load_compressed's work on the unpacked ``stream``, cut into ``parts`` and parsed ``threads`` at a time."""
    head, pending, array_format = _stream_header(stream, name)
    head_rank = _distributed(_header_meta(head))[0] or 0
    event_count = 0
    try:
        for chunk in stream:
            pending += chunk
            parts.feed(pending)
            if len(parts.done) >= threads:
                event_count += _ingest_parts(store, parts.take(source_id, head_rank, name)).get(source_id, 0)
        meta, body_end = _find_tail(pending, head, max(0, len(pending) - _TAIL_BYTES), name, array_format)
        parts.finish(pending[:body_end])
        event_count += _ingest_parts(store, parts.take(source_id, head_rank, name)).get(source_id, 0)
    finally:
        parts.discard()
    rank = _distributed(meta)[0] or 0
    if rank != head_rank:  # distributedInfo after the events: the rows already normalized get the trace's rank
        for table in ("collective_calls", "memory_events"):
            store.con.execute(f"UPDATE {table} SET rank = ? WHERE source_id = ?", [rank, source_id])
    return _finish(store, [(source_id, name, meta, event_count)])[0]


@dataclass
class _Part:
    """A part file of events cut from an input, with the source and rank its rows get."""

    file: Path
    source_id: int
    rank: int
    name: Path  # the input as the user named it, for errors


def _add_counts(counts: dict[int, int], more: dict[int, int]) -> None:
    for source_id, count in more.items():
        counts[source_id] = counts.get(source_id, 0) + count


@contextmanager
def _parsing_threads(store: Store, body_bytes: int | None) -> Iterator[int]:
    """DuckDB's threads while events of ``body_bytes`` (None: unknown) are read and stored: those set, but at most
    one per _BYTES_PER_THREAD and two at least; the setting is restored afterwards, on failure too."""
    before = store.threads()
    threads = before if body_bytes is None else min(before, max(2, -(-body_bytes // _BYTES_PER_THREAD)))
    if threads < before:
        store.con.execute(f"SET threads = {threads}")
    try:
        yield threads
    finally:
        if threads < before:
            store.con.execute(f"SET threads = {before}")


def _part_bytes(body_bytes: int, threads: int) -> int:
    """Part size for an event array of ``body_bytes``: at most _PART_BYTES, and small enough that the array is cut
    into ``threads`` parts (every core parses), but no smaller than _MIN_PART_BYTES."""
    return min(_PART_BYTES, max(_MIN_PART_BYTES, -(-body_bytes // threads)))


def _ingest_parts(store: Store, parts: list[_Part]) -> dict[int, int]:
    """Parse the part files (removed afterwards) and normalize their events into the store; return the count of
    events per source."""
    if not parts:
        return {}
    try:
        counts = _read_events(store.con, parts, store.limits.memory_bytes)
        if kineto_memory.present(store.con):  # profile_memory=True: the allocator's events (kineto_memory)
            kineto_memory.read(store.con, parts)
    finally:
        for part in parts:
            part.file.unlink(missing_ok=True)
    _normalize(store.con, parts)
    return counts


def _finish(store: Store, sources: list[tuple[int, Path, dict[str, Any], int]]) -> list[LoadResult]:
    """What is done once all events of these sources (id, input, document around the events, event count) are in:
    flow-linked correlations, steps, devices."""
    for _, name, _, event_count in sources:
        if event_count == 0:
            raise InputError(f"{name}: the trace holds no events")
    ids = ", ".join(str(int(source_id)) for source_id, *_ in sources)
    try:
        store.con.execute(_FINISH_SQL.replace("{source_ids}", ids))
    except duckdb.Error as exc:
        raise _out_of_range(sources[0][1], exc) from None
    results = []
    for source_id, _, meta, event_count in sources:
        _insert_devices(store.con, source_id, meta)
        _insert_header(store.con, source_id, meta)
        kineto_memory.record_clock(store.con, source_id, meta)
        rank, world_size = _distributed(meta)
        results.append(LoadResult(rank, world_size, event_count, _tool(meta)))
    return results


def _normalize(con: duckdb.DuckDBPyConnection, parts: list[_Part]) -> None:
    """Normalize ``_raw`` (the events of ``parts``) into the store; a value it cannot convert (a time of NaN,
    infinity or beyond 64-bit nanoseconds) is bad input, named by the first source whose times do not convert."""
    try:
        con.execute(_NORMALIZE_CHUNK_SQL)
    except duckdb.Error as exc:
        bad = scalar(con, f"SELECT min(source_id) FROM _raw WHERE (ts IS NOT NULL AND {_try(_TS_NS)} IS NULL) "
                          f"OR {_try(_DUR_NS)} IS NULL")
        raise _out_of_range(next((p.name for p in parts if p.source_id == bad), parts[0].name), exc) from None


def _out_of_range(name: Path, exc: duckdb.Error) -> InputError:
    """The error for a value normalization cannot convert, naming the input it came from."""
    return InputError(f"{name}: trace events with times or values out of range ({first_line(exc)})")


def _locate_events(mm: mmap.mmap, path: Path) -> tuple[dict[str, Any], int, int]:
    """Find the event array; return the rest of the document parsed ({} for a bare array of events), and the
    array's byte range.

    The range is [start, end): start just after '[', end at the closing ']' (or the end of the last event, in an
    array whose ']' is missing).
    """
    array_start = event_array.array_format_start(mm[:_ARRAY_SNIFF_BYTES])
    if array_start is not None:
        meta, end = _find_tail(mm, b"", max(array_start, len(mm) - _TAIL_BYTES), path, True)
        return meta, array_start, end
    match = _EVENTS_KEY.search(mm, 0, min(len(mm), _HEADER_SEARCH_BYTES))
    if match is None:
        raise InputError(f"{path}: not a PyTorch profiler trace (no traceEvents array)")
    head = mm[: match.start()]
    body_start = match.end()
    meta, end = _find_tail(mm, head, max(body_start, len(mm) - _TAIL_BYTES), path, False)
    return meta, body_start, end


def _find_tail(data: mmap.mmap | bytearray, head: bytes, tail_from: int, path: Path,
               array_format: bool) -> tuple[dict[str, Any], int]:
    """The document around the events parsed (``head``, and what follows the array's closing ']' in ``data``; {}
    for a bare array of events) and the offset where the events end, found in ``data[tail_from:]``."""
    tail = bytes(data[tail_from:])
    if array_format:
        return {}, tail_from + event_array.array_format_end(tail)
    end = event_array.events_end(tail)
    if end is None:
        raise InputError(f"{path}: truncated or malformed trace (the traceEvents array is not closed)")
    try:
        meta = strict_json.loads(head + b'"traceEvents": []' + tail[end + 1:])
    except strict_json.BadJson as exc:
        raise InputError(f"{path}: malformed trace header ({exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise InputError(f"{path}: truncated or malformed trace (the members around the traceEvents array do not "
                         f"parse: {reason})") from None
    if not isinstance(meta, dict):
        raise InputError(f"{path}: truncated or malformed trace (the traceEvents array is not closed)")
    return meta, tail_from + end


def _stream_header(stream: Iterator[bytes], path: Path) -> tuple[bytes, bytearray, bool]:
    """Read a stream up to its event array: the bytes before the ``traceEvents`` key (none for a bare array of
    events), those after the array's '[', and whether the trace is a bare array."""
    data = bytearray()
    for chunk in stream:
        data += chunk
        if len(data) >= _ARRAY_SNIFF_BYTES:
            break
    array_start = event_array.array_format_start(bytes(data[:_ARRAY_SNIFF_BYTES]))
    if array_start is not None:
        return b"", data[array_start:], True
    for chunk in itertools.chain([b""], stream):
        data += chunk
        match = _EVENTS_KEY.search(data, 0, _HEADER_SEARCH_BYTES)
        if match is not None:
            return bytes(data[: match.start()]), data[match.end() :], False
        if len(data) >= _HEADER_SEARCH_BYTES:
            break
    raise InputError(f"{path}: not a PyTorch profiler trace (no traceEvents array)")


def _header_meta(head: bytes) -> dict[str, Any]:
    """The document's fields before the events (e.g. distributedInfo), when they parse alone; else none."""
    try:
        meta = strict_json.loads(head + b'"traceEvents": []}')
    except ValueError:  # strict_json.BadJson, json.JSONDecodeError, UnicodeDecodeError: the full parse says why
        return {}
    return meta if isinstance(meta, dict) else {}


class _StreamParts:
    """Part files cut from an event array that arrives in chunks, at event boundaries, each about ``part_bytes``.

    ``feed`` writes out all but the last _TAIL_BYTES of the pending bytes (the array's end and what follows it lie
    there once the stream ends); a part grows past its size until a boundary comes. Finished parts wait in
    ``done`` until taken.
    """

    def __init__(self, workdir: Path, part_bytes: int) -> None:
        self.workdir, self.part_bytes = workdir, part_bytes
        self.done: list[Path] = []
        self._out: BinaryIO | None = None
        self._path: Path | None = None
        self._written = 0
        self._count = 0

    def feed(self, pending: bytearray) -> None:
        """Write out (and remove from ``pending``) what no longer belongs to the last _TAIL_BYTES."""
        while (limit := len(pending) - _TAIL_BYTES) > 0:
            m = _EVENT_BOUNDARY.search(pending, max(0, self.part_bytes - self._written), limit)
            upto = m.start() + 1 if m else limit
            self._write(pending, upto)
            del pending[:upto]
            if m is None:
                return
            self._close()

    def finish(self, rest: bytearray) -> None:
        """The array's last bytes (up to its closing ']')."""
        self._write(rest, len(rest))
        self._close()

    def take(self, source_id: int, rank: int, name: Path) -> list[_Part]:
        """The finished parts, as parts of this source."""
        parts, self.done = self.done, []
        return [_Part(part, source_id, rank, name) for part in parts]

    def discard(self) -> None:
        """Remove every part file left (after a failure)."""
        if self._out is not None:
            self._out.close()
            self._out = None
        for part in [*self.done, *([self._path] if self._path else [])]:
            part.unlink(missing_ok=True)
        self.done, self._path = [], None

    def _write(self, data: bytearray, upto: int) -> None:
        start = 0
        if self._out is None:  # a new part starts at its first event: skip the separator after the last one
            start = data.find(b"{", 0, upto)
            if start < 0:
                return
            self._path = self.workdir / f"stream-part{self._count}.json"
            self._count += 1
            self._out = self._path.open("wb")
            self._out.write(b"[")
            self._written = 0
        self._out.write(memoryview(data)[start:upto])
        self._written += upto - start

    def _close(self) -> None:
        if self._out is None:
            return
        self._out.write(b"]")
        self._out.close()
        assert self._path is not None
        self.done.append(self._path)
        self._out, self._path, self._written = None, None, 0


def _event_cuts(mm: mmap.mmap, start: int, end: int, part_bytes: int) -> list[int]:
    """Offsets that split the array's body [start, end) into parts of about ``part_bytes`` at event boundaries.

    Each offset but the first points just past the '}' that closes an event.
    """
    cuts = [start]
    while end - cuts[-1] > part_bytes:
        m = _EVENT_BOUNDARY.search(mm, cuts[-1] + part_bytes, end)
        if m is None:
            break
        cuts.append(m.start() + 1)
    cuts.append(end)
    return cuts


def _write_part(mm: mmap.mmap, source_fd: int, start: int, end: int, part: Path, path: Path) -> Path | None:
    """Copy the events between two cuts into a standalone JSON array file (None: no event between them)."""
    start = mm.find(b"{", start, end)  # skip the separating comma and whitespace
    if start < 0:
        return None
    with part.open("wb") as out:
        out.write(b"[")
        out.flush()
        _copy_range(source_fd, out.fileno(), start, end - start, path)
        out.seek(0, os.SEEK_END)
        out.write(b"]")
    return part


def _copy_range(src_fd: int, dst_fd: int, offset: int, count: int, path: Path) -> None:
    """Append ``count`` bytes of ``src_fd`` from ``offset`` to ``dst_fd``, inside the kernel (no Python copies)."""
    while count > 0:
        n = os.copy_file_range(src_fd, dst_fd, count, offset)
        if n == 0:
            raise InputError(f"{path}: the file shrank while being read")
        offset += n
        count -= n


def _read_events(con: duckdb.DuckDBPyConnection, parts: list[_Part], memory_bytes: int | None) -> dict[int, int]:
    """Parse the part files into the temp table ``_raw``, each row with its part's source id and rank; return the
    count of events per source."""
    files = [sql_literal(str(p.file)) for p in parts]
    # A CASE on the file name costs next to nothing; a join with a table of the parts took 40% longer.
    source_id = " ".join(f"WHEN {f} THEN {int(p.source_id)}" for f, p in zip(files, parts))
    rank = " ".join(f"WHEN {f} THEN {int(p.rank)}" for f, p in zip(files, parts))
    con.execute("CREATE TEMP TABLE IF NOT EXISTS _flow_end (source_id INTEGER, pid BIGINT, tid BIGINT, "
                "ts_ns BIGINT, correlation_id BIGINT)")
    sql = (f"CREATE OR REPLACE TEMP TABLE _raw AS SELECT * EXCLUDE (filename), "
           f"CAST(CASE filename {source_id} END AS INTEGER) AS source_id, "
           f"CAST(CASE filename {rank} END AS INTEGER) AS rank "
           f"FROM read_json([{', '.join(files)}], format = 'array', columns = {_COLUMNS}, "
           f"maximum_object_size = 16777216, filename = true)")
    try:
        con.execute(sql)
    except duckdb.OutOfMemoryException as exc:
        names = ", ".join(dict.fromkeys(str(p.name) for p in parts))
        raise InputError(f"{names}: out of memory while reading the trace ({first_line(exc)})"
                         f"{out_of_memory_advice(memory_bytes)}") from None
    except duckdb.Error as exc:
        message = first_line(exc)
        name = next((p.name for p in parts if str(p.file) in message), parts[0].name)
        for part in parts:  # the part files' paths mean nothing to the user
            message = message.replace(str(part.file), str(part.name))
        raise InputError(f"{name}: malformed trace JSON ({message})") from None
    return dict(con.execute("SELECT source_id, count(*) FROM _raw GROUP BY source_id").fetchall())


_TS_NS = "CAST(round(ts * 1000) AS BIGINT)"  # Kineto times are microseconds with nanosecond decimals
_DUR_NS = "CAST(round(greatest(coalesce(dur, 0), 0) * 1000) AS BIGINT)"


def _try(cast: str) -> str:
    """A conversion above that gives NULL instead of failing."""
    return "TRY_" + cast

_NORMALIZE_CHUNK_SQL = f"""
INSERT INTO gpu_activity
SELECT
    source_id, rank,
    coalesce(TRY_CAST(args."device" AS INTEGER), TRY_CAST(pid AS INTEGER)),
    coalesce(TRY_CAST(args."stream" AS BIGINT), TRY_CAST(tid AS BIGINT)),
    kind,
    CASE
        WHEN kind <> 'kernel' THEN kind
        WHEN args."Collective name" IS NOT NULL THEN 'communication'
        WHEN name ILIKE 'nccl%' OR name ILIKE '%ncclDevKernel%' OR name ILIKE '%ncclKernel%' THEN 'communication'
        ELSE 'compute'
    END,
    name, {_TS_NS}, {_DUR_NS},
    TRY_CAST(args."correlation" AS BIGINT),
    TRY_CAST(args."bytes" AS BIGINT),
    CASE WHEN kind = 'memcpy' THEN nullif(regexp_extract(name, 'Memcpy ([A-Za-z]+)', 1), '') END,
    CASE WHEN kind <> 'memcpy' THEN NULL
         WHEN name ILIKE '%pageable%' THEN 'pageable'
         WHEN name ILIKE '%pinned%' THEN 'pinned' END,
    CASE WHEN kind = 'kernel' THEN array_to_string(TRY_CAST(args."grid" AS BIGINT[]), ',') END,
    CASE WHEN kind = 'kernel' THEN array_to_string(TRY_CAST(args."block" AS BIGINT[]), ',') END,
    TRY_CAST(args."registers per thread" AS INTEGER),
    TRY_CAST(args."shared memory" AS BIGINT),
    args."Collective name"
FROM (
    SELECT *, CASE lower(cat)
        WHEN 'kernel' THEN 'kernel'
        WHEN 'gpu_memcpy' THEN 'memcpy' WHEN 'memcpy' THEN 'memcpy'
        WHEN 'gpu_memset' THEN 'memset' WHEN 'memset' THEN 'memset'
        WHEN 'cuda_sync' THEN 'sync'
    END AS kind
    FROM _raw WHERE ph = 'X' AND ts IS NOT NULL
)
WHERE kind IS NOT NULL;

INSERT INTO cpu_activity
SELECT
    source_id, rank, TRY_CAST(pid AS BIGINT), TRY_CAST(tid AS BIGINT),
    CASE lower(cat)
        WHEN 'cpu_op' THEN 'op' WHEN 'operator' THEN 'op'
        WHEN 'cuda_runtime' THEN 'runtime' WHEN 'runtime' THEN 'runtime'
        WHEN 'cuda_driver' THEN 'driver'
        WHEN 'user_annotation' THEN 'annotation'
        WHEN 'python_function' THEN 'python'
        ELSE 'other'
    END,
    name, {_TS_NS}, {_DUR_NS},
    TRY_CAST(args."correlation" AS BIGINT),
    TRY_CAST(args."External id" AS BIGINT)
FROM _raw
WHERE ph = 'X' AND ts IS NOT NULL
  AND lower(cat) NOT IN ('kernel', 'gpu_memcpy', 'memcpy', 'gpu_memset', 'memset', 'cuda_sync', 'trace', 'ac2g')
  AND lower(cat) NOT LIKE 'gpu\\_%' ESCAPE '\\';

-- Flow events ('ac2g') link a runtime call (phase s) to the GPU activity it issued (phase f) by id. Kept for
-- GPU activity that carries no 'correlation' argument of its own (older traces).
INSERT INTO _flow_end
SELECT source_id, TRY_CAST(pid AS BIGINT), TRY_CAST(tid AS BIGINT), {_TS_NS}, TRY_CAST(id AS BIGINT)
FROM _raw WHERE ph = 'f' AND cat = 'ac2g';

-- Timed events of categories tracedoc does not analyse, counted per category and process (schema_torch.sql).
INSERT INTO torch_other_events
SELECT source_id, cat, pid, count(*), sum({_DUR_NS})
FROM _raw
WHERE ph = 'X' AND ts IS NOT NULL AND cat IS NOT NULL
  AND lower(cat) NOT IN ('kernel', 'gpu_memcpy', 'memcpy', 'gpu_memset', 'memset', 'cuda_sync', 'cpu_op', 'operator',
                         'cuda_runtime', 'runtime', 'cuda_driver', 'user_annotation', 'python_function', 'trace',
                         'ac2g', 'overhead')
  AND lower(cat) NOT LIKE 'gpu\\_%' ESCAPE '\\'
GROUP BY ALL;

-- Operators' input shapes and types, where the trace was recorded with record_shapes=True (schema_torch.sql).
INSERT INTO op_shapes
SELECT source_id, rank, TRY_CAST(args."External id" AS BIGINT), name, {_TS_NS},
       CAST(args."Input Dims" AS VARCHAR), CAST(args."Input type" AS VARCHAR),
       CAST(args."Concrete Inputs" AS VARCHAR)
FROM _raw
WHERE ph = 'X' AND ts IS NOT NULL AND lower(cat) IN ('cpu_op', 'operator') AND args."Input Dims" IS NOT NULL;

-- Collective calls with their process group and sizes (schema_ranks.sql).
INSERT INTO collective_calls
SELECT source_id, rank, TRY_CAST(tid AS BIGINT), {_TS_NS}, {_DUR_NS},
       TRY_CAST(args."External id" AS BIGINT), args."Collective name", args."Process Group Name",
       args."Process Group Description", TRY_CAST(args."Group size" AS INTEGER), args."dtype",
       TRY_CAST(args."In msg nelems" AS BIGINT), TRY_CAST(args."Out msg nelems" AS BIGINT),
       args."In split size", args."Out split size"
FROM _raw WHERE ph = 'X' AND name = 'record_param_comms' AND ts IS NOT NULL;

DROP TABLE _raw;
"""

# {source_ids}: the sources just read.
_FINISH_SQL = """
UPDATE gpu_activity g SET correlation_id = f.correlation_id
FROM _flow_end f
WHERE g.source_id = f.source_id AND g.correlation_id IS NULL
  AND f.pid = g.device AND f.tid = g.stream AND f.ts_ns = g.ts_ns;

DROP TABLE IF EXISTS _flow_end;

-- ProfilerStep#N annotations mark the steps (a step may be recorded more than once: keep its whole extent).
INSERT INTO steps
SELECT source_id, rank, step, min(ts_ns), max(ts_ns + dur_ns) - min(ts_ns)
FROM (
    SELECT source_id, rank, TRY_CAST(split_part(name, '#', 2) AS INTEGER) AS step, ts_ns, dur_ns
    FROM cpu_activity
    WHERE source_id IN ({source_ids}) AND name LIKE 'ProfilerStep#%'
)
WHERE step IS NOT NULL
GROUP BY source_id, rank, step;
"""


def _distributed(meta: dict[str, Any]) -> tuple[int | None, int | None]:
    """Rank and world size from ``distributedInfo``, when the trace has it."""
    info = meta.get("distributedInfo")
    if not isinstance(info, dict):
        return None, None
    return _count(info.get("rank")), _count(info.get("world_size"))


def _count(value: Any) -> int | None:
    """A rank or world size: an integer, or a string of ASCII digits, in [0, 2^31); None for anything else
    (str.isdigit would take '²', which int() refuses)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31:
        return value
    return None


def _insert_devices(con: duckdb.DuckDBPyConnection, source_id: int, meta: dict[str, Any]) -> None:
    """GPUs from the trace header's ``deviceProperties``."""
    props = meta.get("deviceProperties")
    if not isinstance(props, list):
        return
    rows = []
    for p in props:
        if not isinstance(p, dict):
            continue
        major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        rows.append((source_id, _int(p.get("id")), _str(p.get("name")), cc,
                     _int(p.get("totalGlobalMem")), _int(p.get("numSms"))))
    if rows:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?)", rows)


def _insert_header(con: duckdb.DuckDBPyConnection, source_id: int, meta: dict[str, Any]) -> None:
    """The header's facts about the job's devices: how many GPUs deviceProperties lists (an empty list: the
    profiler saw none), and the process groups' backend."""
    props = meta.get("deviceProperties")
    info = meta.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, dict) else None
    con.execute("INSERT INTO torch_headers VALUES (?, ?, ?)",
                [source_id, len(props) if isinstance(props, list) else None, _str(backend)])


def _tool(meta: dict[str, Any]) -> str:
    """A short description of what wrote the trace."""
    parts = ["torch.profiler"]
    if "schemaVersion" in meta:
        parts.append(f"schema {_str(meta['schemaVersion'])}")
    if "cuda_runtime_version" in meta:
        parts.append(f"CUDA runtime {_str(meta['cuda_runtime_version'])}")
    if "hip_runtime_version" in meta:
        parts.append(f"HIP runtime {_str(meta['hip_runtime_version'])}")
    return ", ".join(parts)


def _int(value: Any) -> int | None:
    """A header number as a 64-bit integer; None when it is not one (header values are untrusted)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63:
        return value
    return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)[:200]
