"""Step times of each side and where each step's time went, read from a report.

A rank's step time is the span of the step in the report's attribution: the sum of the step's rows on one GPU of
the rank (they sum exactly to the step's span, from the end of the previous step's GPU work to the end of its
own), the largest over the rank's GPUs. The job's step is the slowest rank's: the largest over ranks, step by
step — the definition ``benchmarks/predicted_vs_measured.py`` measures the fixed twins with. Without an
attribution (a report of an older tracedoc, a timeline without GPU steps) the profiler's step ranges
(``metrics.step_times``, the host's ProfilerStep durations) stand in, and the diff names that basis.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tracedoc.causes import window_rows
from tracedoc.diff.stats import Change, Distribution, compare
from tracedoc.report import Report

ATTRIBUTION = "attribution"  # GPU step spans
STEP_RANGES = "step ranges"  # host ProfilerStep durations
NO_STEPS = "none"

BASIS_TEXT = {ATTRIBUTION: "GPU step spans from the time attribution",
              STEP_RANGES: "the profiler's step ranges (host time)", NO_STEPS: "no steps recorded"}


@dataclass
class StepTable:
    """One side's step times (ms): {rank: {step: ms}}, the basis they come from, for each rank the GPU its
    step time was taken on (the slowest of its GPUs; None on the step-ranges basis), and how much of each step
    the rank spent waiting in collectives for a later peer ({rank: {step: ms}}; empty on the step-ranges
    basis)."""

    basis: str
    by_rank: dict[int, dict[int, float]]
    device: dict[int, Any]
    waits: dict[int, dict[int, float]] = field(default_factory=dict)

    def job(self) -> dict[int, float]:
        """The job's step times: the slowest rank's span, step by step."""
        steps: dict[int, float] = {}
        for spans in self.by_rank.values():
            for step, ms in spans.items():
                steps[step] = max(steps.get(step, 0.0), ms)
        return steps

    def slowest_rank(self) -> int | None:
        """The rank the others wait for: the longest median step once the rank's own wait for later peers is
        taken out (in a synchronous job every rank's step spans about the same time)."""
        if not self.by_rank:
            return None

        def own_time(rank: int) -> float:
            wait = self.waits.get(rank, {})
            return statistics.median(ms - wait.get(step, 0.0) for step, ms in self.by_rank[rank].items())

        return max(sorted(self.by_rank), key=own_time)


def attribution_steps(report: Report) -> StepTable:
    """Step spans from the attribution (empty when the report has no step in it)."""
    spans: dict[tuple[int, Any], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    waits: dict[tuple[int, Any], dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for row in report.attribution:
        if row.get("step") is not None and row.get("rank") is not None:
            key = (row["rank"], row.get("device"))
            spans[key][row["step"]] += float(row.get("ms") or 0.0)
            if row.get("cause") == "wait_for_peer":
                waits[key][row["step"]] += float(row.get("ms") or 0.0)
    by_rank: dict[int, dict[int, float]] = {}
    device: dict[int, Any] = {}
    for (rank, dev), steps in sorted(spans.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        total = sum(steps.values())
        if rank not in by_rank or total > sum(by_rank[rank].values()):
            by_rank[rank], device[rank] = dict(steps), dev
    rank_waits = {rank: dict(waits.get((rank, dev), {})) for rank, dev in device.items()}
    return StepTable(ATTRIBUTION if by_rank else NO_STEPS, by_rank, device, rank_waits)


def range_steps(report: Report) -> StepTable:
    """Step times from the step ranges on the host (metrics.step_times), warm-up steps left out."""
    by_rank: dict[int, dict[int, float]] = defaultdict(dict)
    for row in report.metrics.get("step_times", []):
        if row.get("step") is not None and row.get("step_ms") is not None and not row.get("warmup"):
            by_rank[row.get("rank") or 0][row["step"]] = float(row["step_ms"])
    return StepTable(STEP_RANGES if by_rank else NO_STEPS, dict(by_rank), {})


def step_tables(before: Report, after: Report) -> tuple[StepTable, StepTable]:
    """Both sides' step times on one basis: the attribution when both have it, else the step ranges when both
    have them, else what each has (the diff then says the bases differ)."""
    attributed = attribution_steps(before), attribution_steps(after)
    if all(t.basis == ATTRIBUTION for t in attributed):
        return attributed
    ranged = range_steps(before), range_steps(after)
    if all(t.basis == STEP_RANGES for t in ranged):
        return ranged
    return tuple(a if a.basis == ATTRIBUTION else r for a, r in zip(attributed, ranged))  # type: ignore[return-value]


@dataclass
class StepComparison:
    """Step times of one scope (the job, or one rank) on both sides and their change (None where a side has no
    steps)."""

    rank: int | None  # None: the job (the slowest rank, step by step)
    before: Distribution | None
    after: Distribution | None
    change: Change | None
    before_steps: dict[int, float]  # {step: ms}
    after_steps: dict[int, float]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank} if self.rank is not None else {}
        for side, dist, steps in (("before", self.before, self.before_steps), ("after", self.after, self.after_steps)):
            out[side] = None if dist is None else {
                **dist.to_dict(), "steps": [{"step": k, "ms": round(v, 3)} for k, v in sorted(steps.items())]}
        out["change"] = self.change.to_dict() if self.change else None
        return out


def compare_steps(before: dict[int, float], after: dict[int, float], rank: int | None = None) -> StepComparison:
    """The distributions of two sets of step times and the change of their median."""
    b, a = list(before.values()), list(after.values())
    return StepComparison(rank, Distribution.of(b) if b else None, Distribution.of(a) if a else None,
                          compare(b, a) if b and a else None, dict(before), dict(after))


@dataclass
class CauseRow:
    """One attribution cause on the compared rank: ms per step and % of the step, before and after."""

    cause: str
    before_ms: float
    before_pct: float
    after_ms: float
    after_pct: float

    @property
    def delta_ms(self) -> float:
        return self.after_ms - self.before_ms

    def to_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "before_ms_per_step": round(self.before_ms, 3),
                "before_pct": round(self.before_pct, 2), "after_ms_per_step": round(self.after_ms, 3),
                "after_pct": round(self.after_pct, 2), "delta_ms_per_step": round(self.delta_ms, 3),
                "delta_pct_points": round(self.after_pct - self.before_pct, 2)}


def causes_per_step(report: Report, rank: int, device: Any) -> tuple[dict[str, float], float]:
    """Per cause, its ms per step on this rank and GPU (over its steps in the window), and the mean step."""
    totals: dict[str, float] = defaultdict(float)
    steps: set[int] = set()
    for row in window_rows(report.attribution):
        if row.get("rank") == rank and row.get("device") == device and row.get("step") is not None:
            totals[row["cause"]] += float(row.get("ms") or 0.0)
            steps.add(row["step"])
    if not steps:
        return {}, 0.0
    per_step = {cause: ms / len(steps) for cause, ms in totals.items()}
    return per_step, sum(per_step.values())


def compare_causes(before: Report, after: Report, before_at: tuple[int, Any],
                   after_at: tuple[int, Any]) -> list[CauseRow]:
    """The causes of the compared rank's steps, before and after, largest change first."""
    b, b_step = causes_per_step(before, *before_at)
    a, a_step = causes_per_step(after, *after_at)
    rows = [CauseRow(cause, b.get(cause, 0.0), 100.0 * b.get(cause, 0.0) / b_step if b_step else 0.0,
                     a.get(cause, 0.0), 100.0 * a.get(cause, 0.0) / a_step if a_step else 0.0)
            for cause in set(b) | set(a)]
    return sorted(rows, key=lambda r: (-abs(r.delta_ms), r.cause))


def wait_per_step(report: Report, rank: int, device: Any) -> float | None:
    """The rank's time waiting in collectives for a later peer, ms per step (None without an attribution)."""
    per_step, step = causes_per_step(report, rank, device)
    return per_step.get("wait_for_peer", 0.0) if step else None
