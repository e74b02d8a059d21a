"""The shared reader of Chrome-trace JSON event arrays: every timeline format written in that format (the PyTorch
profiler's Kineto traces; XLA/JAX and rocprof write it too) reads its files through here.

The hot path never builds a Python object per event. A file is cut into its small header and tail (parsed with the
json module) and the ``traceEvents`` array (``event_array`` finds where it starts and ends, whatever members follow
it; a bare top-level array of events is read too), which is split at event boundaries into a few part files that
DuckDB's JSON reader parses in parallel straight into the columns the format names, in the temp table ``_raw``
(with ``source_id`` and ``rank``). The format's own SQL then normalises ``_raw`` into the store's tables, one group
of parts at a time, so memory stays bounded by one group whatever the files' sizes; between groups a store in memory
is compressed on a helper thread while the next group is cut and parsed (``_Batches``).

A format is its ``EventFormat`` (which columns, the normalisation, what is done once all events are in) and a reader
module whose ``load``, ``load_many`` and ``load_stream`` call ``load_many`` and ``load_stream`` here with it. A
compressed file arrives as a stream of unpacked chunks (``load_stream``; ``compressed.Unpacking``), cut into parts
as it streams, a few parts at a time, so it is never unpacked whole.
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
from typing import TYPE_CHECKING, Any, BinaryIO

from tracedoc import strict_json
from tracedoc.errors import InputError, first_line
from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.ingest.chrome import event_array
from tracedoc.store import Store
from tracedoc.store.memory import out_of_memory_advice
from tracedoc.store.store import scalar, sql_literal

if TYPE_CHECKING:
    import duckdb  # only for types: DuckDB is imported where a store is used (a cached report needs none)

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


@dataclass(frozen=True)
class Events:
    """One file's events once all are in the store: its source id, the input as the user named it, the document
    around the event array parsed ({} for a bare array) and how many events it held."""

    source_id: int
    name: Path
    meta: dict[str, Any]
    count: int


@dataclass(frozen=True)
class Part:
    """A part file of events cut from an input, with the source and rank its rows get."""

    file: Path
    source_id: int
    rank: int
    name: Path  # the input as the user named it, for errors


@dataclass(frozen=True)
class EventFormat:
    """What one Chrome-trace JSON format reads of its events and how it stores them.

    ``title``: what a file of the format is called in errors; ``columns``: DuckDB ``read_json`` columns, the only
    fields parsed; ``derived``: a select list over ``columns`` (each expression named), values decided once per
    event as the parts are read, so that the normalisation filters on them instead of working them out again in
    each statement ("" for none); ``normalize_sql``: statements that move the rows of ``_raw`` (``columns``,
    ``derived``, ``source_id``, ``rank``) into the store's tables, run once per group of parts;
    ``unconvertible``: a condition on ``_raw`` true for a row whose values ``normalize_sql`` cannot convert (the
    file it came from is named in the error); ``rank``: the rank the document around the events names, None for
    none; ``finish``: what is done once every event of the given files is in, one LoadResult each;
    ``ranked_tables``: tables whose rows get the rank from the header of a streamed file, corrected when its tail
    names another; ``also_read``: run after the parts are parsed, before they are removed (a second pass over them
    for fields the columns cannot hold), only where a row of ``_raw`` meets ``also_read_when`` (counted in the
    statement that counts the events, so a file without such rows costs no statement of its own).
    """

    title: str
    columns: str
    normalize_sql: str
    unconvertible: str
    rank: Callable[[dict[str, Any]], int | None]
    finish: Callable[[Store, list[Events]], list[LoadResult]]
    ranked_tables: tuple[str, ...] = ()
    also_read: Callable[[duckdb.DuckDBPyConnection, list[Part]], None] | None = None
    also_read_when: str = "false"
    derived: str = ""


def sniff(head: bytes) -> bool:
    """True when the first bytes (unpacked) look like a Chrome trace: an object with a ``traceEvents`` array, or
    an array of events."""
    text = head.lstrip()
    if text[:1] == b"[":
        return event_array.array_format_start(head) is not None
    return text[:1] == b"{" and _EVENTS_KEY.search(head) is not None


def load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path, fmt: EventFormat,
              started: Callable[[int], None] | None = None) -> list[LoadResult]:
    """Read plain files of ``fmt`` into the store, each under its source id; ``started(i)`` is told as the i-th
    begins.

    Each event array is cut into parts at event boundaries, and the parts of consecutive files are parsed together,
    ``threads`` at a time: DuckDB parses a group in parallel, many small ranks keep every core busy, and memory
    stays bounded by one group whatever the files' sizes.
    """
    total = sum(path.stat().st_size for _, path in sources)
    with _parsing_threads(store, total) as threads:
        return _load_many(store, sources, workdir, fmt, started, threads, _part_bytes(total, threads))


def _load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path, fmt: EventFormat,
               started: Callable[[int], None] | None, threads: int, part_bytes: int) -> list[LoadResult]:
    metas: list[dict[str, Any]] = []
    pending: list[Part] = []
    batches = _Batches(store, fmt)
    try:
        for index, (source_id, path) in enumerate(sources):
            if started:
                started(index)
            with path.open("rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise InputError(f"{path}: empty file")
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    meta, body_start, body_end = _locate_events(mm, path, fmt)
                    metas.append(meta)
                    rank = fmt.rank(meta) or 0
                    cuts = _event_cuts(mm, body_start, body_end, part_bytes)
                    for a, b in zip(cuts, cuts[1:]):
                        if len(pending) >= threads:  # a part follows: the batch before it goes in first
                            batches.add(pending, more=True)
                            pending = []
                        written = _write_part(mm, f.fileno(), a, b, workdir / f"part{source_id}-{a}.json", path)
                        if written is not None:
                            pending.append(Part(written, source_id, rank, path))
        batches.add(pending, more=False)
        pending = []
        batches.finish()
    finally:
        batches.close()
        _remove(pending)
    return _finish(store, fmt, [Events(source_id, path, meta, batches.counts.get(source_id, 0))
                                for (source_id, path), meta in zip(sources, metas)])


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path,
                fmt: EventFormat) -> LoadResult:
    """Read a file of ``fmt`` from the stream of its bytes (a compressed file as it unpacks): the event array is
    cut into part files at event boundaries as it streams, and each ``threads`` parts are parsed once written, so
    the unpacked file never lies whole on disk or in memory. Errors name the input as given (``name``)."""
    with _parsing_threads(store, stream.size_hint) as threads:
        parts = _StreamParts(workdir, _part_bytes(stream.size_hint or threads * _PART_BYTES, threads))
        return _load_stream(store, source_id, stream.chunks(), name, fmt, threads, parts)


def _load_stream(store: Store, source_id: int, stream: Iterator[bytes], name: Path, fmt: EventFormat,
                 threads: int, parts: _StreamParts) -> LoadResult:
    """load_stream's work on the ``stream`` of chunks, cut into ``parts`` and parsed ``threads`` at a time."""
    head, pending, array_format = _stream_header(stream, name, fmt)
    head_rank = fmt.rank(_header_meta(head)) or 0
    batches = _Batches(store, fmt)
    try:
        for chunk in stream:
            if len(parts.done) >= threads:  # more of the stream follows: the parts cut so far go in first
                batches.add(parts.take(source_id, head_rank, name), more=True)
            pending += chunk
            parts.feed(pending)
        meta, body_end = _find_tail(pending, head, max(0, len(pending) - _TAIL_BYTES), name, array_format, fmt)
        parts.finish(pending[:body_end])
        batches.add(parts.take(source_id, head_rank, name), more=False)
        batches.finish()
    finally:
        batches.close()
        parts.discard()
    event_count = batches.counts.get(source_id, 0)
    rank = fmt.rank(meta) or 0
    if rank != head_rank:  # the rank named after the events: the rows already normalized get the file's rank
        for table in fmt.ranked_tables:
            store.con.execute(f"UPDATE {table} SET rank = ? WHERE source_id = ?", [rank, source_id])
    return _finish(store, fmt, [Events(source_id, name, meta, event_count)])[0]


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


class _Batches:
    """The batches of parts of one load, stored in the order added: each parsed (``_read_events``) into the temp
    table ``_raw`` and normalized into the store on the store's connection, its parts removed once read.

    Where another batch follows, the rows stored so far are compressed before its rows go in (a store in memory
    holds its rows uncompressed until a checkpoint, and they would sit beside the next batch's), on a helper thread
    (``Store.compress_aside``) while this one cuts or unpacks the next batch's parts and DuckDB parses them: a
    checkpoint runs on one thread, and the parse fills the core it leaves idle."""

    def __init__(self, store: Store, fmt: EventFormat) -> None:
        self.store, self.fmt = store, fmt
        self.counts: dict[int, int] = {}  # events per source, of the batches stored
        self._compressing = store.compress_aside()

    def add(self, parts: list[Part], more: bool) -> None:
        """Store ``parts`` (removed once read) after the batches added before; ``more``: another batch follows."""
        if not parts:
            return
        store, fmt = self.store, self.fmt
        try:
            counts, also = _read_events(store.con, parts, fmt, store.limits.memory_bytes)
            self._compressing.wait()  # before this batch's rows go in
            if also and fmt.also_read is not None:
                fmt.also_read(store.con, parts)
        finally:
            _remove(parts)
        _normalize(store.con, parts, fmt)
        _add_counts(self.counts, counts)
        if more:
            self._compressing.start()

    def finish(self) -> None:
        """Wait for the last compression, raising its error (the load went well)."""
        self._compressing.wait()

    def close(self) -> None:
        """Wait for a compression still running, its error dropped (the load failed, or Ctrl-C)."""
        self._compressing.close()


def _remove(parts: Sequence[Part]) -> None:
    for part in parts:
        part.file.unlink(missing_ok=True)


def _finish(store: Store, fmt: EventFormat, sources: list[Events]) -> list[LoadResult]:
    """Refuse a file without events, then the format's own work once all events of these files are in."""
    for events in sources:
        if events.count == 0:
            raise InputError(f"{events.name}: the trace holds no events")
    return fmt.finish(store, sources)


def _normalize(con: duckdb.DuckDBPyConnection, parts: list[Part], fmt: EventFormat) -> None:
    """Normalize ``_raw`` (the events of ``parts``) into the store; a value it cannot convert (a time of NaN,
    infinity or beyond 64-bit nanoseconds) is bad input, named by the first source whose values do not convert."""
    from tracedoc.store.engine import duckdb
    try:
        con.execute(fmt.normalize_sql)
    except duckdb.Error as exc:
        bad = scalar(con, f"SELECT min(source_id) FROM _raw WHERE {fmt.unconvertible}")
        raise out_of_range(next((p.name for p in parts if p.source_id == bad), parts[0].name), exc) from None
    con.execute("DROP TABLE _raw")


def execute_finish(store: Store, sources: list[Events], sql: str) -> None:
    """Run a format's ``sql`` of what is done once all events of ``sources`` are in (``{source_ids}``: their ids); a
    value it cannot convert is bad input, named by the first of them."""
    from tracedoc.store.engine import duckdb

    ids = ", ".join(str(int(events.source_id)) for events in sources)
    try:
        store.con.execute(sql.replace("{source_ids}", ids))
    except duckdb.Error as exc:
        raise out_of_range(sources[0].name, exc) from None


def out_of_range(name: Path, exc: duckdb.Error) -> InputError:
    """The error for a value normalization cannot convert, naming the input it came from."""
    return InputError(f"{name}: trace events with times or values out of range ({first_line(exc)})")


def _locate_events(mm: mmap.mmap, path: Path, fmt: EventFormat) -> tuple[dict[str, Any], int, int]:
    """Find the event array; return the rest of the document parsed ({} for a bare array of events), and the
    array's byte range.

    The range is [start, end): start just after '[', end at the closing ']' (or the end of the last event, in an
    array whose ']' is missing).
    """
    array_start = event_array.array_format_start(mm[:_ARRAY_SNIFF_BYTES])
    if array_start is not None:
        meta, end = _find_tail(mm, b"", max(array_start, len(mm) - _TAIL_BYTES), path, True, fmt)
        return meta, array_start, end
    match = _EVENTS_KEY.search(mm, 0, min(len(mm), _HEADER_SEARCH_BYTES))
    if match is None:
        raise InputError(f"{path}: not a {fmt.title} (no traceEvents array)")
    head = mm[: match.start()]
    body_start = match.end()
    meta, end = _find_tail(mm, head, max(body_start, len(mm) - _TAIL_BYTES), path, False, fmt)
    return meta, body_start, end


def _find_tail(data: mmap.mmap | bytearray, head: bytes, tail_from: int, path: Path,
               array_format: bool, fmt: EventFormat) -> tuple[dict[str, Any], int]:
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


def _stream_header(stream: Iterator[bytes], path: Path, fmt: EventFormat) -> tuple[bytes, bytearray, bool]:
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
    raise InputError(f"{path}: not a {fmt.title} (no traceEvents array)")


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

    def take(self, source_id: int, rank: int, name: Path) -> list[Part]:
        """The finished parts, as parts of this source."""
        parts, self.done = self.done, []
        return [Part(part, source_id, rank, name) for part in parts]

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


def part_labels(parts: Sequence[Any]) -> tuple[str, str, str]:
    """SQL that gives each row read from ``parts`` (each with .file, .source_id, .rank) its part's source id and
    rank, and the option ``read_json`` needs for them ("" or ", filename = true").

    Where every part belongs to one source and rank (one file), the two are constants and no file name is read: a
    column of file names, compared for every event, cost 10-15 % of a Kineto read. Parts of several files are told
    apart by a CASE on the file name (a join with a table of the parts took 40% longer)."""
    if len({(int(p.source_id), int(p.rank)) for p in parts}) == 1:
        return f"CAST({int(parts[0].source_id)} AS INTEGER)", f"CAST({int(parts[0].rank)} AS INTEGER)", ""
    files = [sql_literal(str(p.file)) for p in parts]
    source_id = " ".join(f"WHEN {f} THEN {int(p.source_id)}" for f, p in zip(files, parts))
    rank = " ".join(f"WHEN {f} THEN {int(p.rank)}" for f, p in zip(files, parts))
    return (f"CAST(CASE filename {source_id} END AS INTEGER)", f"CAST(CASE filename {rank} END AS INTEGER)",
            ", filename = true")


def _read_events(con: duckdb.DuckDBPyConnection, parts: list[Part], fmt: EventFormat,
                 memory_bytes: int | None) -> tuple[dict[int, int], bool]:
    """Parse the part files into the temp table ``_raw``, each row with its part's source id and rank; return the
    count of events per source, and whether a row meets the format's ``also_read_when``."""
    files = [sql_literal(str(p.file)) for p in parts]
    source_id, rank, filename = part_labels(parts)
    derived = f"{fmt.derived}, " if fmt.derived else ""
    columns = "* EXCLUDE (filename)" if filename else "*"
    sql = (f"CREATE OR REPLACE TEMP TABLE _raw AS SELECT {columns}, {derived}"
           f"{source_id} AS source_id, {rank} AS rank "
           f"FROM read_json([{', '.join(files)}], format = 'array', columns = {fmt.columns}, "
           f"maximum_object_size = 16777216{filename})")
    from tracedoc.store.engine import duckdb
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
    rows = con.execute(f"SELECT source_id, count(*), count(*) FILTER (WHERE {fmt.also_read_when}) FROM _raw "
                       "GROUP BY source_id").fetchall()
    return {source_id: count for source_id, count, _ in rows}, any(also for _, _, also in rows)
