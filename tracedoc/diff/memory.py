"""GPU memory across the two sides: per GPU (rank and device), the peak allocated and reserved, the growth per
steady step and the steps left until the device is full, and the allocation sites holding memory step after step,
before → after (from each report's ``memory`` section, so a saved JSON report compares as its traces do).

A GPU is the same on both sides when its rank and device are. A growth site is matched by its name on that GPU;
where a side measured the growth of the GPU but does not list the site, the site held nothing there (0 per step);
where a side has no growth figure for the GPU, its value is None (unknown).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracedoc.report import Report
from tracedoc.units import report_number

# The growth sites listed per diff (largest before or after first).
TOP_GROWTH_SITES = 10


@dataclass
class MemoryRow:
    """One GPU across the sides: each side's ``memory`` entry (None where the side has none for this GPU)."""

    rank: int | None
    device: int | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def pair(self, key: str) -> tuple[float | None, float | None]:
        return _value(self.before, key), _value(self.after, key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "device": self.device}
        for key in ("peak_bytes", "reserved_peak_bytes", "growth_bytes_per_step", "steps_to_oom"):
            before, after = self.pair(key)
            out[key] = {"before": before, "after": after,
                        "change": None if before is None or after is None else report_number(after - before)}
        out["peak_step"] = {"before": _peak_step(self.before), "after": _peak_step(self.after)}
        return out


@dataclass
class GrowthSiteRow:
    """An allocation site whose tensors stay alive step after step on one GPU, before → after (bytes per step)."""

    rank: int | None
    device: int | None
    site: str
    before: float | None
    after: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "device": self.device, "site": self.site,
                "bytes_per_step": {"before": self.before, "after": self.after}}


def _value(entry: dict[str, Any] | None, key: str) -> float | None:
    value = None if entry is None else entry.get(key)
    return None if value is None else float(value)


def _peak_step(entry: dict[str, Any] | None) -> int | None:
    at = (entry or {}).get("peak_at") or {}
    return at.get("step")


def _key(entry: dict[str, Any]) -> tuple[int | None, int | None]:
    return entry.get("rank"), entry.get("device")


def _sort_key(key: tuple[int | None, int | None]) -> tuple[int, int, int, int]:
    rank, device = key
    return (rank is None, rank or 0, device is None, device or 0)


_BASIS_WORDS = {"allocator": "the caching allocator's tensors and reserve", "cuda": "what CUDA gave the process"}


def basis_mismatch(before: Report, after: Report) -> str | None:
    """Why the sides' memory cannot be compared, when one GPU's figures count other things on each side (a PyTorch
    trace's allocator events against Nsight Systems' CUDA memory events): None when they can."""
    by_a = {_key(m): m.get("basis") for m in after.memory}
    for m in before.memory:
        b, a = m.get("basis"), by_a.get(_key(m))
        if a is not None and b is not None and a != b:
            return (f"GPU memory is not compared: BEFORE counts {_BASIS_WORDS.get(b, b)}, AFTER "
                    f"{_BASIS_WORDS.get(a, a)}")
    return None


def compare_memory(before: Report, after: Report) -> tuple[list[MemoryRow], list[GrowthSiteRow]]:
    """The GPUs of either side's memory section, and the growth sites of either side, largest first; nothing when
    the sides count different things (``basis_mismatch``)."""
    if basis_mismatch(before, after) is not None:
        return [], []
    by_b = {_key(m): m for m in before.memory}
    by_a = {_key(m): m for m in after.memory}
    rows = [MemoryRow(k[0], k[1], by_b.get(k), by_a.get(k)) for k in sorted(set(by_b) | set(by_a), key=_sort_key)]
    sites: list[GrowthSiteRow] = []
    for row in rows:
        per_b, per_a = _site_rates(row.before), _site_rates(row.after)
        for site in set(per_b) | set(per_a):
            sites.append(GrowthSiteRow(row.rank, row.device, site, _rate(row.before, per_b, site),
                                       _rate(row.after, per_a, site)))
    sites.sort(key=lambda s: (-max(s.before or 0.0, s.after or 0.0), _sort_key((s.rank, s.device)), s.site))
    return rows, sites[:TOP_GROWTH_SITES]


def _site_rates(entry: dict[str, Any] | None) -> dict[str, float]:
    """Bytes per step by site of one side's entry (a site listed twice, under two operators, summed)."""
    rates: dict[str, float] = {}
    for s in (entry or {}).get("growth_sites") or []:
        if s.get("site") is not None and s.get("bytes_per_step") is not None:
            rates[s["site"]] = rates.get(s["site"], 0.0) + float(s["bytes_per_step"])
    return rates


def _rate(entry: dict[str, Any] | None, rates: dict[str, float], site: str) -> float | None:
    """The site's bytes per step; 0 where the side measured the GPU's growth without this site; None unknown."""
    if site in rates:
        return rates[site]
    return 0.0 if entry is not None and entry.get("growth_bytes_per_step") is not None else None
