"""Ingest: find the trace files among the user's paths, detect their format, and load them into a store.

One reader module per format, held to the contract in ingest/base.py (``Reader``: ``FORMAT``, ``sniff``,
``load``, which reads a plain file; optionally ``load_many``, ``load_stream``, ``prepare``,
``redundant_in_directory`` and ``recording``), looked up once per format by ``reader``. A compressed input is
wrapped as a stream of its unpacked bytes (``compressed.Unpacking``, bounded by the inflate cap, and by the format's
``max_bytes`` when it declares one): handed to the reader when it reads streams (``load_stream``: the Chrome-trace
formats, flight-recorder dumps, Nsight Compute, allocator snapshots, NVML recordings, the GEMM ladder), else
unpacked into the work directory for ``load`` (the formats that need a file: Nsight Systems, whose SQLite is opened
and whose reports ``nsys export`` reads, and Parquet telemetry, read by seeking). ``-`` reads standard input
(spooled to a temporary file). Every source is written to the ``sources`` table by ``sources.insert_sources``.
Declare a new format in tracedoc/formats.py's FORMATS (its module is imported only when a file is sniffed or read with
it, so reading a PyTorch trace never imports the readers of other formats). Ingest knows nothing about analyses
or rules.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import re
import stat
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from tracedoc.errors import InputError, TracedocError, first_line
from tracedoc.formats import BY_NAME, TIMELINE
from tracedoc.formats import FORMATS as _DECLARED
from tracedoc.ingest import compressed
from tracedoc.ingest.base import (
    LoadResult,
    PreparesFiles,
    Reader,
    ReadsMany,
    ReadsStream,
    Recording,
    SetsAsideInDirectory,
    TellsItsRecording,
)
from tracedoc.ingest.content import content_of
from tracedoc.ingest.cycles import latest_cycles
from tracedoc.ingest.names import rank_in_name
from tracedoc.ingest.sources import SourceRow, insert_sources
from tracedoc.limits import Limits
from tracedoc.store import Store
from tracedoc.store.cache import file_digest, pid_alive

__all__ = ["FORMATS", "STDIN", "FormatReader", "InputFile", "assign_ranks", "discover", "load_all", "reader"]

# Format name (the module's FORMAT): its reader module, in the order files are sniffed (tracedoc/formats.py FORMATS).
FORMATS: dict[str, str] = {f.name: f.module for f in _DECLARED}

STDIN = Path("-")
# Files in a directory that are never traces: documentation and sample metadata beside the traces.
_NOT_TRACES = (".md", ".txt", ".yaml", ".yml", ".py", ".log", ".png", ".html")
_SNIFF_BYTES = 1 << 20
# Times on the store's timelines (ns) must lie in [_MIN_NS, _MAX_NS) and durations in [0, _MAX_NS): 2^62 ns is
# 146 years, beyond any clock a profiler uses, and keeps every sum and difference of two of them inside 64 bits.
_MIN_NS, _MAX_NS = -(1 << 61), 1 << 62
# A trace's GPU work spans at most this many devices (a process sees its node's GPUs: 8 to 72).
MAX_DEVICES = 1024
_TIMED_TABLES = {"gpu_activity": "dur_ns", "cpu_activity": "dur_ns", "nvtx_ranges": "dur_ns", "steps": "dur_ns",
                 "collective_calls": "dur_ns", "nsys_overhead": "dur_ns", "gpu_telemetry": None,
                 "memory_events": None}


@dataclass
class InputFile:
    """One trace file to analyse: ``path`` as the user named it (``-``: standard input), ``data`` the file that
    holds its bytes when that is another one (standard input's temporary copy)."""

    path: Path
    format: str
    size_bytes: int
    compression: str | None = None  # 'gzip' | 'xz': unpacked into the work directory before its format reads it
    data: Path | None = field(default=None, compare=False, repr=False)
    # Which process wrote it and when, where its format tells (``TellsItsRecording``); the earlier cycles of that
    # process's recording that this file is judged in place of (tracedoc.ingest.cycles).
    recording: Recording | None = field(default=None, compare=False, repr=False)
    earlier: tuple[Path, ...] = field(default=(), compare=False)
    _digest: str | None = field(default=None, compare=False, repr=False)

    @property
    def digest(self) -> str:
        """The hash of the file's bytes (store.cache.file_digest), computed when first asked for: only the cache
        key needs it."""
        if self._digest is None:
            self._digest = file_digest(self.file)
        return self._digest

    @property
    def file(self) -> Path:
        """Where the input's bytes are."""
        return self.data or self.path


@dataclass(frozen=True)
class FormatReader:
    """A format's reader module (``Reader``) and the optional members it has, each the module seen through its
    protocol (ingest/base.py), None where it lacks the member."""

    module: Reader
    many: ReadsMany | None
    streamed: ReadsStream | None
    prepares: PreparesFiles | None
    sets_aside: SetsAsideInDirectory | None
    recorded: TellsItsRecording | None


@functools.cache
def reader(name: str) -> FormatReader:
    """The reader of a format in FORMATS, its module imported on first use: the one place ingest asks what a
    reader module offers."""
    module = importlib.import_module(FORMATS[name])
    if not isinstance(module, Reader):
        raise TypeError(f"{module.__name__} is no reader module (FORMAT, sniff and load)")
    return FormatReader(module,
                        cast(ReadsMany, module) if hasattr(module, "load_many") else None,
                        cast(ReadsStream, module) if hasattr(module, "load_stream") else None,
                        cast(PreparesFiles, module) if hasattr(module, "prepare") else None,
                        cast(SetsAsideInDirectory, module) if hasattr(module, "redundant_in_directory") else None,
                        cast(TellsItsRecording, module) if hasattr(module, "recording") else None)


if TYPE_CHECKING:  # the type checker holds each reader module to the contract it declares
    from tracedoc.ingest.chrome import kineto, proton
    from tracedoc.ingest.hang import flight_recorder
    from tracedoc.ingest.health import nvml, telemetry
    from tracedoc.ingest.memory import memory_snapshot
    from tracedoc.ingest.ncu import gemm_ladder, ncu
    from tracedoc.ingest.nsys import nsys

    _READERS: tuple[Reader, ...] = (proton, kineto, flight_recorder, nsys, ncu, nvml, telemetry, gemm_ladder,
                                    memory_snapshot)
    _OPTIONAL: tuple[ReadsMany, ReadsStream, ReadsMany, ReadsStream, TellsItsRecording, PreparesFiles,
                     SetsAsideInDirectory] = (proton, proton, kineto, kineto, kineto, nsys, nsys)
    _STREAMED: tuple[ReadsStream, ...] = (kineto, ncu, flight_recorder, memory_snapshot, nvml, gemm_ladder)


def discover(paths: Sequence[Path], limits: Limits = Limits()) -> list[InputFile]:
    """Expand files and directories into the trace files to analyse, each with its detected format.

    A path must be a regular file or a directory: a FIFO or device would block or never end (``-`` reads standard
    input instead). In a directory, anything else is skipped, and so is an xz file whose format a plain or gzipped
    file there has too (an archived copy of a report kept beside its export), and a compressed file beside the one
    it unpacks to (``trace.json.gz`` beside ``trace.json``). A file reached under several names (a
    symbolic or hard link beside it, or a file named and also inside a directory named) is one input. Of the
    traces one process wrote at different times, a trace per cycle of the profiler's schedule, only the last is
    an input, standing for the others (tracedoc.ingest.cycles). Standard input is spooled to at most ``limits``'
    inflate cap.
    """
    found: list[InputFile] = []
    for path in paths:
        if path == STDIN:
            found.append(_from_stdin(limits.max_inflate_bytes))
        elif path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
                                and not p.name.lower().endswith(_NOT_TRACES))
            files = [f for f in (_identify(p, strict=False, in_directory=True) for p in candidates) if f is not None]
            files = _without_archives(files)
            if not files:
                from tracedoc.ingest import near_misses  # only on this error: its patterns take 2 ms to compile

                if (what := near_misses.named_directory(path)) is not None:
                    raise InputError(f"{path}: this is {what}")
                raise InputError(f"{path}: no trace files found in this directory")
            found.extend(files)
        elif not path.exists():
            raise InputError(f"{path}: no such file or directory")
        else:
            item = _identify(path, strict=True)
            assert item is not None  # strict: a file of no known format raised
            found.append(item)
    found = _distinct(found)
    return latest_cycles(found)


def _distinct(found: list[InputFile]) -> list[InputFile]:
    """Each file once: a file reached under several names (links resolved to the file they name) would otherwise
    count as one more rank. The name kept is the first that is not a symbolic link, in its own place."""
    where: dict[tuple[int, int], int] = {}
    kept: list[InputFile | None] = []
    for item in found:
        if item.data is not None:  # standard input's copy: its own file
            kept.append(item)
            continue
        info = item.path.stat()
        key = (info.st_dev, info.st_ino)
        known = kept[where[key]] if key in where else None
        if known is not None and not (known.path.is_symlink() and not item.path.is_symlink()):
            continue
        if known is not None:
            kept[where[key]] = None
        where[key] = len(kept)
        kept.append(item)
    return [item for item in kept if item is not None]


def _without_archives(files: list[InputFile]) -> list[InputFile]:
    """Set aside xz files of a format that a plain or gzipped file in the same directory has, and a compressed file
    beside the file it unpacks to (``trace.json.gz`` beside ``trace.json``, as ``gunzip -k`` leaves them): one
    trace, read once, from the plain file."""
    unpacked = {f.format for f in files if f.compression != "xz"}
    plain = {(f.path, f.format) for f in files if f.compression is None}
    return [f for f in files if (f.compression != "xz" or f.format not in unpacked)
            and not (f.compression is not None and (compressed.unpacked_name(f.path), f.format) in plain)]


def _from_stdin(cap: int | None) -> InputFile:
    """Standard input spooled to a temporary file (at most ``cap``, else the default), identified by its content."""
    # the buffer under sys.stdin is a BufferedReader (readinto), which typeshed calls a BinaryIO
    stream = cast(io.BufferedReader, sys.stdin.buffer) if sys.stdin is not None else None
    if stream is None:
        raise InputError("-: standard input is closed; pipe a trace into it (tracedoc analyze - < trace.json)")
    if stream.isatty():
        raise InputError("-: standard input is a terminal; pipe a trace into it (tracedoc analyze - < trace.json)")
    fd, name = tempfile.mkstemp(prefix=f"{_SPOOL}{os.getpid()}-")
    os.close(fd)
    spooled = Path(name)
    _sweep_spools(spooled.parent)
    try:
        compressed.spool(stream, spooled, compressed.max_stdin_bytes(cap))
        item = _identify(spooled, strict=True, name=STDIN)
    except BaseException:
        spooled.unlink(missing_ok=True)
        raise
    assert item is not None
    item.data = spooled
    weakref.finalize(item, _remove, spooled)  # the copy lives as long as the input that reads it
    return item


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


_SPOOL = "tracedoc-stdin-"  # then the process id, so that a copy whose run was killed is known (``_sweep_spools``)


def _sweep_spools(folder: Path) -> None:
    """Remove the copies of standard input in ``folder`` whose run is gone (a run killed before it could: a copy
    may be gigabytes), as the cache's partial stores are."""
    for path in folder.glob(f"{_SPOOL}*"):
        pid = path.name[len(_SPOOL):].partition("-")[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            path.unlink(missing_ok=True)


def _identify(path: Path, strict: bool, in_directory: bool = False, name: Path | None = None) -> InputFile | None:
    """Detect the format of one file from its content; None (or an error when ``strict``) if unknown. Only the
    formats whose files start as this one does (``Format.content``) are sniffed, their readers imported then.

    ``name`` is the input as the user gave it when ``path`` is a copy (standard input). In a directory, a format
    may set aside a file whose data another file there holds too (``redundant_in_directory(path, head)``, e.g.
    an Nsight Systems report beside its SQLite export).
    """
    name = name or path
    start = _start(path, name)
    kind = compressed.compression_of(start)
    head = compressed.head(path, kind, _SNIFF_BYTES, name) if kind else start
    if not head.strip():
        if strict:
            raise InputError(f"{name}: empty file")
        return None
    content = content_of(head)
    for format_name in FORMATS:
        if content not in BY_NAME[format_name].content:
            continue
        read = reader(format_name)
        if read.module.sniff(path, head):
            if in_directory and read.sets_aside is not None and read.sets_aside.redundant_in_directory(path, head):
                return None
            told = read.recorded.recording(head) if read.recorded is not None else None
            return InputFile(name, format_name, path.stat().st_size, kind, recording=told)
    if strict:
        from tracedoc.ingest import near_misses  # only on this error: its patterns take 2 ms to compile

        if (what := near_misses.named(head)) is not None:  # what a profiler wrote beside what tracedoc reads
            raise InputError(f"{name}: this is {what}")
        raise InputError(f"{name}: not a trace format tracedoc reads ({', '.join(FORMATS)})")
    return None


def _start(path: Path, name: Path) -> bytes:
    """The first bytes of a regular file; opened without blocking, so a FIFO is refused instead of waited on.

    A file of size 0 is not read: it is empty, or one of the kernel's (``/proc/kmsg``), whose reads wait for data
    or consume it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{name}: not a regular file (a pipe, socket or device); save it to a file, or "
                             "pipe it into '-' (tracedoc analyze - < trace)")
        if info.st_size == 0:
            return b""
        try:
            start = f.read(_SNIFF_BYTES)
        except OSError as exc:
            raise InputError(f"{name}: cannot read ({exc.strerror or exc})") from None
        if start is None:  # nothing to read without waiting: not a file's content
            raise InputError(f"{name}: cannot read without waiting (not a saved file)")
        return start


def load_all(store: Store, inputs: Sequence[InputFile], progress: Callable[[str], None] | None = None) -> None:
    """Load every input into the store and record the sources with their ranks: one source per input, or one per
    rank of an input that holds several (``LoadResult.parts``), numbered in input order."""
    rows: list[SourceRow] = []
    read: list[InputFile] = []  # the input each source was read from
    store.fit_threads(input_bytes=sum(i.size_bytes for i in inputs))

    def reading(index: int) -> None:
        if progress:
            item = inputs[index]
            count = f"file {index + 1} of {len(inputs)}: " if len(inputs) > 1 else ""
            progress(f"reading {count}{item.path} ({item.size_bytes / 1e6:.1f} MB)")

    with (tempfile.TemporaryDirectory(prefix="tracedoc-ingest-", dir=store.path.parent if store.path else None) as tmp,
          _naming_the_cycle_before(inputs)):
        _prepare(inputs, Path(tmp), progress)
        for batch in _batches(inputs):
            first_id = len(rows)
            if len(batch) == 1:
                reading(batch[0])
                results = [_load(store, first_id, inputs[batch[0]], Path(tmp))]
            else:
                def started(n: int, batch: list[int] = batch) -> None:
                    reading(batch[n])

                results = _load_many(store, [(first_id + n, inputs[i]) for n, i in enumerate(batch)], Path(tmp),
                                     started)
            for index, result in zip(batch, results):
                rows.extend(_source_rows(len(rows), index, inputs[index], result))
                read.extend([inputs[index]] * result.sources)
    if rows and not any(r.event_count for r in rows):
        raise InputError(f"{rows[0].path}: nothing to analyse ({rows[0].tool})")
    _check_bounds(store, read)
    ranks = assign_ranks(read, [r.reported_rank for r in rows], [r.is_part for r in rows])
    insert_sources(store.con, [replace(row, rank=rank) for row, rank in zip(rows, ranks)])
    _rank_rows(store)


@contextlib.contextmanager
def _naming_the_cycle_before(inputs: Sequence[InputFile]) -> Iterator[None]:
    """An input error of a trace judged in place of earlier cycles of its process (the last one cut short by a job
    killed as it wrote) names the cycle before it, which can be judged instead."""
    try:
        yield
    except InputError as exc:
        item = next((i for i in inputs if i.earlier and str(exc).startswith(f"{i.path}:")), None)
        if item is None:
            raise
        raise InputError(f"{exc}; the cycle before it, {item.earlier[-1]}, can be judged instead: name it") from exc


_RANKED_TABLES = ("gpu_activity", "cpu_activity", "steps", "nvtx_ranges", "memory_events")


def _rank_rows(store: Store) -> None:
    """Give the rows of the tables with a rank their source's assigned rank: the tables holding a row of another
    rank are found in one statement, and only those updated (usually none: an UPDATE per table cost a statement
    each on every run)."""
    stale = " UNION ALL ".join(
        f"SELECT '{table}' WHERE EXISTS (SELECT 1 FROM {table} t JOIN sources s ON t.source_id = s.source_id "
        f"AND t.rank <> s.rank)" for table in _RANKED_TABLES)
    for (table,) in store.con.execute(stale).fetchall():
        store.con.execute(
            f"UPDATE {table} t SET rank = s.rank FROM sources s WHERE t.source_id = s.source_id AND t.rank <> s.rank")


def _prepare(inputs: Sequence[InputFile], workdir: Path, progress: Callable[[str], None] | None) -> None:
    """Let each format that prepares its files together (``prepare``) do so for its plain inputs."""
    by_format: dict[str, list[Path]] = {}
    for item in inputs:
        if item.compression is None:
            by_format.setdefault(item.format, []).append(item.file)
    for name, paths in by_format.items():
        prepares = reader(name).prepares
        if prepares is not None and len(paths) > 1:
            if progress:
                progress(f"preparing {len(paths)} {name} inputs")
            prepares.prepare(paths, workdir)


def _source_rows(first_id: int, index: int, item: InputFile, result: LoadResult) -> list[SourceRow]:
    """The sources table's rows of one loaded input: its own, or one per rank it holds (each rank reported as the
    file names it, else None; the world size is the number of ranks in the file). ``rank`` is assigned later
    (assign_ranks), from the reported one."""
    own = SourceRow(first_id, str(item.path), item.format, world_size=result.world_size, content_key=item._digest,
                    size_bytes=item.size_bytes, event_count=result.event_count, tool=result.tool,
                    reported_rank=result.rank, input_index=index)
    if not result.parts:
        return [own]
    return [replace(own, source_id=first_id + n, event_count=part.event_count, reported_rank=part.rank, pid=part.pid)
            for n, part in enumerate(result.parts)]


def _load(store: Store, source_id: int, item: InputFile, workdir: Path) -> LoadResult:
    """Load one input with its format's reader. A compressed one is wrapped as a stream of its unpacked bytes
    (``compressed.Unpacking``, bounded): handed to the reader when it reads streams (``load_stream``), else saved
    into a plain copy that ``load`` reads; every error names the input as the user gave it (not the copy)."""
    read = reader(item.format)
    stream = _unpacking(item, store.limits.max_inflate_bytes) if item.compression else None
    plain = item.file
    from tracedoc.store.engine import duckdb
    try:
        if stream is not None and read.streamed is not None:
            return read.streamed.load_stream(store, source_id, stream, workdir, item.path)
        if stream is not None:
            plain = workdir / f"unpacked-{re.sub(r'[^A-Za-z0-9._-]', '_', item.path.name)[-80:]}"
            stream.save(plain)
        return read.module.load(store, source_id, plain, workdir)
    except compressed.InflateLimitError:
        format_max = BY_NAME[item.format].max_bytes
        if stream is None or format_max is None or stream.limit != format_max:
            raise
        raise InputError(f"{item.path}: unpacks to more than {format_max:,} bytes, larger than any "
                         f"{item.format} file") from None
    except TracedocError as exc:
        if plain == item.path:
            raise
        raise type(exc)(str(exc).replace(str(plain), str(item.path))) from None
    except duckdb.Error as exc:  # a value the store's columns cannot hold
        raise InputError(f"{item.path}: {item.format} data tracedoc cannot store ({first_line(exc)})") from None
    finally:
        if plain != item.file:
            plain.unlink(missing_ok=True)


def _batches(inputs: Sequence[InputFile]) -> list[list[int]]:
    """The inputs' indexes in reading order, consecutive plain files of a format that reads several at once
    (``load_many``: PyTorch traces, so that many small ranks are parsed together) in one batch."""
    batches: list[list[int]] = []
    for index, item in enumerate(inputs):
        if index and _together(inputs[index - 1], item):
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def _together(first: InputFile, second: InputFile) -> bool:
    """Whether two inputs can be read in one batch: plain files (not unpacked or spooled copies) of one format
    whose reader reads several at once."""
    return (first.format == second.format and first.compression is None and second.compression is None
            and first.data is None and second.data is None and reader(first.format).many is not None)


def _load_many(store: Store, batch: list[tuple[int, InputFile]], workdir: Path,
               started: Callable[[int], None]) -> list[LoadResult]:
    """Load a batch of plain inputs of one format together (``load_many``)."""
    many = reader(batch[0][1].format).many
    assert many is not None  # _together put them in one batch
    from tracedoc.store.engine import duckdb
    try:
        return many.load_many(store, [(source_id, item.file) for source_id, item in batch], workdir, started)
    except duckdb.Error as exc:  # a value the store's columns cannot hold
        names = ", ".join(str(item.path) for _, item in batch)
        raise InputError(f"{names}: {batch[0][1].format} data tracedoc cannot store ({first_line(exc)})") from None


def _unpacking(item: InputFile, cap: int | None) -> compressed.Unpacking:
    """The compressed input as a stream, to at most the inflate cap (``cap``, else the default for its size) or
    the format's ``max_bytes`` when it declares a smaller one."""
    assert item.compression is not None
    limit = compressed.max_inflate_bytes(item.size_bytes, cap)
    format_max = BY_NAME[item.format].max_bytes
    return compressed.Unpacking(item.file, item.compression, min(limit, format_max) if format_max else limit,
                                item.path)


_OUT_OF_BOUNDS = {
    "times": "timestamps or durations beyond any profiler clock (more than 2^62 ns, 146 years)",
    "devices": f"GPU work on a device whose id is missing, negative or beyond 32 bits, or on more than "
               f"{MAX_DEVICES:,} devices",
    "correlations": "one correlation id on more than two CUDA calls (it names the call that launched GPU work)",
}


def _check_bounds(store: Store, inputs: Sequence[InputFile]) -> None:
    """Refuse a source whose values no profiler writes and the analyses cannot bound:
    - timeline times outside [-2^61, 2^62) ns or durations outside [0, 2^62) ns: no profiler clock reads them, and
      analyses adding and subtracting them would overflow 64 bits;
    - GPU work without a device id of 0 to 2^31 - 1, or on more than MAX_DEVICES devices: work without an id fell
      out of some analyses and not others, and per-device analyses grew with the devices (5,000 devices in a 9 MB
      trace took 17 GB);
    - a correlation id on more than two CUDA runtime or driver calls (a runtime call and the driver call it made
      may share one): each launch joins its GPU work by it, so the joins grew with the square of the calls sharing
      one (a 12 MB trace whose ids were all 1 took 20 GB); no sample has a correlation id on two calls.
    One statement: the checks' scans as one UNION ALL, the first source of the first problem named."""
    checks = []
    for table, dur in _TIMED_TABLES.items():
        bad_dur = f" OR {dur} < 0 OR {dur} >= {_MAX_NS}" if dur else ""
        checks.append(f"SELECT 'times', source_id FROM {table} WHERE ts_ns < {_MIN_NS} OR ts_ns >= {_MAX_NS}{bad_dur}")
    checks.append(f"SELECT 'devices', source_id FROM gpu_activity GROUP BY source_id "
                  f"HAVING count(*) FILTER (WHERE device IS NULL OR device < 0) > 0 "
                  f"OR count(DISTINCT device) > {MAX_DEVICES}")
    # A correlation id repeats only in a block of 64 ids holding more calls than ids (a mask of the ids seen in it
    # counts them): the calls are grouped per id only in such blocks, not all of them (0.28 against 0.04 s on the
    # 199 MB export, whose ids never repeat).
    checks.append("SELECT 'correlations', source_id FROM calls SEMI JOIN repeats USING (source_id, block) "
                  "GROUP BY source_id, correlation_id HAVING count(*) > 2")
    calls = ("calls AS (SELECT source_id, correlation_id, correlation_id >> 6 AS block FROM cpu_activity "
             "WHERE kind IN ('runtime', 'driver') AND correlation_id IS NOT NULL)")
    repeats = ("repeats AS MATERIALIZED (SELECT source_id, block FROM calls GROUP BY ALL "
               "HAVING count(*) > bit_count(bit_or(1::UBIGINT << (correlation_id & 63)::UBIGINT)))")
    # as one UNION ALL the times' checks plan in a quarter of the time of a LIMIT 1 subquery per table (3 against
    # 13 ms on decode-eager), and name the first such source whatever order the rows are read in
    bad = store.con.execute(f"WITH {calls}, {repeats} SELECT problem, min(source_id) FROM "
                            f"({' UNION ALL '.join(checks)}) AS c(problem, source_id) GROUP BY problem").fetchall()
    if bad:
        problem, source = min(bad, key=lambda row: list(_OUT_OF_BOUNDS).index(row[0]))
        raise InputError(f"{inputs[source].path}: {_OUT_OF_BOUNDS[problem]}: a corrupt or edited trace")


def assign_ranks(inputs: Sequence[InputFile], reported: Sequence[int | None],
                 parts: Sequence[bool] | None = None) -> list[int | None]:
    """Rank from the trace itself, else from the file name (``rank3``), else the input's position among the ranked
    (where no input of its format names one: a trace naming none beside a job's ranks is refused).

    ``inputs`` has one entry per source: an input that holds several ranks (``parts``: True for each of them) is
    named as often, and its ranks are never read from its name. Two sources of one format may not claim the same
    rank, unless the format keeps several files per rank and its analyses choose among them (``several_per_rank``:
    automatic and on-demand flight-recorder dumps). Inputs that cover a whole host (``per_host``: GPU health
    snapshots and telemetry) belong to no rank: None.
    """
    parts = parts or [False] * len(inputs)
    per_host = [BY_NAME[item.format].per_host for item in inputs]
    ranked_count = per_host.count(False)
    given = [rank if rank is not None or part else rank_in_name(item.path)
             for item, rank, part in zip(inputs, reported, parts)]
    _refuse_unranked_beside_ranked(inputs, given)
    ranks: list[int | None] = []
    position = 0
    for rank, host in zip(given, per_host):
        if host:
            ranks.append(None)
            continue
        ranks.append(rank if rank is not None else (position if ranked_count > 1 else 0))
        position += 1
    seen: dict[tuple[str, int], Path] = {}
    for item, rank in zip(inputs, ranks):
        if rank is None or BY_NAME[item.format].several_per_rank:
            continue
        if (item.format, rank) in seen:
            where = f"{item.path} twice" if seen[item.format, rank] == item.path else \
                f"{seen[item.format, rank]} and {item.path}"
            raise InputError(f"two traces claim rank {rank}: {where}")
        seen[item.format, rank] = item.path
    return ranks


def _refuse_unranked_beside_ranked(inputs: Sequence[InputFile], given: Sequence[int | None]) -> None:
    """Refuse timelines that name no rank (none in the trace, none in the file name) beside timelines of their
    format that do: they were recorded outside that job (a baseline left beside a job's ranks), and numbering them
    by their position made them more of the job's ranks, or second traces of some (one line, exit 2)."""
    for fmt in dict.fromkeys(item.format for item in inputs):
        if BY_NAME[fmt].kind != TIMELINE:
            continue
        mine = [(item, rank) for item, rank in zip(inputs, given) if item.format == fmt]
        ranked = sorted({rank for _, rank in mine if rank is not None})
        unranked = [item for item, rank in mine if rank is None]
        if ranked and unranked:
            others = len(mine) - len(unranked)
            what = f"{unranked[0].path} names" if len(unranked) == 1 else \
                f"{unranked[0].path} and {len(unranked) - 1} more name"
            raise InputError(
                f"{what} no rank (none in the trace, none in the file name) beside {others} "
                f"trace{'s' if others > 1 else ''} of a job that do{'' if others > 1 else 'es'} "
                f"({'ranks' if len(ranked) > 1 else 'rank'} {', '.join(map(str, ranked[:8]))}"
                f"{', …' if len(ranked) > 8 else ''}): {'it is a run' if len(unranked) == 1 else 'runs'} of "
                f"{'its' if len(unranked) == 1 else 'their'} own, not the job's ranks; analyse "
                f"{'it' if len(unranked) == 1 else 'them'} apart")
