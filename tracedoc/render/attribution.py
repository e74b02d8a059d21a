"""Where each GPU's time went (the report's ``attribution``), summed over steps, for the text and Markdown reports."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

CAUSE_LABELS = {
    "gpu_compute": "GPU computing", "comm_transfer": "communication", "wait_for_peer": "waiting for a peer",
    "launch_overhead": "launch overhead", "host_sync": "blocking syncs", "data_loading": "data loading",
    "phase": "named phases", "host_work": "host work", "uninstrumented_host": "un-instrumented host time",
    "prologue": "prologue",
}
MAX_CAUSES = 6
# Causes whose detail only repeats the cause ('kernels', 'blocking syncs'): summaries leave it out.
GENERIC_DETAIL_CAUSES = ("gpu_compute", "launch_overhead", "host_sync")


def cause_label(cause: str) -> str:
    """The label of an attribution cause; an unknown one (a saved report's) as it is."""
    return CAUSE_LABELS.get(cause, cause)


def part_of_text(number: int) -> str:
    """The sentence a finding carries when a bigger one already counts its time."""
    return f"Its time is part of finding #{number}'s, which counts it: the saving here is what is left."


@dataclass
class CauseShare:
    """One cause's time on one device, with the detail that holds most of it."""

    cause: str
    ms: float
    pct: float
    top_detail: str | None

    @property
    def label(self) -> str:
        return cause_label(self.cause)

    @property
    def telling_detail(self) -> str | None:
        """The top detail, unless it only repeats the cause."""
        return self.top_detail if self.cause not in GENERIC_DETAIL_CAUSES else None


def attribution_by_device(rows: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[CauseShare]]:
    """Per (rank, device): its causes, largest first (at most MAX_CAUSES; the rest summed as 'other causes')."""
    totals: dict[tuple[Any, Any], float] = defaultdict(float)
    by_cause: dict[tuple[Any, Any], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_detail: dict[tuple[Any, Any, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        key = (row["rank"], row["device"])
        ms = float(row["ms"] or 0.0)
        totals[key] += ms
        by_cause[key][row["cause"]] += ms
        if row.get("detail"):
            by_detail[(*key, row["cause"])][row["detail"]] += ms
    out: dict[tuple[Any, Any], list[CauseShare]] = {}
    for key, causes in sorted(by_cause.items(), key=lambda kv: tuple(map(str, kv[0]))):
        total = totals[key] or 1.0
        ordered = sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))
        shares = []
        for cause, ms in ordered[:MAX_CAUSES]:
            details = by_detail.get((*key, cause))
            top = max(details, key=details.__getitem__) if details else None
            shares.append(CauseShare(cause, ms, 100.0 * ms / total, top))
        rest = sum(ms for _, ms in ordered[MAX_CAUSES:])
        if rest > 0:
            shares.append(CauseShare("other", rest, 100.0 * rest / total, None))
        out[key] = shares
    return out
