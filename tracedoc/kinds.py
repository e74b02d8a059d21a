"""What kind of run an input is, from its format's declared kind (tracedoc/formats.py): a timeline (PyTorch
profiler, Nsight Systems), a kernel profile (Nsight Compute) or hang dumps (NCCL flight recorder); GPU health
records (NVML snapshots, telemetry), allocator snapshots and kernel benchmarks (the GEMM ladder's timings) ride
along with any of them. A diff compares two runs of one kind; a directory whose inputs cannot be one job's ranks
(a timeline beside a kernel profile, an Nsight Systems run beside a PyTorch trace, PyTorch traces that name no
rank and run no collective) says so."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tracedoc.formats import BY_NAME, HANG_DUMPS, HEALTH, KERNEL_PROFILE, KINDS, RUN_KINDS, TIMELINE

__all__ = ["HANG_DUMPS", "HEALTH", "KERNEL_PROFILE", "RUN_KINDS", "TIMELINE", "kind_of", "mixed_runs", "runs_apart",
           "runs_naming_no_rank"]


def kind_of(formats: Sequence[str]) -> str:
    """What inputs of these formats are: the first of the kinds (tracedoc/formats.py KINDS) among them, so a run's
    kind whatever else rides along (e.g. telemetry beside a timeline); GPU health records for none or an unknown
    format."""
    present = {BY_NAME[f].kind if f in BY_NAME else HEALTH for f in formats}
    return next((kind for kind in KINDS if kind in present), HEALTH)


def mixed_runs(inputs: Iterable[tuple[str, int | None]]) -> str | None:
    """For inputs (format, rank) that cannot be the ranks of one job — a kernel profile beside a timeline or hang
    dumps, or timelines of two formats (an Nsight Systems run beside a PyTorch trace: two recordings, of one
    program or of two) — what each is: "a timeline (PyTorch profiler: rank 1) and a kernel profile (Nsight
    Compute: rank 0)"; else None. Health records, allocator snapshots and benchmarks ride along with anything
    (kinds other than RUN_KINDS), and flight-recorder dumps may come from the job whose traces lie beside them."""
    by_kind: dict[str, dict[str, set[int]]] = {}
    for fmt, rank in inputs:
        kind = kind_of([fmt])
        if kind in RUN_KINDS:
            by_kind.setdefault(kind, {}).setdefault(fmt, set()).update([] if rank is None else [rank])
    timelines = len(by_kind.get(TIMELINE, {}))
    if not ((KERNEL_PROFILE in by_kind and len(by_kind) >= 2) or timelines > 1):
        return None
    parts = []
    for kind in RUN_KINDS:
        formats = [f"{BY_NAME[fmt].title if fmt in BY_NAME else fmt}: {_ranks_text(ranks)}"
                   for fmt, ranks in sorted(by_kind.get(kind, {}).items())]
        article = "an" if kind[0] in "aeiou" else "a"
        # timelines of two formats are two recordings, each said apart; the formats of one other kind together
        parts += [f"{article} {kind} ({text})" for text in formats] if kind == TIMELINE and timelines > 1 \
            else [f"{article} {kind} ({'; '.join(formats)})"] if formats else []
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def runs_naming_no_rank(inputs: Iterable[tuple[str, bool]]) -> str | None:
    """For inputs (format, names its rank) where several timelines of a format whose files name their rank in a
    distributed job (``world_size``: the PyTorch profiler's distributedInfo) all name none, by header or by file
    name — traces recorded outside any distributed job, each a run of its own, such as a baseline beside its fix —
    what they are: "2 timelines (PyTorch profiler) that name no rank (no distributedInfo of several ranks, no rank
    in their file names)"; else None. A trace of a world of one names none (tracedoc.ingest.chrome.kineto)."""
    counts: dict[str, list[bool]] = {}
    for fmt, named in inputs:
        if fmt in BY_NAME and BY_NAME[fmt].kind == TIMELINE and BY_NAME[fmt].world_size:
            counts.setdefault(fmt, []).append(named)
    unranked = [(fmt, len(named)) for fmt, named in counts.items() if len(named) > 1 and not any(named)]
    if not unranked:
        return None
    fmt, count = unranked[0]
    return (f"{count} timelines ({BY_NAME[fmt].title}) that name no rank (no distributedInfo of several ranks, no "
            "rank in their file names)")


def runs_apart(spans: Iterable[tuple[str, int, int]]) -> str | None:
    """For timelines (format, start, end of their host activity, ns on one clock) of which some never overlap the
    others in time — the ranks of one job record at once, separate runs one after another (a capture before a fix
    and one after it, in one folder) — what they are: "4 timelines (Nsight Systems) recorded at 3 separate times";
    else None."""
    by_format: dict[str, list[tuple[int, int]]] = {}
    for fmt, start, end in spans:
        by_format.setdefault(fmt, []).append((start, end))
    for fmt, bounds in sorted(by_format.items()):
        times, latest_end = 0, None
        for start, end in sorted(bounds):
            if latest_end is None or start >= latest_end:
                times += 1
            latest_end = end if latest_end is None else max(latest_end, end)
        if times > 1:
            title = BY_NAME[fmt].title if fmt in BY_NAME else fmt
            return (f"{len(bounds)} timelines ({title}) recorded at {times} separate times (their host activity "
                    "never overlaps, where a job's ranks record at once)")
    return None


def _ranks_text(ranks: set[int]) -> str:
    """'rank 1', 'ranks 0, 2'."""
    ordered = sorted(ranks)
    return ("rank " if len(ordered) == 1 else "ranks ") + ", ".join(str(r) for r in ordered) if ordered else "no rank"
