"""Kernels matched by name across the two sides: launches, total and mean time, and what changed.

Kernels are matched by name, summed over ranks and launch configurations, so a kernel launched with a new grid
(a different batch) is still the same kernel; the configurations of each side are kept, to show when they
differ. Per step figures divide by the side's number of job steps, so windows of different lengths compare.
For Nsight Compute profiles the kernels are ncu's profiled ones (``metrics.ncu_kernels``), each matched on name,
grid and block (on name alone where that is unique on both sides) to set their speed of light and occupancy
side by side.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tracedoc.report_tables import METRICS

MAX_CONFIGS = 4

# ncu figures compared per kernel: every measure the report declares of a kernel but its launches (matched on).
NCU_FIELDS = tuple(key for key, _ in METRICS["ncu_kernels"].measures if key != "launches")
NCU_LABELS = ("kernel_class", "busiest_unit")


@dataclass
class KernelSide:
    """One kernel on one side: launches, total time (ms), launch configurations ('grid / block')."""

    count: int
    total_ms: float
    configs: list[str] = field(default_factory=list)

    @property
    def mean_us(self) -> float:
        return 1000.0 * self.total_ms / self.count if self.count else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "total_ms": round(self.total_ms, 3), "mean_us": round(self.mean_us, 3),
                **({"configs": self.configs} if self.configs else {})}


@dataclass
class KernelRow:
    """A kernel by name: its figures before and after (None where absent: new or vanished), the change per step
    (None when a side has no steps) and each side's number of job steps (0 without)."""

    name: str
    category: str
    before: KernelSide | None
    after: KernelSide | None
    delta_ms_per_step: float | None
    before_steps: int = 0
    after_steps: int = 0

    @property
    def status(self) -> str:
        return "new" if self.before is None else "vanished" if self.after is None else "matched"

    @property
    def delta_total_ms(self) -> float:
        return (self.after.total_ms if self.after else 0.0) - (self.before.total_ms if self.before else 0.0)

    @property
    def delta_count(self) -> int:
        return (self.after.count if self.after else 0) - (self.before.count if self.before else 0)

    def launches_per_step(self) -> tuple[float, float] | None:
        """Launches per job step before and after (None when a side has no steps)."""
        if not (self.before_steps and self.after_steps):
            return None
        return ((self.before.count if self.before else 0) / self.before_steps,
                (self.after.count if self.after else 0) / self.after_steps)

    def split(self) -> tuple[float, float] | None:
        """The change of a kernel on both sides split in two (ms; per job step when both sides have steps, else in
        total), which add up to it: (from the mean: launches before × change of the mean time per launch, from the
        launches: change of the launches × mean after). A kernel as fast per launch but launched more often per
        step changes by its launches only. None for a new or vanished kernel."""
        if self.before is None or self.after is None or not self.before.count or not self.after.count:
            return None
        mean_b, mean_a = self.before.total_ms / self.before.count, self.after.total_ms / self.after.count
        launches = self.launches_per_step() or (float(self.before.count), float(self.after.count))
        return launches[0] * (mean_a - mean_b), (launches[1] - launches[0]) * mean_a

    @property
    def weight(self) -> float:
        """The change that ranks regressions and improvements: per step when known, else in total."""
        return self.delta_ms_per_step if self.delta_ms_per_step is not None else self.delta_total_ms

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "category": self.category, "status": self.status,
                               "before": self.before.to_dict() if self.before else None,
                               "after": self.after.to_dict() if self.after else None,
                               "delta_count": self.delta_count, "delta_total_ms": round(self.delta_total_ms, 3),
                               "delta_ms_per_step": None if self.delta_ms_per_step is None
                               else round(self.delta_ms_per_step, 3)}
        if self.before and self.after:
            out["delta_mean_us"] = round(self.after.mean_us - self.before.mean_us, 3)
        if (split := self.split()) is not None:
            out["delta_ms_from_mean"], out["delta_ms_from_launches"] = round(split[0], 3), round(split[1], 3)
        return out


def _by_name(rows: list[dict[str, Any]]) -> dict[str, tuple[str, KernelSide]]:
    """Kernel rows summed by name over ranks and launch configurations."""
    count: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    configs: dict[str, set[str]] = defaultdict(set)
    category: dict[str, str] = {}
    for row in rows:
        name = str(row["name"])
        count[name] += int(row.get("count") or 0)
        total[name] += float(row.get("total_ms") or 0.0)
        category.setdefault(name, str(row.get("category") or "compute"))
        if row.get("grid") is not None or row.get("block") is not None:
            configs[name].add(f"{row.get('grid') or '?'} / {row.get('block') or '?'}")
    return {name: (category[name], KernelSide(count[name], total[name], sorted(configs[name])[:MAX_CONFIGS]))
            for name in count}


def match_kernels(before: list[dict[str, Any]], after: list[dict[str, Any]], before_steps: int,
                  after_steps: int) -> list[KernelRow]:
    """Every kernel of either side by name, largest change first (per step when both sides have steps)."""
    b, a = _by_name(before), _by_name(after)
    rows = []
    for name in set(b) | set(a):
        kb, ka = b.get(name), a.get(name)
        per_step = None
        if before_steps and after_steps:
            per_step = (ka[1].total_ms / after_steps if ka else 0.0) - (kb[1].total_ms / before_steps if kb else 0.0)
        rows.append(KernelRow(name, (kb or ka)[0], kb[1] if kb else None,  # type: ignore[index]
                              ka[1] if ka else None, per_step, before_steps, after_steps))
    return sorted(rows, key=lambda r: (-abs(r.weight), r.name))


def rewritten_kernel(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The one kernel rewritten between two kernel profiles: (before's name, after's name) when exactly one kernel
    name of each side is missing from the other (an A/B of one kernel, such as a naive and a tiled version), else
    None. Any other difference is a new and a vanished kernel."""
    names_b, names_a = {str(r["name"]) for r in before}, {str(r["name"]) for r in after}
    only_b, only_a = names_b - names_a, names_a - names_b
    if len(only_b) == 1 and len(only_a) == 1:
        return next(iter(only_b)), next(iter(only_a))
    return None


def renamed(rows: list[dict[str, Any]], rewrite: tuple[str, str] | None, key: str = "name") -> list[dict[str, Any]]:
    """``rows`` with the rewritten kernel under its after name, so that both sides match on it."""
    if rewrite is None:
        return rows
    return [{**r, key: rewrite[1]} if r.get(key) == rewrite[0] else r for r in rows]


def rewrite_label(rewrite: tuple[str, str]) -> str:
    """How a rewritten kernel is named in tables: 'before → after'."""
    return f"{rewrite[0]} → {rewrite[1]}"


def ncu_kernel_rows(report_metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """ncu's profiled kernels as kernel rows (name, grid, block, launches, total time)."""
    return [{"rank": r.get("rank"), "name": r["kernel"], "category": "compute", "grid": r.get("grid"),
             "block": r.get("block"), "count": int(r.get("launches") or 0), "total_ms": float(r.get("total_ms") or 0.0)}
            for r in report_metrics.get("ncu_kernels", []) if r.get("kernel") is not None]


@dataclass
class NcuRow:
    """One profiled kernel on both sides: its ncu figures before and after."""

    kernel: str
    grid: str | None
    block: str | None
    before: dict[str, Any]
    after: dict[str, Any]

    def top_stall(self) -> tuple[str, float | None, float | None] | None:
        """The warp-stall reason that held the kernel most before (after's when before has none), with its share of
        the cycles between two instructions (%) on each side."""
        stalls_b, stalls_a = self.before.get("stalls") or {}, self.after.get("stalls") or {}
        lead = stalls_b or stalls_a
        if not lead:
            return None
        reason = max(lead, key=lambda k: lead[k])
        return reason, stalls_b.get(reason), stalls_a.get(reason)

    def deltas(self) -> dict[str, float]:
        return {k: self.after[k] - self.before[k] for k in NCU_FIELDS
                if isinstance(self.before.get(k), int | float) and isinstance(self.after.get(k), int | float)}

    def to_dict(self) -> dict[str, Any]:
        pick = NCU_FIELDS + NCU_LABELS + ("stalls",)
        return {"kernel": self.kernel, "grid": self.grid, "block": self.block,
                "before": {k: self.before.get(k) for k in pick}, "after": {k: self.after.get(k) for k in pick},
                "delta": {k: round(v, 3) for k, v in self.deltas().items()}}


def with_stalls(kernels: list[dict[str, Any]], stalls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ncu kernel rows (``metrics.ncu_kernels``) with their top warp-stall reasons (``metrics.ncu_warp_stalls``) as
    ``stalls``: {reason: % of the cycles between two instructions}."""
    by_kernel: dict[tuple[Any, Any, Any, Any], dict[str, float]] = defaultdict(dict)
    for s in stalls:
        if isinstance(s.get("share_pct"), int | float):
            key = (s.get("rank"), s.get("kernel"), s.get("grid"), s.get("block"))
            by_kernel[key][str(s["reason"])] = s["share_pct"]
    return [{**r, "stalls": by_kernel.get((r.get("rank"), r.get("kernel"), r.get("grid"), r.get("block")), {})}
            for r in kernels]


def match_ncu(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[NcuRow]:
    """ncu kernels of both sides matched on name, grid and block, else on a name unique on both sides."""
    def key(r: dict[str, Any]) -> tuple[str, Any, Any]:
        return (r["kernel"], r.get("grid"), r.get("block"))

    b = {key(r): r for r in before if r.get("kernel") is not None}
    a = {key(r): r for r in after if r.get("kernel") is not None}
    rows = [NcuRow(k[0], k[1], k[2], b[k], a[k]) for k in b if k in a]
    left_b = [k for k in b if k not in a]
    left_a = [k for k in a if k not in b]
    for k in left_b:
        same = [o for o in left_a if o[0] == k[0]]
        if len(same) == 1 and sum(1 for o in left_b if o[0] == k[0]) == 1:
            rows.append(NcuRow(k[0], f"{k[1]} → {same[0][1]}", f"{k[2]} → {same[0][2]}", b[k], a[same[0]]))
    return sorted(rows, key=lambda r: -float(r.before.get("total_ms") or 0.0))
