"""GEMM ladder measurements (``gemm_ladder.json``, written by workloads/gemm_ladder) into gemm_ladder_results.

The ladder times cuBLAS on each shape it runs; those times are the ceiling that Nsight Compute GEMM kernels of the
same size on the same GPU model are held against (tracedoc/analyses/ncu/cublas_ceiling.sql). A measurement covers a
GPU model, not a rank: the source holds no rank. The file is small JSON, read whole and checked field by field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tracedoc import strict_json
from tracedoc.errors import InputError
from tracedoc.formats import BY_NAME
from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.store import Store

FORMAT = "gemm_ladder"

TAG = "tracedoc-gemm-ladder"
_TAG_FIELD = re.compile(rb'"format"\s*:\s*"' + TAG.encode() + rb'"')
MAX_BYTES: int = BY_NAME[FORMAT].max_bytes or 0
# Bounds on measured numbers: a GEMM of a nanosecond to a day, an SM clock up to 100 GHz, a relative error up
# to 1e6; beyond them a number is corrupt (and FLOP/s computed from it would overflow).
_MIN_MS, _MAX_MS, _MAX_CLOCK_MHZ, _MAX_REL_ERROR = 1e-6, 86_400_000.0, 100_000.0, 1e6
_RUNGS = ("naive", "tiled", "wmma", "cublas")
_COLUMNS = ("gpu", "profiler", "dtype", "m", "n", "k", "flop", "rung", "kernel", "rel_error", "ms", "flop_per_s",
            "sm_clock_mhz", "gpu_bound")


def sniff(path: Path, head: bytes) -> bool:
    """True for a JSON object carrying the ladder's format tag (in the first MiB, wherever its key sits)."""
    return head.lstrip()[:1] == b"{" and _TAG_FIELD.search(head) is not None


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Check the measurements and write one row per rung and shape under ``source_id``."""
    if path.stat().st_size > MAX_BYTES:
        raise InputError(f"{path}: {path.stat().st_size:,} bytes is too large for GEMM ladder measurements")
    return _load_doc(store, source_id, path.read_bytes(), path)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """The same of a compressed file, read whole from its stream (at most MAX_BYTES, the format's limit)."""
    return _load_doc(store, source_id, b"".join(stream.chunks()), name)


def _load_doc(store: Store, source_id: int, raw: bytes, path: Path) -> LoadResult:
    """Check the measurements in ``raw`` (errors naming them as ``path``) and write their rows."""
    try:
        doc = strict_json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: truncated or corrupt GEMM ladder JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != TAG:
        raise InputError(f"{path}: not GEMM ladder measurements (no format tag {TAG!r})")
    if doc.get("version") != 1:
        raise InputError(f"{path}: GEMM ladder measurements of version {doc.get('version')!r}; tracedoc reads 1")
    gpu = _required_text(doc, "gpu", path)
    results = doc.get("results")
    if not isinstance(results, list):
        raise InputError(f"{path}: GEMM ladder measurements without a results list")
    rows = [_row(r, i, gpu, _text(doc, "profiler", path), _text(doc, "dtype", path), path)
            for i, r in enumerate(results)]
    if rows:
        store.con.executemany(
            f"INSERT INTO gemm_ladder_results (source_id, {', '.join(_COLUMNS)}) VALUES (?{', ?' * len(_COLUMNS)})",
            [[source_id, *(row[c] for c in _COLUMNS)] for row in rows])
    tool = f"GEMM ladder (torch {_text(doc, 'torch', path) or '?'}, CUDA {_text(doc, 'cuda', path) or '?'})"
    return LoadResult(rank=None, world_size=None, event_count=len(rows), tool=tool)


def _row(result: Any, index: int, gpu: str, profiler: str | None, dtype: str | None, path: Path) -> dict[str, Any]:
    """One result checked: positive integer sizes, a known rung, numbers where numbers belong."""
    where = f"{path}: results[{index}]"
    if not isinstance(result, dict):
        raise InputError(f"{where} is not an object")
    sizes = [result.get(d) for d in ("m", "n", "k")]
    if not all(isinstance(s, int) and not isinstance(s, bool) and 0 < s < 1 << 31 for s in sizes):
        raise InputError(f"{where}: m, n and k must be positive integers")
    rung = result.get("rung")
    if rung not in _RUNGS:
        raise InputError(f"{where}: unknown rung {str(rung)[:40]!r} (one of {', '.join(_RUNGS)})")
    ms = _number(result, "ms", where, _MAX_MS)
    if ms is not None and ms < _MIN_MS:
        raise InputError(f"{where}: ms must be at least {_MIN_MS:g} (a nanosecond)")
    m, n, k = [s for s in sizes if isinstance(s, int)]
    flop = 2.0 * m * n * k
    clock = _number(result, "sm_clock_mhz", where, _MAX_CLOCK_MHZ)
    gpu_bound = result.get("gpu_bound")
    if gpu_bound is not None and not isinstance(gpu_bound, bool):
        raise InputError(f"{where}: gpu_bound must be true, false or null")
    kernel = result.get("kernel")
    return {"gpu": gpu, "profiler": profiler, "dtype": dtype, "m": m, "n": n, "k": k, "flop": flop, "rung": rung,
            "kernel": str(kernel)[:256] if kernel is not None else None,
            "rel_error": _number(result, "rel_error", where, _MAX_REL_ERROR), "ms": ms,
            "flop_per_s": flop / (ms / 1e3) if ms else None, "sm_clock_mhz": round(clock) if clock else None,
            "gpu_bound": gpu_bound}


def _number(obj: dict[str, Any], key: str, where: str, high: float) -> float | None:
    """``obj[key]`` as a float in [0, high], or None when absent; anything else is bad input."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
        raise InputError(f"{where}: {key} must be a number from 0 to {high:g}")
    return float(value)


def _text(doc: dict[str, Any], key: str, path: Path) -> str | None:
    """``doc[key]`` as text, None when absent; anything else is bad input."""
    return None if doc.get(key) is None else _required_text(doc, key, path)


def _required_text(doc: dict[str, Any], key: str, path: Path) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"{path}: GEMM ladder measurements without a {key!r} string")
    return value[:256]
