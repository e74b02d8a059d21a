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


# Operators of this kind (efficiency.ops) are matrix products; a side may run one product under another name
# (eager's aten::linear is torch.compile's aten::mm), so they are compared together when their names differ.
PRODUCT_KIND = "gemm"
PRODUCTS = "matrix products"


def _per_step(report: Report) -> dict[tuple[int, str], dict[str, Any]]:
    """Each (rank, op)'s GPU ms and FLOPs per steady step, its kind and TFLOP/s, from the report's operators."""
    steps = {rank: max(int(r.get("steps") or 0), 1) for rank, r in _ranks(report).items()}
    return {(o["rank"], o["op"]): {"ms": float(o.get("gpu_ms") or 0.0) / steps.get(o["rank"], 1),
                                   "flops": float(o.get("flops") or 0.0) / steps.get(o["rank"], 1),
                                   "kind": o.get("kind"), "tflops": o.get("tflops") or None}
            for o in report.operators}  # no TFLOP/s for an op without FLOPs


def _group_products(b: dict[tuple[int, str], dict[str, Any]], a: dict[tuple[int, str], dict[str, Any]]) -> None:
    """Per rank whose matrix products go by other op names on the two sides, those ops merged (in place) into one
    'matrix products: before's names → after's' entry, so a product that changed name is not a regression of one
    op and a gain of another."""
    for rank in {r for r, _ in b} | {r for r, _ in a}:
        names = [sorted(op for (r, op), v in side.items() if r == rank and v["kind"] == PRODUCT_KIND)
                 for side in (b, a)]
        if names[0] == names[1] or not (names[0] and names[1]):
            continue
        label = f"{PRODUCTS}: {', '.join(names[0])} → {', '.join(names[1])}"
        for side, members in zip((b, a), names, strict=True):
            parts = [side.pop((rank, op)) for op in members]
            ms, flops = sum(p["ms"] for p in parts), sum(p["flops"] for p in parts)
            side[(rank, label)] = {"ms": ms, "flops": flops, "kind": PRODUCT_KIND,
                                   "tflops": flops / ms / 1e9 if ms and flops else None}


def compare_operators(before: Report, after: Report, limit: int = TOP_OPERATORS) -> list[OperatorRow]:
    """The operators (per rank) whose GPU time per steady step changed most, largest change first; a rank's matrix
    products compared as one when their op names differ between the sides (_group_products)."""
    b, a = _per_step(before), _per_step(after)
    _group_products(b, a)
    absent: dict[str, Any] = {"ms": None, "tflops": None}
    rows = []
    for rank, op in sorted(set(b) | set(a)):
        ob, oa = b.get((rank, op), absent), a.get((rank, op), absent)
        rows.append(OperatorRow(rank, op, ob["ms"], oa["ms"], ob["tflops"], oa["tflops"]))
    rows.sort(key=lambda r: (-abs(r.change_ms), r.rank, r.op))
    return rows[:limit]
