"""Findings of the two sides matched by rule and scope: resolved, new, and persisting (changed or not).

Two findings are the same problem when they come from the same rule and apply to the same scope (rank, device,
stream, kernel, …); several findings of one rule on one scope pair in their ranked order. A persisting finding
has changed when its severity differs or its saving moved by more than ``CHANGE_MS`` and ``CHANGE_SHARE`` of
the larger of the two.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from tracedoc.report import SEVERITIES, Finding

CHANGE_MS = 0.05
CHANGE_SHARE = 0.10
RESOLVED, NEW, PERSISTING = "resolved", "new", "persisting"
# The cross-rank findings a multi-rank diff reports on by name.
CROSS_RANK_RULES = ("straggler-rank", "expert-imbalance")


def scope_key(finding: Finding, rewrite: tuple[str, str] | None = None) -> tuple[tuple[str, Any], ...]:
    """The finding's scope as a key; a kernel rewritten between the sides (before's name, after's name) is keyed
    by its after name."""
    scope = finding.scope.to_dict()
    if rewrite is not None and scope.get("kernel") == rewrite[0]:
        scope["kernel"] = rewrite[1]
    return tuple(sorted(scope.items()))


@dataclass
class FindingChange:
    """One problem across the two sides: the finding before and after (None where absent)."""

    status: str
    before: Finding | None
    after: Finding | None

    @property
    def finding(self) -> Finding:
        """The finding that names the problem (after's when it persists)."""
        return self.after or self.before  # type: ignore[return-value]

    @property
    def changed(self) -> bool:
        if self.before is None or self.after is None:
            return False
        moved = abs(self.after.impact_ms - self.before.impact_ms)
        return self.before.severity != self.after.severity or (
            moved > CHANGE_MS and moved > CHANGE_SHARE * max(self.before.impact_ms, self.after.impact_ms))

    def to_dict(self) -> dict[str, Any]:
        f = self.finding
        out: dict[str, Any] = {"status": self.status, "rule": f.rule, "title": f.title, "scope": f.scope.to_dict()}
        for side, finding in (("before", self.before), ("after", self.after)):
            out[side] = None if finding is None else {"severity": finding.severity,
                                                      "impact_ms": finding.impact_ms, "impact_pct": finding.impact_pct}
        if self.before is not None and self.after is not None:
            out["changed"] = self.changed
            out["delta_impact_ms"] = round(self.after.impact_ms - self.before.impact_ms, 3)
        return out


def match_findings(before: list[Finding], after: list[Finding],
                   rewrite: tuple[str, str] | None = None) -> list[FindingChange]:
    """Every finding of either side as resolved, new or persisting; resolved first, then new, then persisting,
    each by severity and saving. ``rewrite`` names a kernel rewritten between the sides (its findings match
    across the two names)."""
    pending: dict[tuple[str, tuple[tuple[str, Any], ...]], list[Finding]] = defaultdict(list)
    for f in after:
        pending[(f.rule, scope_key(f))].append(f)
    out = []
    for f in before:
        matches = pending.get((f.rule, scope_key(f, rewrite)))
        out.append(FindingChange(PERSISTING, f, matches.pop(0)) if matches else FindingChange(RESOLVED, f, None))
    out += [FindingChange(NEW, None, f) for fs in pending.values() for f in fs]
    order = {RESOLVED: 0, NEW: 1, PERSISTING: 2}
    return sorted(out, key=lambda c: (order[c.status], _severity_rank(c.finding.severity), -c.finding.impact_ms))


def _severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def at_or_above(severity: str, threshold: str) -> bool:
    """True when ``severity`` is ``threshold`` or worse."""
    return _severity_rank(severity) <= _severity_rank(threshold)
