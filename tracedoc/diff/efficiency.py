"""How close to the chip's peak each side runs: MFU (or MBU, for a memory-bound step) per rank before → after, and
the operators whose GPU time per step changed most, with their TFLOP/s on each side. Read from the two reports'
``efficiency`` and ``operators`` (tracedoc.efficiency), so a saved report compares as well as traces."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tracedoc.report import Report

TOP_OPERATORS = 10


@dataclass
class EfficiencyRow:
    """One rank's figure over its steady steps on both sides: 'MFU' or 'MBU' (%), None where not measured."""

    rank: int
    figure: str
    before: float | None
    after: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class OperatorRow:
    """An aten op of one rank on both sides: GPU ms per steady step and achieved TFLOP/s (None where absent)."""

    rank: int
    op: str
    before_ms: float | None
    after_ms: float | None
    before_tflops: float | None
    after_tflops: float | None

    @property
    def change_ms(self) -> float:
        return (self.after_ms or 0.0) - (self.before_ms or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "change_ms": round(self.change_ms, 3)}


def _ranks(report: Report) -> dict[int, dict[str, Any]]:
    """Each rank's efficiency row over its steady steps (step None)."""
    return {r["rank"]: r for r in report.efficiency if r.get("step") is None and r.get("rank") is not None}


def compare_efficiency(before: Report, after: Report) -> list[EfficiencyRow]:
    """MFU per rank on both sides; MBU where both sides are memory-bound (a decode step)."""
    b, a = _ranks(before), _ranks(after)
    out = []
    for rank in sorted(set(b) | set(a)):
        sides = [s for s in (b.get(rank), a.get(rank)) if s is not None]
        figure = "MBU" if sides and all(s.get("bound") == "memory" for s in sides) else "MFU"
        key = f"{figure.lower()}_pct"
        out.append(EfficiencyRow(rank, figure, (b.get(rank) or {}).get(key), (a.get(rank) or {}).get(key)))
    return [r for r in out if r.before is not None or r.after is not None]


def compare_operators(before: Report, after: Report, limit: int = TOP_OPERATORS) -> list[OperatorRow]:
    """The operators (per rank) whose GPU time per steady step changed most, largest change first."""
    def per_step(report: Report) -> dict[tuple[int, str], tuple[float, float | None]]:
        steps = {rank: max(int(r.get("steps") or 0), 1) for rank, r in _ranks(report).items()}
        return {(o["rank"], o["op"]): (float(o["gpu_ms"] or 0.0) / steps.get(o["rank"], 1), o.get("tflops") or None)
                for o in report.operators}  # no TFLOP/s for an op without FLOPs

    b, a = per_step(before), per_step(after)
    absent = (None, None)
    rows = []
    for rank, op in sorted(set(b) | set(a)):
        (before_ms, before_tflops), (after_ms, after_tflops) = b.get((rank, op), absent), a.get((rank, op), absent)
        rows.append(OperatorRow(rank, op, before_ms, after_ms, before_tflops, after_tflops))
    rows.sort(key=lambda r: (-abs(r.change_ms), r.rank, r.op))
    return rows[:limit]
