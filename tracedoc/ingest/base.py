"""What every input format is (``Format``, one entry each in ``FORMATS``) and what its reader hands back about a
file it loaded (``load`` → LoadResult). The store's choice of analyses, scale-out, the diff's side kinds and the
checks of how a trace was recorded read ``FORMATS`` rather than lists of their own. Imports nothing of tracedoc,
so that the store may read it."""

from __future__ import annotations

from dataclasses import dataclass


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


# What a run of a format's inputs is: a diff compares two runs of one kind (tracedoc.kinds).
TIMELINE, KERNEL_PROFILE, HANG_DUMPS, HEALTH = "timeline", "kernel profile", "hang dumps", "GPU health records"


@dataclass(frozen=True)
class Format:
    """One input format: ``name`` (``sources.format``), its reader module (imported on first use), its name for
    people, its ``kind``; ``per_host``: a file covers a whole host, not a rank (GPU health, allocator snapshots);
    ``several_per_rank``: a rank may leave several files, which its analyses choose among (flight-recorder dumps);
    ``groups``: the analysis groups made from its tables alone (other groups read the timelines every trace
    format has); ``max_bytes``: the largest file the format can be (a compressed one is unpacked no further), None
    for no limit of its own."""

    name: str
    module: str
    title: str
    kind: str
    per_host: bool = False
    several_per_rank: bool = False
    groups: tuple[str, ...] = ()
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
           several_per_rank=True, groups=("hang",), max_bytes=1 << 30),
    Format("nsys", "tracedoc.ingest.nsys", "Nsight Systems", TIMELINE),
    Format("ncu", "tracedoc.ingest.ncu", "Nsight Compute", KERNEL_PROFILE, groups=("ncu",)),
    # the largest NVML recording (tracedoc/health/replay.py reads its limit here)
    Format("nvml", "tracedoc.ingest.nvml", "NVML", HEALTH, per_host=True, groups=("health",), max_bytes=32 << 20),
    Format("telemetry", "tracedoc.ingest.telemetry", "GPU telemetry", HEALTH, per_host=True, groups=("health",)),
    # the ladder writes a few KB; anything this large is not one of its files
    Format("gemm_ladder", "tracedoc.ingest.gemm_ladder", "GEMM ladder", HEALTH, per_host=True, groups=("ncu",),
           max_bytes=16 << 20),
    # no rank of its own: joined with the trace of its run by time and address (analyses/memory)
    # the reader's own limit (TRACEDOC_MAX_SNAPSHOT_BYTES) applies after unpacking
    Format("memory_snapshot", "tracedoc.ingest.memory_snapshot", "allocator snapshot", HEALTH, per_host=True,
           groups=("memory",), max_bytes=8 << 30),
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
