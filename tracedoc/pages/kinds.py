"""Kinds of findings (``Finding.kind``, from what their rule reads), where the pages treat them differently.

A finding's time is a saving for most rules, but not for all. A hang's ``impact_ms`` is how long the ranks have
waited (nothing to save: the job is stuck), and an informational health finding's (a GPU held to its power limit)
is clock time the GPU gave up by design, with nothing broken (rules reading ``hang.*``, and ``health.*`` at
severity info). And a finding about how ranks wait for one another (``ranks.*``: a straggler, a hot expert) is seen
on the timeline with every rank, not only the one it names. Used by the finding cards, the savings chart and the
timeline's links; needs no Bokeh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracedoc.units import fmt_ms
from tracedoc.words.findings import finding_saving_text, saving_text

if TYPE_CHECKING:
    from tracedoc.report import Finding


def has_saving(finding: Finding) -> bool:
    """Whether the finding's impact is a time saving (``Finding.kind``)."""
    return finding.kind == "saving"


def impact_text(finding: Finding, wall_ms: float) -> str:
    """What a card says of the finding's time: its estimated saving, or, for a hang or an informational health
    finding, what the time is and that it is no saving."""
    kind = finding.kind
    if kind == "hang":
        return f"no saving to estimate: the job is stuck (waited at least {fmt_ms(finding.impact_ms)})"
    if kind == "health":
        lost = f" ({fmt_ms(finding.impact_ms)} of clock time given up)" if finding.impact_ms > 0 else ""
        return f"informational, no saving{lost}"
    return saving_text(finding.impact_ms, finding.impact_pct, wall_ms, finding.impact_bytes)


def saving_cell(finding: Finding, wall_ms: float) -> str:
    """A finding's saving as the findings tables of the text and Markdown reports state it: the estimated saving
    ('part of #N' where a bigger finding holds its time), 'none estimated' where it saves nothing, and for a hang
    or an informational health finding what its time is (``impact_text``), never a saving."""
    if finding.kind in ("hang", "health"):
        return impact_text(finding, wall_ms)
    if finding.impact_bytes is None and finding.impact_ms <= 0 and not finding.part_of:
        return "none estimated"
    return finding_saving_text(finding, wall_ms)


def charted(findings: Sequence[Finding]) -> list[tuple[Finding, int]]:
    """The findings that get a bar, in order: those with a saving, one per rule and GPU (the first, the largest;
    telemetry and an NVML snapshot may find the same thing on one GPU), each with how many findings it stands for.
    Findings about a kernel are all kept: one name may be several kernels (launch configurations, instances)."""
    out: dict[Any, list[Any]] = {}
    for i, f in enumerate(findings):
        if not has_saving(f):
            continue
        key = (f.rule, json.dumps(f.scope.to_dict(), sort_keys=True)) if f.scope.kernel is None else i
        if key in out:
            out[key][1] += 1
        else:
            out[key] = [f, 1]
    return [(f, n) for f, n in out.values()]


def bar_text(finding: Finding, wall_ms: float) -> str:
    """The label at a bar's end: its saving, 'part of #N' when a bigger finding counts its time, 'no saving of its
    own' for none (a finding whose time another on the same kernel counts)."""
    saving = saving_text(finding.impact_ms, finding.impact_pct, wall_ms)
    if finding.part_of:
        return f"part of #{finding.part_of}" + (f", {saving} of its own" if finding.impact_ms > 0 else "")
    return saving if finding.impact_ms > 0 else "no saving of its own"
