"""What a format's reader module offers (``Reader`` and the optional members' protocols) and what it hands back
about a file it loaded (``load`` → LoadResult). The formats themselves, and the module path of each one's reader,
are declared in tracedoc/formats.py (``FORMATS``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tracedoc.store import Store


@dataclass(frozen=True)
class Part:
    """One rank of a file that holds several (one Nsight Systems report of a whole job): its process and the rank
    the file names for it (MPI), else None."""

    pid: int
    rank: int | None
    event_count: int


@dataclass(frozen=True)
class Recording:
    """Which process wrote a trace and when, as the trace's first bytes tell (``TellsItsRecording``): the process
    (its host pid), the rank the trace names (distributedInfo), and when one of its first host events started (µs on
    the process's clock). Traces of one process and rank that started at different times are cycles of one
    profiler's schedule (tracedoc.ingest.cycles)."""

    pid: int
    rank: int | None
    start_us: float


@dataclass
class LoadResult:
    """What one loaded file told about itself: the rank it names (None: none), the job's size when it says so,
    how many events it held and the tool that wrote it. ``parts``: when the file holds several ranks, one Part
    each, in rank order, their rows written under consecutive source ids from the one the reader was given."""

    rank: int | None
    world_size: int | None
    event_count: int
    tool: str
    parts: tuple[Part, ...] = ()

    @property
    def sources(self) -> int:
        """How many source ids the file's rows took."""
        return max(1, len(self.parts))


@runtime_checkable
class Reader(Protocol):
    """A format's reader module (``Format.module``), as ingest calls it: ``FORMAT`` (the format's name),
    ``sniff(path, head)`` (``head``: the file's first MiB, unpacked when compressed) and ``load``, which reads one
    plain file into the store under ``source_id`` (``workdir``: room for temporary files). A module may also have
    the members of ``ReadsMany``, ``ReadsStream``, ``PreparesFiles`` and ``SetsAsideInDirectory``; ingest looks
    them up once per format (``tracedoc.ingest.reader``)."""

    FORMAT: str

    def sniff(self, path: Path, head: bytes) -> bool: ...

    def load(self, store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult: ...


class ReadsMany(Protocol):
    """Optional: read several plain files at once, each under its source id (PyTorch ranks, parsed together);
    ``started(i)`` is told as the i-th begins."""

    def load_many(self, store: Store, sources: Sequence[tuple[int, Path]], workdir: Path,
                  started: Callable[[int], None] | None = None) -> list[LoadResult]: ...


class ByteStream(Protocol):
    """An input's bytes as a stream: a compressed file as it unpacks (``compressed.Unpacking``, which stops past the
    inflate cap). ``compression``: the container's format ('gzip', 'xz'); ``chunks()`` gives the bytes in order,
    once; ``size_hint`` is the unpacked size the container states (untrusted: for sizing work only), None when it
    states none; ``head(size)`` the first bytes, read apart; ``save(out)`` writes them all into a file, for a reader
    that needs one."""

    @property
    def compression(self) -> str: ...

    @property
    def size_hint(self) -> int | None: ...

    def chunks(self) -> Iterator[bytes]: ...

    def head(self, size: int) -> bytes: ...

    def save(self, out: Path) -> None: ...


class ReadsStream(Protocol):
    """Optional: read a file from the stream of its bytes (a gzip or xz file as it unpacks) instead of from an
    unpacked copy; errors name the input as the user gave it (``name``)."""

    def load_stream(self, store: Store, source_id: int, stream: ByteStream, workdir: Path,
                    name: Path) -> LoadResult: ...


class PreparesFiles(Protocol):
    """Optional: work on all of a format's plain files before any is loaded (Nsight Systems reports exported in
    parallel into ``workdir``, where ``load`` finds them)."""

    def prepare(self, paths: Sequence[Path], workdir: Path) -> None: ...


class SetsAsideInDirectory(Protocol):
    """Optional: whether a file found in a directory holds data another file there holds too (an Nsight Systems
    report beside its SQLite export), so that only the other is read."""

    def redundant_in_directory(self, path: Path, head: bytes) -> bool: ...


class TellsItsRecording(Protocol):
    """Optional: which process wrote a file and when, from its first bytes (``head``, unpacked), or None where they
    do not say; files of one process written at different times are cycles of one recording (a PyTorch trace per
    cycle of the profiler's schedule), of which the last is judged."""

    def recording(self, head: bytes) -> Recording | None: ...
