"""Savings drawn from one attribution of each GPU's time, so that findings never claim the same time twice.

The attribution (analyses/attribution/time.sql) cuts every device's window into exclusive causes: GPU computing,
communication, waiting for a peer, launch overhead, a blocking sync, data loading, a named phase, host work,
un-instrumented host time (tracedoc.causes). What lies outside the window (start-up, warm-up) is never claimed.
A rule that saves GPU time names the causes its saving comes out of (``claims`` in its file). Each such finding
estimates its saving as before (the rule's ``impact_ms``), then draws it from the unclaimed time of those causes
in its scope (rank and device), largest estimate first: a finding can never save more than the time its causes
hold, and time one finding took is not available to another. A finding left with less than it estimated because
a bigger one took that time is marked ``part_of`` that finding.

The compute kernels of each device keep a floor no finding may claim: the GPU work no fix removes
(analyses/efficiency/floor.sql: the kernels' time at the roofline where the operators are modelled, else the least
kernel time of any device of the run). A finding whose saving that floor cuts says so in its evidence (FLOOR).

So the savings of one rank's findings add up to at most that rank's time less its GPU floor. Rules that judge
kernels from a profile (Nsight Compute), health or hangs claim nothing and keep their own estimates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracedoc.causes import WINDOW_CAUSES
from tracedoc.report import Evidence, Finding

CAUSES = WINDOW_CAUSES  # what a rule may claim: the causes of the judged window
_EPS_MS = 1e-6

PoolKey = tuple[Any, Any, str, str | None]  # rank, device, cause, detail
FLOOR = "GPU floor its saving leaves"  # the evidence of a finding whose saving the GPU floor cut


@dataclass(frozen=True)
class Claim:
    """The attribution causes a rule's saving comes out of; ``details`` narrows them to some details.

    ``fraction`` (an SQL expression on the rule's row, default 1) is the share of the time a fix removes that it
    saves: hiding communication behind compute removes the exposed time but slows the compute by the SMs the
    communication holds.
    """

    causes: tuple[str, ...]
    details: tuple[str, ...] = ()
    fraction: str | None = None

    def matches(self, key: PoolKey, finding: Finding) -> bool:
        rank, device, cause, detail = key
        scope = finding.scope
        if scope.rank is not None and rank != scope.rank:
            return False
        if scope.device is not None and device != scope.device:
            return False
        return cause in self.causes and (not self.details or detail in self.details)


def allocate(candidates: Sequence[tuple[Finding, Claim, float]], pools: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Cut each candidate's ``impact_ms`` (the time its fix removes) to the unclaimed attributed time of its claim,
    largest estimate first, and keep the candidate's fraction of it as the saving.

    ``candidates``: (finding, claim, fraction). ``pools``: rows with rank, device, cause, detail, ms (the
    attribution summed over steps, less the GPU floor) and floor_ms (that floor). A finding that wanted more than
    it got from pools that hold a floor gains the FLOOR evidence. Returns, for a finding that lost time to an
    earlier one, ``{id(finding): id(the finding that took most of it)}``.
    """
    remaining: dict[PoolKey, float] = defaultdict(float)
    floor: dict[PoolKey, float] = defaultdict(float)
    for row in pools:
        key = (row["rank"], row["device"], row["cause"], row["detail"])
        remaining[key] += max(float(row["ms"] or 0.0), 0.0)
        floor[key] += float(row.get("floor_ms") or 0.0)
    taken_by: dict[PoolKey, list[tuple[int, float]]] = defaultdict(list)
    part_of: dict[int, int] = {}
    # the pools of each rank, in the order they are drawn from: a finding about one rank looks at its rank's
    # alone, so that the work grows with the ranks, not with their square
    ordered = sorted(remaining, key=lambda k: tuple(map(str, k)))
    of_rank: dict[Any, list[PoolKey]] = defaultdict(list)
    for key in ordered:
        of_rank[key[0]].append(key)
    order = sorted(candidates, key=lambda c: (-c[0].impact_ms, c[0].rule, str(c[0].scope.to_dict())))
    for finding, claim, fraction in order:
        pools_here = ordered if finding.scope.rank is None else of_rank.get(finding.scope.rank, [])
        keys = [k for k in pools_here if claim.matches(k, finding)]
        wanted = max(finding.impact_ms, 0.0)
        got = 0.0
        for key in keys:
            take = min(remaining[key], wanted - got)
            if take <= _EPS_MS:
                continue
            remaining[key] -= take
            taken_by[key].append((id(finding), take))
            got += take
            if key[2] not in finding.drawn_from:
                finding.drawn_from.append(key[2])
        if got < wanted - 1e-3:
            owner = _largest_other_taker(keys, taken_by, id(finding))
            if owner is not None:
                part_of[id(finding)] = owner
            kept = sum(floor[k] for k in keys)
            if kept > _EPS_MS:
                finding.evidence.append(Evidence(FLOOR, round(kept, 3), "ms"))
        finding.impact_ms = round(got * min(max(fraction, 0.0), 1.0), 3)
    return part_of


def _largest_other_taker(keys: Sequence[PoolKey], taken_by: dict[PoolKey, list[tuple[int, float]]],
                         me: int) -> int | None:
    """The other finding that took the most of these pools, if any."""
    totals: dict[int, float] = defaultdict(float)
    for key in keys:
        for who, ms in taken_by[key]:
            if who != me:
                totals[who] += ms
    return max(totals, key=totals.__getitem__) if totals else None


PRIMARY = "primary finding on this kernel"  # the evidence by which a kernel's facet names its primary finding


def _evidence(finding: Finding, name: str) -> Any:
    return next((e.value for e in finding.evidence if e.name == name), None)


def facet_owners(findings: Sequence[Finding]) -> dict[int, int]:
    """Each facet of an Nsight Compute kernel (a finding that names the primary finding on its kernel and claims
    none of its time) → that primary: the finding of the named rule on the same rank, kernel, grid and block."""
    def where(f: Finding) -> tuple[Any, ...]:
        return f.scope.rank, f.scope.device, f.scope.kernel, _evidence(f, "grid"), _evidence(f, "block")

    primaries = {(f.rule, where(f)): f for f in findings if not _evidence(f, PRIMARY)}
    out = {}
    for f in findings:
        named = _evidence(f, PRIMARY)
        owner = primaries.get((named, where(f))) if named and f.impact_ms <= 0 else None
        if owner is not None and owner is not f:
            out[id(f)] = id(owner)
    return out


def empty_claim_owners(claiming: Sequence[Finding]) -> dict[int, int]:
    """Each finding of a rule that draws its saving from the attribution but found nothing of its own to save
    (low-gpu-utilization on a GPU whose idle time all waits on the host) → the finding that drew the most time on
    its rank and device, which counts the time it is about."""
    out = {}
    for f in claiming:
        if f.impact_ms > 0:
            continue
        same = [o for o in claiming if o is not f and o.impact_ms > 0 and o.scope.rank == f.scope.rank
                and (o.scope.device is None or f.scope.device is None or o.scope.device == f.scope.device)]
        if same:
            out[id(f)] = id(max(same, key=lambda o: o.impact_ms))
    return out
