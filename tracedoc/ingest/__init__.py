"""Ingest: find the trace files among the user's paths, detect their format, and load them into a store.

One module per format; each has ``FORMAT``, ``sniff(path, head) -> bool`` (``head``: the file's first MiB,
decompressed when gzipped) and ``load(store, source_id, path, workdir) -> LoadResult``. Register a new format
in FORMATS. Ingest knows nothing about analyses or rules.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from isal import igzip

from tracedoc.errors import InputError
from tracedoc.ingest import flight_recorder, gemm_ladder, kineto, ncu, nsys, nvml, telemetry
from tracedoc.store import Store
from tracedoc.store.cache import file_digest

FORMATS: dict[str, ModuleType] = {kineto.FORMAT: kineto, flight_recorder.FORMAT: flight_recorder,
                                   nsys.FORMAT: nsys, ncu.FORMAT: ncu, nvml.FORMAT: nvml, telemetry.FORMAT: telemetry,
                                   gemm_ladder.FORMAT: gemm_ladder}

# Files in a directory that are never traces: documentation and sample metadata beside the traces.
_NOT_TRACES = (".md", ".txt", ".yaml", ".yml", ".py", ".log", ".png", ".html")
_SNIFF_BYTES = 1 << 20
_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)


@dataclass
class InputFile:
    """One trace file to analyse."""

    path: Path
    format: str
    digest: str
    size_bytes: int


def discover(paths: Sequence[Path]) -> list[InputFile]:
    """Expand files and directories into the trace files to analyse, each with its detected format."""
    found: list[InputFile] = []
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or directory")
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
                                and not p.name.lower().endswith(_NOT_TRACES))
            files = [f for f in (_identify(p, strict=False, in_directory=True) for p in candidates) if f is not None]
            if not files:
                raise InputError(f"{path}: no trace files found in this directory")
            found.extend(files)
        else:
            found.append(_identify(path, strict=True))
    return found


def _identify(path: Path, strict: bool, in_directory: bool = False) -> InputFile | None:
    """Detect the format of one file from its content; None (or an error when ``strict``) if unknown.

    In a directory, a format may set aside a file whose data another file there holds too
    (``redundant_in_directory(path, head)``, e.g. an Nsight Systems report beside its SQLite export).
    """
    head = _head(path)
    if not head.strip():
        if strict:
            raise InputError(f"{path}: empty file")
        return None
    for name, module in FORMATS.items():
        if module.sniff(path, head):
            redundant = getattr(module, "redundant_in_directory", None)
            if in_directory and redundant is not None and redundant(path, head):
                return None
            return InputFile(path, name, file_digest(path), path.stat().st_size)
    if strict:
        raise InputError(f"{path}: not a trace format tracedoc reads ({', '.join(FORMATS)})")
    return None


def _head(path: Path) -> bytes:
    """The first bytes of a file, decompressed when it is gzipped."""
    try:
        with path.open("rb") as f:
            raw = f.read(_SNIFF_BYTES)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        with igzip.open(path, "rb") as f:
            return f.read(_SNIFF_BYTES)
    except (OSError, EOFError, ValueError) as exc:
        raise InputError(f"{path}: corrupt or truncated gzip ({exc})") from None


def load_all(store: Store, inputs: Sequence[InputFile], progress: Callable[[str], None] | None = None) -> None:
    """Load every input into the store, one source each, and record the sources with their ranks."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="tracedoc-ingest-", dir=store.path.parent if store.path else None) as tmp:
        for source_id, item in enumerate(inputs):
            if progress:
                count = f"file {source_id + 1} of {len(inputs)}: " if len(inputs) > 1 else ""
                progress(f"reading {count}{item.path} ({item.size_bytes / 1e6:.1f} MB)")
            result = FORMATS[item.format].load(store, source_id, item.path, Path(tmp))
            rows.append([source_id, str(item.path), item.format, result.rank, result.world_size, item.digest,
                         item.size_bytes, result.event_count, result.tool])
    if rows and not any(r[7] for r in rows):
        raise InputError(f"{rows[0][1]}: nothing to analyse ({rows[0][8]})")
    ranks = _assign_ranks(inputs, [r[3] for r in rows])
    for row, rank in zip(rows, ranks):
        row[3] = rank
    store.con.executemany("INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    for table in ("gpu_activity", "cpu_activity", "steps", "nvtx_ranges"):
        store.con.execute(
            f"UPDATE {table} t SET rank = s.rank FROM sources s WHERE t.source_id = s.source_id AND t.rank <> s.rank")


def _assign_ranks(inputs: Sequence[InputFile], reported: list[int | None]) -> list[int | None]:
    """Rank from the trace itself, else from the file name (``rank3``), else the input's position among the ranked.

    Two files of one format may not claim the same rank, unless the format keeps several files per rank and its
    analyses choose among them (``SEVERAL_PER_RANK``: automatic and on-demand flight-recorder dumps). Inputs that
    cover a whole host (``PER_HOST``: GPU health snapshots and telemetry) belong to no rank: None.
    """
    ranked = [item for item in inputs if not getattr(FORMATS[item.format], "PER_HOST", False)]
    ranks: list[int | None] = []
    for item, rank in zip(inputs, reported):
        if item not in ranked:
            ranks.append(None)
            continue
        if rank is None:
            m = _RANK_IN_NAME.search(item.path.name)
            rank = int(m.group(1)) if m else (ranked.index(item) if len(ranked) > 1 else 0)
        ranks.append(rank)
    seen: dict[tuple[str, int], Path] = {}
    for item, rank in zip(inputs, ranks):
        if rank is None or getattr(FORMATS[item.format], "SEVERAL_PER_RANK", False):
            continue
        if (item.format, rank) in seen:
            raise InputError(f"two traces claim rank {rank}: {seen[item.format, rank]} and {item.path}")
        seen[item.format, rank] = item.path
    return ranks
