"""What every input format is and what it can give, declared once (``Format``, one entry each in ``FORMATS``).

A format names its reader by module path (``Format.module``, held to ``tracedoc.ingest.base.Reader`` and imported
by ingest on first use), says what kind of run its files are (``kind``) and what its files can hold: operator
shapes, the job's size, memory events, host ranges, Python stacks, and how to record it. Ingest, the store's choice
of analyses (the table ``input_formats``, tracedoc.store.modules), scale-out, the run kinds (tracedoc.kinds),
efficiency, memory, the recording advice and the pages' empty states read these declarations rather than format
names. Imports nothing of tracedoc, so that every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

# What a run of a format's inputs is: a diff compares two runs of one kind (tracedoc.kinds). The first three are
# runs of their own (RUN_KINDS); the others ride along with any run (health records, allocator snapshots, kernel
# benchmarks such as the GEMM ladder's timings).
TIMELINE, KERNEL_PROFILE, HANG_DUMPS = "timeline", "kernel profile", "hang dumps"
HEALTH, ALLOCATOR_SNAPSHOTS, KERNEL_BENCHMARKS = "GPU health records", "allocator snapshots", "kernel benchmarks"
RUN_KINDS: tuple[str, ...] = (TIMELINE, KERNEL_PROFILE, HANG_DUMPS)
KINDS: tuple[str, ...] = (*RUN_KINDS, HEALTH, ALLOCATOR_SNAPSHOTS, KERNEL_BENCHMARKS)

# What a format's files start with (``Format.content``), told apart by ingest from their first bytes before any
# reader is asked: a JSON object or array, a pickle, an SQLite database, a Parquet file, or anything else (text
# such as CSV, or a binary report of a profiler's own).
JSON, PICKLE, SQLITE, PARQUET, OTHER_BYTES = "json", "pickle", "sqlite", "parquet", "other"
CONTENTS: tuple[str, ...] = (JSON, PICKLE, SQLITE, PARQUET, OTHER_BYTES)

# What a format's memory events count (Format.memory_events): the caching allocator's tensors and its reserve,
# or memory taken from CUDA.
ALLOCATOR, CUDA = "allocator", "cuda"
# What a format's host ranges are (Format.host_ranges): the PyTorch operators its profiler records around every
# call, or the NVTX ranges a program emits.
PYTORCH_OPERATORS, NVTX = "pytorch operators", "nvtx"


@dataclass(frozen=True)
class Format:
    """One input format: ``name`` (``sources.format``), its reader module, its name for people, its ``kind``;
    ``content``, what its files start with (CONTENTS: only files that start so are offered to its reader's sniff,
    so that telling a file's format imports no reader that cannot read it); ``per_host``: a file covers a whole
    host, not a rank (GPU health, allocator snapshots); ``several_per_rank``: a rank may leave several files,
    which its analyses choose among (flight-recorder dumps); ``max_bytes``: the largest file the format can be (a
    compressed one is unpacked no further), None for no limit of its own.

    What its files can give (each a column of ``input_formats``, which the analyses read): ``operator_shapes``,
    the input shapes of the operators (efficiency counts FLOPs from them); ``world_size``, the job's size in the
    file's header (the summary's world_size); ``memory_events``, what its memory events count (ALLOCATOR, CUDA;
    None: it records none); ``host_ranges``, what its host ranges are (PYTORCH_OPERATORS, NVTX; None: none);
    ``python_stacks``, the Python frames of the host; ``how_to_record``, how to record its GPU activity, the advice
    a report gives a timeline that holds none; ``profiler_k`` and ``profiler_k_least``, what its recording tool
    costs the host per event, as a multiple of the trace's median kernel-launch call, for the estimate and at the
    least (efficiency.observer, calibrated as docs/efficiency.md says; None: not modelled)."""

    name: str
    module: str
    title: str
    kind: str
    content: tuple[str, ...]
    per_host: bool = False
    several_per_rank: bool = False
    max_bytes: int | None = None
    operator_shapes: bool = False
    world_size: bool = False
    memory_events: str | None = None
    host_ranges: str | None = None
    python_stacks: bool = False
    how_to_record: str | None = None
    profiler_k: float | None = None
    profiler_k_least: float | None = None

    @property
    def distributable(self) -> bool:
        """Whether a distributed run splits its inputs by rank: per-rank timelines and flight-recorder dumps."""
        return self.kind in (TIMELINE, HANG_DUMPS) and not self.per_host


# The capabilities, in the order of input_formats' columns after (format, kind).
CAPABILITIES: tuple[str, ...] = tuple(f.name for f in fields(Format)
                                      if f.name not in ("name", "module", "title", "kind", "content", "per_host",
                                                        "several_per_rank", "max_bytes"))

# Every format, in the order files are sniffed.
FORMATS: tuple[Format, ...] = (
    # Triton's Proton profiler in trace mode: GPU kernels alone, under the scopes the program opened; sniffed before
    # torch, whose Chrome-trace JSON it shares
    Format("proton", "tracedoc.ingest.chrome.proton", "Proton profiler", TIMELINE, (JSON,),
           how_to_record='`proton.start(name, data="trace")` before the steps, each step in '
                         '`with proton.scope(f"step_{i}")`, then `proton.finalize()`'),
    Format("torch", "tracedoc.ingest.chrome.kineto", "PyTorch profiler", TIMELINE, (JSON,), operator_shapes=True,
           world_size=True, memory_events=ALLOCATOR, host_ranges=PYTORCH_OPERATORS, python_stacks=True,
           how_to_record="pass `activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]` to `torch.profiler.profile`",
           profiler_k=0.55, profiler_k_least=0.3),
    # a rank may leave several dumps side by side (the automatic one and on-demand ones); the hang analyses use
    # one per rank (analyses/hang/dumps.sql), so two dumps claiming one rank are not an error
    # larger than 1 GiB is no dump: the ring buffer keeps a few MB
    # its world size is its largest process group's, not the job's
    Format("flight_recorder", "tracedoc.ingest.hang.flight_recorder", "flight recorder", HANG_DUMPS,
           (PICKLE, JSON), several_per_rank=True, max_bytes=1 << 30),
    # needs a file: its SQLite export is opened by path, its report read by `nsys export`; a compressed one is
    # unpacked into the work directory (every other format but telemetry reads a compressed file as it unpacks)
    Format("nsys", "tracedoc.ingest.nsys.nsys", "Nsight Systems", TIMELINE, (SQLITE, OTHER_BYTES),
           memory_events=CUDA, host_ranges=NVTX,
           how_to_record="capture with `nsys profile --trace=cuda,nvtx,osrt`", profiler_k=1.1, profiler_k_least=0.6),
    Format("ncu", "tracedoc.ingest.ncu.ncu", "Nsight Compute", KERNEL_PROFILE, (OTHER_BYTES,)),
    # the largest NVML recording (tracedoc/health/replay.py reads its limit here)
    Format("nvml", "tracedoc.ingest.health.nvml", "NVML", HEALTH, (JSON,), per_host=True, max_bytes=32 << 20),
    # Parquet needs a file it can seek in: a compressed one is unpacked into the work directory
    Format("telemetry", "tracedoc.ingest.health.telemetry", "GPU telemetry", HEALTH, (PARQUET,), per_host=True),
    # the ladder writes a few KB; anything this large is not one of its files
    Format("gemm_ladder", "tracedoc.ingest.ncu.gemm_ladder", "GEMM ladder", KERNEL_BENCHMARKS, (JSON,), per_host=True,
           max_bytes=16 << 20),
    # no rank of its own: joined with the trace of its run by time and address (analyses/memory)
    # the reader's own limit (TRACEDOC_MAX_SNAPSHOT_BYTES) counts a compressed one's bytes as they unpack
    Format("memory_snapshot", "tracedoc.ingest.memory.memory_snapshot", "allocator snapshot", ALLOCATOR_SNAPSHOTS,
           (PICKLE,), per_host=True, max_bytes=8 << 30),
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}


def of_kind(kind: str) -> frozenset[str]:
    """The names of the formats of ``kind``."""
    return frozenset(f.name for f in FORMATS if f.kind == kind)


def giving(capability: str) -> frozenset[str]:
    """The names of the formats whose files can give ``capability`` (one of CAPABILITIES)."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}")
    return frozenset(f.name for f in FORMATS if getattr(f, capability))
