"""The comparison of two runs: step times and their change, where the time went, kernels, findings, ranks.

``build_diff(before, after)`` checks the sides compare (one kind of input, kernels in common) and assembles the
Diff that the renderers and ``to_dict`` (the versioned JSON, ``"kind": "diff"``) read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracedoc.diff.efficiency import EfficiencyRow, OperatorRow, compare_efficiency, compare_operators
from tracedoc.diff.findings import CROSS_RANK_RULES, NEW, PERSISTING, RESOLVED, FindingChange, match_findings
from tracedoc.diff.kernels import (
    KernelRow,
    NcuRow,
    match_kernels,
    match_ncu,
    ncu_kernel_rows,
    renamed,
    rewrite_label,
    rewritten_kernel,
    with_stalls,
)
from tracedoc.diff.memory import GrowthSiteRow, MemoryRow, basis_mismatch, compare_memory
from tracedoc.diff.side import KERNEL_PROFILE, Side, check_kinds
from tracedoc.diff.steps import (
    BASIS_TEXT,
    CauseRow,
    StepComparison,
    compare_causes,
    compare_steps,
    step_tables,
    wait_per_step,
)
from tracedoc.errors import InputError
from tracedoc.report_tables import METRICS
from tracedoc.units import fmt_pct
from tracedoc.version import __version__

DIFF_SCHEMA = 1
# Kernel profiles measure each kernel once, replayed under a locked clock: a change of their time under this % is
# taken as no change.
KERNEL_NOISE_PCT = 5.0


# A kernel's time as the report declares it (lower is better): which way a change of it goes.
_KERNEL_TIME = METRICS["top_kernels"].measure("total_ms")


@dataclass
class RankRow:
    """One rank across the two sides: its steps and its wait for later peers (ms per step)."""

    steps: StepComparison
    wait_before_ms: float | None
    wait_after_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.steps.to_dict(), "wait_for_peer_ms_per_step": {
            "before": None if self.wait_before_ms is None else round(self.wait_before_ms, 3),
            "after": None if self.wait_after_ms is None else round(self.wait_after_ms, 3)}}


@dataclass
class Diff:
    """Everything a diff says, for the renderers."""

    before: Side
    after: Side
    step_basis: tuple[str, str]
    job: StepComparison
    ranks: list[RankRow]
    cause_ranks: tuple[int | None, int | None]  # the rank whose causes are compared, on each side
    causes: list[CauseRow]
    kernels: list[KernelRow]
    kernel_basis: str
    ncu: list[NcuRow]
    findings: list[FindingChange]
    per_step_items: float | None = None
    efficiency: list[EfficiencyRow] = field(default_factory=list)  # MFU/MBU per rank (tracedoc.diff.efficiency)
    operators: list[OperatorRow] = field(default_factory=list)  # the aten ops whose GPU time changed most
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # why the verdict may compare runs that do not compare
    memory: list[MemoryRow] = field(default_factory=list)  # per GPU with allocator data on either side
    growth_sites: list[GrowthSiteRow] = field(default_factory=list)  # sites holding memory step after step

    def summary_value(self, key: str) -> tuple[float | None, float | None]:
        """A headline number (wall_ms, gpu_busy_pct) of both sides."""
        return _number(self.before.report.summary.get(key)), _number(self.after.report.summary.get(key))

    def throughput(self) -> tuple[float, float] | None:
        """Items per second on both sides from the job's median step, when --per-step-items was given."""
        if not self.per_step_items or not self.job.before or not self.job.after:
            return None
        if self.job.before.median_ms <= 0 or self.job.after.median_ms <= 0:
            return None
        return (1000.0 * self.per_step_items / self.job.before.median_ms,
                1000.0 * self.per_step_items / self.job.after.median_ms)

    def by_status(self, status: str) -> list[FindingChange]:
        return [c for c in self.findings if c.status == status]

    def cross_rank(self) -> list[FindingChange]:
        """The straggler and expert-imbalance findings of either side, with what became of them."""
        return [c for c in self.findings if c.finding.rule in CROSS_RANK_RULES]

    def kernel_time(self) -> tuple[float, float] | None:
        """Kernel profiles: the time of the kernels profiled on both sides (ms, before and after)."""
        if self.before.kind != KERNEL_PROFILE:
            return None
        matched = [k for k in self.kernels if k.before and k.after]
        before, after = sum(k.before.total_ms for k in matched), sum(k.after.total_ms for k in matched)  # type: ignore
        return (before, after) if before > 0 and after > 0 else None

    @property
    def verdict(self) -> str:
        """'faster', 'slower', 'no significant change', or 'no steps to compare': from the steps, and for kernel
        profiles (one measured launch per kernel, no steps) from the time of the kernels on both sides, a change
        under KERNEL_NOISE_PCT % being no change."""
        if self.job.change:
            return self.job.change.direction
        if (times := self.kernel_time()) is not None:
            pct = 100.0 * (times[1] / times[0] - 1.0)
            if abs(pct) < KERNEL_NOISE_PCT:
                return "no significant change"
            return "faster" if _KERNEL_TIME.improved(pct) else "slower"
        return "no steps to compare"

    def to_dict(self) -> dict[str, Any]:
        wall, busy, rate = self.summary_value("wall_ms"), self.summary_value("gpu_busy_pct"), self.throughput()
        matched = [k for k in self.kernels if k.status == "matched"]
        out: dict[str, Any] = {
            "tracedoc": __version__, "schema": DIFF_SCHEMA, "kind": "diff",
            "before": _side_dict(self.before, self.step_basis[0]),
            "after": _side_dict(self.after, self.step_basis[1]),
            "verdict": self.verdict,
            "steps": {"job": self.job.to_dict(), "ranks": [r.to_dict() for r in self.ranks]},
            "wall_ms": _pair(wall), "gpu_busy_pct": _pair(busy),
            "throughput": None if rate is None else {"items_per_step": self.per_step_items,
                                                     "before_items_per_s": round(rate[0], 3),
                                                     "after_items_per_s": round(rate[1], 3),
                                                     "change_pct": round(100.0 * (rate[1] / rate[0] - 1.0), 2)},
            "attribution": {"rank": {"before": self.cause_ranks[0], "after": self.cause_ranks[1]},
                            "causes": [c.to_dict() for c in self.causes]},
            "kernels": {"basis": self.kernel_basis, "matched": len(matched),
                        "new": [k.name for k in self.kernels if k.status == "new"],
                        "vanished": [k.name for k in self.kernels if k.status == "vanished"],
                        "regressions": [k.name for k in regressions(self.kernels)],
                        "improvements": [k.name for k in improvements(self.kernels)],
                        "slower_per_launch": [k.name for k in changed_by(self.kernels, FROM_MEAN, 1)],
                        "faster_per_launch": [k.name for k in changed_by(self.kernels, FROM_MEAN, -1)],
                        "more_launches": [k.name for k in changed_by(self.kernels, FROM_LAUNCHES, 1)],
                        "fewer_launches": [k.name for k in changed_by(self.kernels, FROM_LAUNCHES, -1)],
                        "rows": [k.to_dict() for k in self.kernels]},
            "ncu_kernels": [r.to_dict() for r in self.ncu],
            "findings": {"resolved": [c.to_dict() for c in self.by_status(RESOLVED)],
                         "new": [c.to_dict() for c in self.by_status(NEW)],
                         "persisting": [c.to_dict() for c in self.by_status(PERSISTING)]},
            "cross_rank": [c.to_dict() for c in self.cross_rank()],
            "efficiency": {"ranks": [r.to_dict() for r in self.efficiency],
                           "operators": [o.to_dict() for o in self.operators]},
            "notes": self.notes,
            "warnings": self.warnings,
        }
        if self.memory:  # only where either side holds allocator data (bytes)
            out["memory"] = {"devices": [m.to_dict() for m in self.memory],
                             "growth_sites": [s.to_dict() for s in self.growth_sites]}
        return out


TOP_KERNELS = 10


def regressions(kernels: list[KernelRow], limit: int = TOP_KERNELS) -> list[KernelRow]:
    """Kernels present on both sides that take more time after, largest first."""
    return [k for k in kernels if k.status == "matched" and k.weight > 0][:limit]


def improvements(kernels: list[KernelRow], limit: int = TOP_KERNELS) -> list[KernelRow]:
    """Kernels present on both sides that take less time after, largest first."""
    return [k for k in kernels if k.status == "matched" and k.weight < 0][:limit]


# The parts of a kernel's change (KernelRow.split): 0 from the mean time per launch, 1 from the launches.
FROM_MEAN, FROM_LAUNCHES = 0, 1
# A part under this (ms) is no change: it would show as ±0.
KERNEL_PART_MS = 5e-4


def changed_by(kernels: list[KernelRow], part: int, sign: int, limit: int = TOP_KERNELS) -> list[KernelRow]:
    """Kernels on both sides whose change from ``part`` (FROM_MEAN: slower or faster per launch; FROM_LAUNCHES:
    launched more or less often per step) has ``sign`` (+1 more time, −1 less), largest first."""
    parts = [(k, split[part]) for k in kernels if (split := k.split()) is not None]
    chosen = [(k, v) for k, v in parts if v * sign >= KERNEL_PART_MS]
    return [k for k, _ in sorted(chosen, key=lambda kv: (-abs(kv[1]), kv[0].name))][:limit]


def build_diff(before: Side, after: Side, per_step_items: float | None = None, rank: int | None = None) -> Diff:
    """Compare two sides; raises InputError when they do not compare (different kinds of input, inputs without
    steps or kernels to compare, no kernel in common)."""
    check_kinds(before, after)
    tb, ta = step_tables(before.report, after.report)
    notes = []
    if tb.basis != ta.basis:
        notes.append(f"step times are {BASIS_TEXT[tb.basis]} before and {BASIS_TEXT[ta.basis]} after")
    job = compare_steps(tb.job(), ta.job())
    ranks = [RankRow(compare_steps(tb.by_rank.get(r, {}), ta.by_rank.get(r, {}), rank=r),
                     wait_per_step(before.report, r, tb.device[r]) if r in tb.device else None,
                     wait_per_step(after.report, r, ta.device[r]) if r in ta.device else None)
             for r in sorted(set(tb.by_rank) | set(ta.by_rank))]
    if rank is not None and rank not in tb.by_rank and rank not in ta.by_rank:
        raise InputError(f"--rank {rank}: neither side has steps on that rank")
    cause_b = rank if rank is not None else tb.slowest_rank()
    cause_a = cause_b if cause_b in ta.by_rank else ta.slowest_rank()
    if cause_b is not None and cause_a is not None and cause_a != cause_b:
        notes.append(f"rank {cause_b} has no steps after: its causes are compared with rank {cause_a}'s")
    causes = compare_causes(before.report, after.report, (cause_b, tb.device.get(cause_b)),
                            (cause_a, ta.device.get(cause_a))) if cause_b in tb.device and cause_a in ta.device else []
    rewrite = rewritten_kernel(ncu_kernel_rows(before.report.metrics), ncu_kernel_rows(after.report.metrics)) \
        if before.kind == KERNEL_PROFILE else None
    if rewrite is not None:
        notes.append(f"{rewrite[0]} and {rewrite[1]} are compared as one kernel rewritten: the only kernel of each "
                     "side that the other lacks")
    kernels, kernel_basis = _kernels(before, after, len(tb.job()), len(ta.job()), rewrite)
    separate = _separate_runs(before, after)  # their inputs are no ranks: the rank counts say nothing more
    warnings = [w for w in (separate, None if separate else _ranks_differ(before, after), _few_in_common(kernels),
                            basis_mismatch(before.report, after.report)) if w is not None]
    if not (before.kernels_complete and after.kernels_complete):
        notes.append("a saved report keeps only each rank's top kernels: kernels outside them show as new or "
                     "vanished")
    ncu = match_ncu(renamed(_ncu_rows(before), rewrite, key="kernel"), _ncu_rows(after))
    if rewrite is not None:
        for row in ncu:
            row.kernel = rewrite_label(rewrite) if row.kernel == rewrite[1] else row.kernel
    findings = match_findings(before.report.findings, after.report.findings, rewrite)
    memory, growth_sites = compare_memory(before.report, after.report)
    return Diff(before, after, (tb.basis, ta.basis), job, ranks, (cause_b, cause_a), causes, kernels, kernel_basis,
                ncu, findings, per_step_items, efficiency=compare_efficiency(before.report, after.report),
                operators=compare_operators(before.report, after.report), notes=notes, warnings=warnings,
                memory=memory, growth_sites=growth_sites)


def _kernels(before: Side, after: Side, before_steps: int, after_steps: int,
             rewrite: tuple[str, str] | None = None) -> tuple[list[KernelRow], str]:
    """The matched kernels and what they are (``rewrite``: a kernel profiles' one kernel rewritten, matched across
    its two names); raises InputError when the sides share none."""
    if before.kind == KERNEL_PROFILE:
        rows_b, rows_a = renamed(ncu_kernel_rows(before.report.metrics), rewrite), ncu_kernel_rows(after.report.metrics)
        basis = "kernels profiled by Nsight Compute"
    else:
        rows_b, rows_a = before.kernels, after.kernels
        basis = "every kernel" if before.kernels_complete and after.kernels_complete else "top kernels per rank"
    for name, side, rows in (("BEFORE", before, rows_b), ("AFTER", after, rows_a)):
        if not rows:
            raise InputError(f"{name} ({side.label}) holds no kernel: nothing to compare")
    kernels = match_kernels(rows_b, rows_a, before_steps, after_steps)
    if rewrite is not None:
        for row in kernels:
            row.name = rewrite_label(rewrite) if row.name == rewrite[1] else row.name
    if not any(k.status == "matched" for k in kernels):
        names_b, names_a = len({r["name"] for r in rows_b}), len({r["name"] for r in rows_a})
        raise InputError(f"BEFORE and AFTER share no kernel (of {names_b} and {names_a} kernel names): "
                         "not two runs of one program")
    return kernels, basis


def _ncu_rows(side: Side) -> list[dict[str, Any]]:
    """The side's ncu kernels with their top stall reasons."""
    metrics = side.report.metrics
    return with_stalls(metrics.get("ncu_kernels", []), metrics.get("ncu_warp_stalls", []))


# Runs whose kernels in common hold under this % of either side's kernel time are likely not runs of one program
# (torch.compile, which fuses most kernels of an eager run into new ones, keeps over half in the bundled pair).
FEW_IN_COMMON_PCT = 25.0


def _few_in_common(kernels: list[KernelRow]) -> str | None:
    """A warning when the kernels of both sides hold under FEW_IN_COMMON_PCT % of either side's kernel time."""
    total_b = sum(k.before.total_ms for k in kernels if k.before)
    total_a = sum(k.after.total_ms for k in kernels if k.after)
    shared_b = sum(k.before.total_ms for k in kernels if k.before and k.after)
    shared_a = sum(k.after.total_ms for k in kernels if k.before and k.after)
    if not total_b or not total_a:
        return None
    pct_b, pct_a = 100.0 * shared_b / total_b, 100.0 * shared_a / total_a
    if min(pct_b, pct_a) >= FEW_IN_COMMON_PCT:
        return None
    names = sum(1 for k in kernels if k.status == "matched")
    names_b, names_a = sum(1 for k in kernels if k.before), sum(1 for k in kernels if k.after)
    return (f"few kernels in common: {names} of the {names_b} kernel names before and the {names_a} after, "
            f"{fmt_pct(pct_b)} of the kernel time before and {fmt_pct(pct_a)} after; are these runs of one program?")


def _separate_runs(before: Side, after: Side) -> str | None:
    """A warning when a side's inputs are separate runs, not one job's ranks (its report's ``mixed_inputs``): its
    step is the slowest of them, so the verdict does not compare two runs of one program."""
    mixed = [(name, side.report.summary["mixed_inputs"]) for name, side in (("BEFORE", before), ("AFTER", after))
             if side.report.summary.get("mixed_inputs")]
    if not mixed:
        return None
    what = mixed[0][1] if len(mixed) == 1 else "; ".join(f"{name}, {text}" for name, text in mixed)
    sides = " and ".join(name for name, _ in mixed)
    return (f"{sides} hold{'s' if len(mixed) == 1 else ''} separate runs, not the ranks of one job: {what}. Such a "
            "side's step is its slowest run's, so the verdict compares different programs; diff one run against "
            "another")


def _ranks_differ(before: Side, after: Side) -> str | None:
    """A warning when the sides hold different numbers of ranks: the job's step is each side's slowest rank's."""
    if before.ranks == after.ranks:
        return None
    return (f"BEFORE holds {before.ranks} rank{'s' if before.ranks != 1 else ''} and AFTER {after.ranks}: the job's "
            "step is the slowest rank's on each side, so the verdict compares the steps of different jobs")


def _side_dict(side: Side, basis: str) -> dict[str, Any]:
    return {"path": side.label, "source": side.source, "kind": side.kind, "formats": side.formats,
            "ranks": side.ranks, "step_basis": basis, "summary": side.report.summary,
            "findings": len(side.report.findings)}


def _pair(values: tuple[float | None, float | None]) -> dict[str, Any]:
    b, a = values
    change = None if b is None or a is None or not b else round(100.0 * (a / b - 1.0), 2)
    return {"before": b, "after": a, "change_pct": change}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
