"""One side of a diff: what the user named (traces, a cached store, a saved JSON report) read into a report plus
the kernel table the comparison matches kernels on.

Traces are analysed as ``tracedoc analyze`` does (through the cache); a ``*.duckdb`` store is analysed as it is; a
saved JSON report (``tracedoc analyze --format json``) is taken as it is. From a store every kernel of the judged
work is counted (``gpu_judged_kernels``: those launched in the steady steps, so work queued before the window and
the warm-up's are not counted per step); a saved report keeps only each rank's top kernels
(``metrics.top_kernels``), so its kernel table is partial, and the diff says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracedoc.api import build_report, kept_report, load_report
from tracedoc.errors import InputError
from tracedoc.ingest import InputFile, discover
from tracedoc.kinds import HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE, kind_of
from tracedoc.options import AnalysisOptions
from tracedoc.report import Report
from tracedoc.report_cache import cached_rows, keep_report, keep_rows
from tracedoc.saved import looks_like_report, open_complete_store, read_report
from tracedoc.store import Store
from tracedoc.store.cache import store_location

_KERNELS = "kernels"  # the name the kernel table is kept under beside a side's report

__all__ = ["HANG_DUMPS", "HEALTH", "KERNEL_PROFILE", "TIMELINE", "Side", "Source", "check_kinds", "kind_of",
           "load_side", "resolve_side"]


@dataclass
class Source:
    """What one side names, resolved but not analysed yet: traces to ingest, a cached store, or a saved report.
    Its formats are known already, so two sides of different kinds are refused before any analysis."""

    label: str
    formats: list[str]
    inputs: list[InputFile] = field(default_factory=list)
    store_path: Path | None = None
    report: Report | None = None

    @property
    def kind(self) -> str:
        return kind_of(self.formats)


def resolve_side(path: Path) -> Source:
    """Decide what ``path`` is: a saved JSON report, a ``*.duckdb`` store, or traces (a file or a directory of
    ranks); raises InputError for what cannot be read."""
    label = str(path)
    if path.is_file() and path.suffix == ".json" and looks_like_report(path):
        report = read_report(path)
        return Source(label, sorted({i.format for i in report.inputs}), report=report)
    if path.is_file() and path.suffix == ".duckdb":
        with open_complete_store(path) as store:
            formats = [r["format"] for r in store.query("SELECT DISTINCT format FROM sources ORDER BY format")]
        return Source(label, formats, store_path=path)
    inputs = discover([path])
    return Source(label, sorted({i.format for i in inputs}), inputs=inputs)


@dataclass
class Side:
    """A side of the diff: where it came from, its report, and its kernels.

    ``kernels`` rows are {rank, name, category, grid, block, count, total_ms}; ``kernels_complete`` is false when
    they are only the top kernels a saved report kept.
    """

    label: str
    report: Report
    kernels: list[dict[str, Any]] = field(default_factory=list)
    kernels_complete: bool = True
    source: str = "traces"  # traces | store | saved report

    @property
    def formats(self) -> list[str]:
        return sorted({i.format for i in self.report.inputs})

    @property
    def kind(self) -> str:
        return kind_of(self.formats)

    @property
    def ranks(self) -> int:
        return len({i.rank for i in self.report.inputs if i.rank is not None}) or 1

    def describe(self) -> str:
        """'samples/ddp-overlap (torch, 2 ranks)'."""
        ranks = self.ranks
        return f"{self.label} ({', '.join(self.formats) or 'no inputs'}, {ranks} rank{'s' if ranks != 1 else ''})"


def check_kinds(before: Source | Side, after: Source | Side) -> None:
    """Refuse two sides that do not compare: of different kinds, or of kinds without steps or kernels."""
    if before.kind != after.kind:
        raise InputError(f"BEFORE is a {before.kind} ({', '.join(before.formats)}) and AFTER a {after.kind} "
                         f"({', '.join(after.formats)}): diff compares two runs of one kind")
    if before.kind not in (TIMELINE, KERNEL_PROFILE):
        raise InputError(f"both sides are {before.kind}: they hold no steps or kernels to compare; "
                         "analyze each with tracedoc analyze")


def load_side(side: Source | Path, options: AnalysisOptions | None = None, cache_dir: Path | None = None,
              use_cache: bool = True) -> Side:
    """Read one side (a path, or one resolved already): a saved report as it is (refused with ``options`` that
    need the traces), a store analysed, traces ingested through the cache (as ``tracedoc analyze`` does) and
    analysed, by ``options`` (None: the defaults)."""
    options = AnalysisOptions() if options is None else options
    source = side if isinstance(side, Source) else resolve_side(side)
    if source.report is not None:
        options.refuse_saved(source.label)
        return Side(source.label, source.report, _top_kernels(source.report), kernels_complete=False,
                    source="saved report")
    if source.store_path is not None:
        with open_complete_store(source.store_path, options.limits) as store:
            return Side(source.label, build_report(store, options), _kernels(store), source="store")
    return _traces_side(source, options, store_location(cache_dir, use_cache))


def _traces_side(source: Source, options: AnalysisOptions, cache_dir: Path | None) -> Side:
    """A side of traces: analysed (through the cache in ``cache_dir``; None: in memory), or with a cache, read back
    from the report and kernels kept beside the store by an earlier diff of the same traces and options
    (tracedoc.report_cache), which make the same side."""
    kept: tuple[Path, str] | None = None
    if cache_dir is not None:
        kept, report = kept_report(source.inputs, cache_dir, options)
        if report is not None and (kernels := cached_rows(*kept, _KERNELS)) is not None:
            return Side(source.label, report, kernels)
    store, report = load_report(source.inputs, cache_dir, options)
    try:
        side = Side(source.label, report, _kernels(store))
    finally:
        store.close()
    if kept is not None:
        keep_report(*kept, report)
        keep_rows(*kept, _KERNELS, side.kernels)
    return side


def _kernels(store: Store) -> list[dict[str, Any]]:
    """Every kernel of the store's judged work (gpu.kernels' ``gpu_judged_kernels``); none for a store without a GPU
    timeline table."""
    if not store.scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = 'gpu_activity'"):
        return []
    store.include("gpu.kernels")
    return [{**row, "total_ms": float(row["total_ms"] or 0.0)} for row in store.query("FROM gpu_judged_kernels")]


def _top_kernels(report: Report) -> list[dict[str, Any]]:
    """The kernels a saved report kept (each rank's top ones by time), as kernel rows without launch config."""
    return [{"rank": r.get("rank"), "name": r["name"], "category": r.get("category") or "compute", "grid": None,
             "block": None, "count": int(r.get("launch_count") or 0), "total_ms": float(r.get("total_ms") or 0.0)}
            for r in report.metrics.get("top_kernels", []) if r.get("name") is not None]
