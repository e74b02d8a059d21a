"""What every input format is (``Format``, one entry each in ``FORMATS``), what its reader module offers
(``Reader`` and the optional members' protocols) and what it hands back about a file it loaded (``load`` →
LoadResult). The store's choice of analyses, scale-out, the diff's side kinds and the checks of how a trace was
recorded read ``FORMATS`` rather than lists of their own. Imports nothing of tracedoc when run, so that the store
may read it."""

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


# What a run of a format's inputs is: a diff compares two runs of one kind (tracedoc.kinds).
TIMELINE, KERNEL_PROFILE, HANG_DUMPS, HEALTH = "timeline", "kernel profile", "hang dumps", "GPU health records"


@dataclass(frozen=True)
class Format:
    """One input format: ``name`` (``sources.format``), its reader module (imported on first use), its name for
    people, its ``kind``; ``per_host``: a file covers a whole host, not a rank (GPU health, allocator snapshots);
    ``several_per_rank``: a rank may leave several files, which its analyses choose among (flight-recorder dumps);
    ``max_bytes``: the largest file the format can be (a compressed one is unpacked no further), None
    for no limit of its own."""

    name: str
    module: str
    title: str
    kind: str
    per_host: bool = False
    several_per_rank: bool = False
    max_bytes: int | None = None

    @property
    def distributable(self) -> bool:
        """Whether a distributed run splits its inputs by rank: per-rank timelines and flight-recorder dumps."""
        return self.kind in (TIMELINE, HANG_DUMPS) and not self.per_host


# Every format, in the order files are sniffed.
FORMATS: tuple[Format, ...] = (
    Format("torch", "tracedoc.ingest.kineto", "PyTorch profiler", TIMELINE),
    # a rank may leave several dumps side by side (the automatic one and on-demand ones); the hang analyses use
    # one per rank (analyses/hang/dumps.sql), so two dumps claiming one rank are not an error
    # larger than 1 GiB is no dump: the ring buffer keeps a few MB
    Format("flight_recorder", "tracedoc.ingest.flight_recorder", "flight recorder", HANG_DUMPS,
           several_per_rank=True, max_bytes=1 << 30),
    Format("nsys", "tracedoc.ingest.nsys", "Nsight Systems", TIMELINE),
    Format("ncu", "tracedoc.ingest.ncu", "Nsight Compute", KERNEL_PROFILE),
    # the largest NVML recording (tracedoc/health/replay.py reads its limit here)
    Format("nvml", "tracedoc.ingest.nvml", "NVML", HEALTH, per_host=True, max_bytes=32 << 20),
    Format("telemetry", "tracedoc.ingest.telemetry", "GPU telemetry", HEALTH, per_host=True),
    # the ladder writes a few KB; anything this large is not one of its files
    Format("gemm_ladder", "tracedoc.ingest.gemm_ladder", "GEMM ladder", HEALTH, per_host=True,
           max_bytes=16 << 20),
    # no rank of its own: joined with the trace of its run by time and address (analyses/memory)
    # the reader's own limit (TRACEDOC_MAX_SNAPSHOT_BYTES) applies after unpacking
    Format("memory_snapshot", "tracedoc.ingest.memory_snapshot", "allocator snapshot", HEALTH, per_host=True,
           max_bytes=8 << 30),
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
