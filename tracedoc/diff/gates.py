"""The CI gates of ``tracedoc diff``: a significant step-time regression past a percentage, a new finding at or
above a severity. Each returns the reasons it fails (empty: it passes)."""

from __future__ import annotations

from tracedoc.diff.findings import NEW, at_or_above
from tracedoc.diff.model import Diff
from tracedoc.errors import InputError
from tracedoc.words.findings import scope_text
from tracedoc.words.sanitize import one_line


def regression_failures(diff: Diff, pct: float) -> list[str]:
    """Why the job's median step (the slowest rank, step by step) got worse by more than ``pct`` %, with a
    significant change; raises InputError when a side has no steps to judge on."""
    change = diff.job.change
    if change is None:
        side = "BEFORE" if diff.job.before is None else "AFTER"
        raise InputError(f"--fail-on-regression needs step times on both sides; {side} has none")
    if change.significant and change.pct > pct:
        lo, hi = change.ci_pct
        return [f"regression: the job's median step is {change.pct:+.1f}% (95% CI {lo:+.1f}% to {hi:+.1f}%), "
                f"more than {pct:g}%"]
    return []


def new_finding_failures(diff: Diff, severity: str) -> list[str]:
    """The new findings at or above ``severity``."""
    return [f"new {c.finding.severity} finding: {one_line(c.finding.rule)} "
            f"({one_line(scope_text(c.finding.scope.to_dict()))})"
            for c in diff.by_status(NEW) if at_or_above(c.finding.severity, severity)]

