"""What if a finding were fixed: the projected step time, and what becomes the bottleneck next.

The projection works on the time attribution the savings are drawn from: fixing a finding removes its saving from
its rank's steps (each step loses its share of it: the share of the finding's causes it holds), and the other
findings keep theirs. So a problem that costs
little behind a bigger one (a per-step sync behind a slow data loader) shows its real weight once the bigger one
is gone: it is named as the next bottleneck, with its share of the projected step. A problem that costs almost nothing
today because of the bigger one is named as latent: blocking syncs made every step while the host is the
bottleneck find the GPU already drained, and start draining a busy GPU once the host is faster. This is a
projection over the attributed causes, not a replay of the dependency graph: it assumes the rest of the step
keeps its length.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from tracedoc.causes import label as cause_label
from tracedoc.causes import window_rows
from tracedoc.report import Finding, Report
from tracedoc.units import fmt_ms

TOP_FINDINGS = 3  # the report carries the what-if of this many of its largest findings
HOST_CAUSES = frozenset({"data_loading", "phase", "host_work", "uninstrumented_host"})  # the host is the bottleneck


@dataclass
class WhatIf:
    """The projection for one finding, on its rank (times in ms, shares in %)."""

    finding: int  # its number in the report (1-based)
    rule: str
    rank: int
    step_ms: float  # median step span now (the window when the trace has no steps)
    projected_step_ms: float
    gain_pct: float
    next: str  # what limits the step next: a finding ('host-sync (#2)') or the largest remaining cause
    next_share_pct: float  # its share of the projected step
    latent: str | None = None  # a problem today's bottleneck hides, that the fix will expose

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def what_if(report: Report, number: int) -> WhatIf | None:
    """The projection for finding ``number`` (1-based); None when it has no rank or no attributed time, and for a
    finding that names no fix for a known cause (an informational one, or idle waiting on a dependency the trace
    cannot name): removing that time is not a change anyone can make from it."""
    finding = report.findings[number - 1]
    rank = finding.scope.rank
    if rank is None or finding.impact_ms <= 0 or not _projects(finding):
        return None  # before the attribution is read: top_what_ifs asks of every finding until it has its few
    spans = _step_spans(window_rows(report.attribution), rank, frozenset(finding.drawn_from))
    if not spans:
        return None
    import statistics  # here: a report read back from the cache is not projected again (statistics imports decimal)

    step = statistics.median(span for span, _ in spans.values())
    projected_steps = _projected_steps(spans, finding.impact_ms)
    projected = statistics.median(projected_steps)
    remaining = sum(projected_steps)
    nxt, share = _next_bottleneck(report, finding, rank, remaining)
    gain = 100.0 * (1 - projected / step) if step > 0 else 0.0
    return WhatIf(finding=number, rule=finding.rule, rank=rank, step_ms=round(step, 3),
                  projected_step_ms=round(projected, 3), gain_pct=round(gain, 2), next=nxt,
                  next_share_pct=round(share, 1), latent=_latent_syncs(report, finding, rank))


def _projected_steps(spans: dict[Any, tuple[float, float]], saving_ms: float) -> list[float]:
    """Each step's span once ``saving_ms`` is gone, taken from the steps in proportion to the time of the finding's
    causes in each (a checkpoint in one step of five shortens that step, not all five), never more than that time;
    in proportion to the steps' spans when the finding's causes have no time in them."""
    claimable = sum(drawn for _, drawn in spans.values())
    if claimable > 0:
        taken = min(saving_ms / claimable, 1.0)
        return [span - drawn * taken for span, drawn in spans.values()]
    total = sum(span for span, _ in spans.values())
    keep = max(total - saving_ms, 0.0) / total if total > 0 else 1.0
    return [span * keep for span, _ in spans.values()]


def projection_for(report: Report, rule: str) -> dict[str, Any] | None:
    """The projection for the largest finding of ``rule`` (``--what-if RULE``), added to the report's what_if when
    not there yet; None when ``rule`` found nothing or nothing can be projected for it."""
    number = next((i for i, f in enumerate(report.findings, 1) if f.rule == rule), None)
    if number is None:
        return None
    if (known := report.what_if_for(number)) is not None:
        return known
    projection = what_if(report, number)
    if projection is None:
        return None
    report.what_if.append(projection.to_dict())
    return projection.to_dict()


def top_what_ifs(report: Report, count: int = TOP_FINDINGS) -> list[WhatIf]:
    """The projections of the report's largest findings that own their time (not part of another)."""
    out: list[WhatIf] = []
    for number, finding in enumerate(report.findings, 1):
        if len(out) == count:
            break
        if finding.part_of is None and (projection := what_if(report, number)) is not None:
            out.append(projection)
    return out


def _step_spans(rows: list[dict[str, Any]], rank: int | None, causes: frozenset[str]) -> dict[Any, tuple[float, float]]:
    """Per step of ``rank``: its span (ms), the slowest device's, and the time of ``causes`` on that device; the whole
    window when there are no steps."""
    spans: dict[tuple[Any, Any], list[float]] = defaultdict(lambda: [0.0, 0.0])
    has_steps = any(r["step"] is not None for r in rows if r["rank"] == rank)
    for row in rows:
        if row["rank"] == rank and (row["step"] is not None or not has_steps):
            ms = float(row["ms"] or 0.0)
            span = spans[(row["device"], row["step"])]
            span[0] += ms
            span[1] += ms if row["cause"] in causes else 0.0
    per_step: dict[Any, tuple[float, float]] = {}
    for (_, step), (ms, drawn) in spans.items():
        if step not in per_step or ms > per_step[step][0]:
            per_step[step] = (ms, drawn)
    return per_step


def _projects(finding: Finding) -> bool:
    """Whether fixing a finding is a projection tracedoc can make: a problem with a fix (not informational) whose
    saving comes from time of a known cause."""
    return finding.severity != "info" and set(finding.drawn_from) != {"dependency_wait"}


def _share(ms: float, remaining_ms: float) -> float:
    """``ms`` as % of the projected time, at most all of it (a finding on several GPUs of the rank adds up their
    time, the projected step is the slowest GPU's)."""
    return 100.0 * min(ms, remaining_ms) / remaining_ms if remaining_ms > 0 else 0.0


def _latent_syncs(report: Report, fixed: Finding, rank: int) -> str | None:
    """The rank's per-step blocking syncs, when the fix speeds its host up and no host-sync finding names them: made
    while the host is the bottleneck, they find the GPU drained already and cost little; once the host is faster
    they block on a GPU that is still busy, and it idles from their return until the host launches again."""
    if not HOST_CAUSES.intersection(fixed.drawn_from):
        return None
    if any(f.rule == "host-sync" and f.scope.rank == rank for f in report.findings):
        return None
    for row in report.metrics.get("host_syncs") or []:
        per_step = row.get("syncs_per_step")
        if row.get("rank") == rank and per_step is not None and float(per_step) >= 1:
            count = f"{float(per_step):.3g}"
            one = count == "1"
            return (f"{count} blocking sync{'' if one else 's'} a step (mostly "
                    f"'{row.get('top_origin')}') cost {fmt_ms(float(row.get('gpu_idle_ms') or 0.0))} of GPU idle now, "
                    f"as the GPU has mostly drained before the host reaches {'it' if one else 'them'}; with the host "
                    f"faster, {'it' if one else 'each'} may wait for a busy GPU and leave it idle until the host "
                    "launches again (host-sync's advice applies)")
    return None


def _next_bottleneck(report: Report, fixed: Finding, rank: int, remaining_ms: float) -> tuple[str, float]:
    """The largest other finding of the rank that owns its time and has a fix, else the largest attributed cause
    left."""
    for number, f in enumerate(report.findings, 1):
        if f is not fixed and f.scope.rank == rank and f.part_of is None and f.impact_ms > 0 and _projects(f):
            return f"{f.rule} (#{number})", _share(f.impact_ms, remaining_ms)
    causes: dict[str, float] = defaultdict(float)
    for row in window_rows(report.attribution):
        if row["rank"] == rank and row["step"] is not None:
            causes[row["cause"]] += float(row["ms"] or 0.0)
    for cause in fixed.drawn_from:  # what the fix removes is gone; spread over its causes, the rest stays
        causes[cause] = max(causes[cause] - fixed.impact_ms / len(fixed.drawn_from), 0.0)
    if not causes:
        return "nothing left to attribute", 0.0
    cause = max(causes, key=causes.__getitem__)
    return cause_label(cause), _share(causes[cause], remaining_ms)
