"""The statistics of a diff: quantiles of step times and a seeded bootstrap of the change in their median.

Steps are few in a profiled window (often 3 to 10), so the change is judged with a percentile bootstrap over
steps of the difference of medians (after − before): each side's steps are resampled with replacement, the
difference of the two resamples' medians taken, and the 2.5th and 97.5th percentiles of those differences are the
95 % confidence interval. The change is significant when the interval excludes 0 and each side has at least
``MIN_STEPS`` steps. With 3 steps a side the interval spans about the extreme differences, so a change is then
significant only when the two sides' steps do not overlap at all. The seed is fixed: the same inputs always give
the same interval.

Drawing each resample step by step costs resamples × steps: with 20,000 steps a side that took minutes. Past
``DRAWN_STEPS`` steps on the two sides together, each resample's median is drawn straight from its distribution
instead: the median of n steps drawn with replacement from the sorted steps is the step at the m-th smallest of n
uniform draws, whose position is a Beta(m, n − m + 1) variate (for an even n, the next one lies above it as the
smallest of the n − m draws left). That is the same bootstrap distribution at a cost per resample that does not
grow with the steps; short windows (every bundled sample) keep the step-by-step draws and their exact intervals.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracedoc.report_tables import METRICS

# A step's time as the report declares it (lower is better): which way a change of it goes.
STEP_TIME = METRICS["step_times"].measure("step_ms")

MIN_STEPS = 3
RESAMPLES = 4000
SEED = 20240607
CONFIDENCE = 0.95
DRAWN_STEPS = 200  # up to this many steps on both sides together, resamples are drawn step by step


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 ≤ q ≤ 1) with linear interpolation between order statistics (numpy's default)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Distribution:
    """Step times of one side (ms): how many, their median and 10th/90th percentiles."""

    n: int
    median_ms: float
    p10_ms: float
    p90_ms: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        return cls(len(values), statistics.median(values), quantile(values, 0.1), quantile(values, 0.9))

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "median_ms": round(self.median_ms, 3), "p10_ms": round(self.p10_ms, 3),
                "p90_ms": round(self.p90_ms, 3)}


@dataclass(frozen=True)
class Change:
    """After against before: the difference of medians (ms and % of before), its bootstrap 95 % intervals, and
    whether it is significant (the interval excludes 0 with enough steps a side); ``note`` says why not."""

    median_ms: float
    pct: float
    ci_ms: tuple[float, float]
    ci_pct: tuple[float, float]
    significant: bool
    note: str

    @property
    def direction(self) -> str:
        """'faster', 'slower' or 'no significant change'."""
        if not self.significant:
            return "no significant change"
        return "faster" if STEP_TIME.improved(self.median_ms) else "slower"

    def to_dict(self) -> dict[str, Any]:
        return {"median_ms": round(self.median_ms, 3), "pct": round(self.pct, 2),
                "ci_ms": [round(v, 3) for v in self.ci_ms], "ci_pct": [round(v, 2) for v in self.ci_pct],
                "significant": self.significant, "direction": self.direction, "note": self.note}


def compare(before: Sequence[float], after: Sequence[float], resamples: int = RESAMPLES,
            seed: int = SEED) -> Change:
    """The change of the median from ``before`` to ``after`` (both non-empty), with its bootstrap interval: in ms
    from the resampled differences of medians, in % from the resampled ratios of medians (so it never passes
    −100 %)."""
    base = statistics.median(before)
    delta = statistics.median(after) - base
    rng = random.Random(seed)
    if len(before) + len(after) <= DRAWN_STEPS:
        resampled = _resampled_medians(before, after, rng)
    else:
        resampled = _medians_from_order_statistics(sorted(before), sorted(after), rng)
    diffs, ratios = [], []
    for _ in range(resamples):
        b, a = next(resampled)
        diffs.append(a - b)
        if b:
            ratios.append(100.0 * (a / b - 1.0))
    tail = (1.0 - CONFIDENCE) / 2.0
    low, high = quantile(diffs, tail), quantile(diffs, 1.0 - tail)
    ci_pct = (quantile(ratios, tail), quantile(ratios, 1.0 - tail)) if ratios else (0.0, 0.0)
    enough = len(before) >= MIN_STEPS and len(after) >= MIN_STEPS
    excludes_zero = low > 0 or high < 0
    if not enough:
        note = f"too few steps to judge (at least {MIN_STEPS} a side needed; {len(before)} and {len(after)} here)"
    elif not excludes_zero:
        note = "the 95% interval contains 0"
    else:
        note = ""
    pct = 100.0 * delta / base if base else 0.0
    return Change(delta, pct, (low, high), ci_pct, enough and excludes_zero, note)


def _resampled_medians(before: Sequence[float], after: Sequence[float],
                       rng: random.Random) -> Iterator[tuple[float, float]]:
    """The medians of each side resampled with replacement, step by step (before's draws first)."""
    while True:
        b = statistics.median(rng.choices(before, k=len(before)))
        yield b, statistics.median(rng.choices(after, k=len(after)))


def _medians_from_order_statistics(before: Sequence[float], after: Sequence[float],
                                   rng: random.Random) -> Iterator[tuple[float, float]]:
    """The same resampled medians drawn from their distribution, at a cost independent of the number of steps
    (``before`` and ``after`` sorted)."""
    while True:
        b = _resampled_median(before, rng)
        yield b, _resampled_median(after, rng)


def _resampled_median(ordered: Sequence[float], rng: random.Random) -> float:
    """The median of len(ordered) values drawn with replacement from ``ordered`` (sorted): the draws' indexes are
    floor(n·U) for uniform U, so the m-th smallest index is floor(n·U₍ₘ₎) with U₍ₘ₎ ~ Beta(m, n − m + 1), and the
    next one is the smallest of the n − m uniforms above U₍ₘ₎."""
    n = len(ordered)
    m = (n + 1) // 2
    low = rng.betavariate(m, n - m + 1)
    if n % 2:
        return ordered[min(int(low * n), n - 1)]
    high = low + (1.0 - low) * (1.0 - rng.random() ** (1.0 / (n - m)))
    return (ordered[min(int(low * n), n - 1)] + ordered[min(int(high * n), n - 1)]) / 2
