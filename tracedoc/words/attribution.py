"""Where each GPU's time went (the report's ``attribution``), summed over steps, for the text and Markdown reports."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracedoc.causes import OUTSIDE_CAUSES, label, outside_rows, window_rows
from tracedoc.units import fmt_ms

if TYPE_CHECKING:
    from tracedoc.report import Report

MAX_CAUSES = 6
MAX_STARTUP_DETAILS = 3  # what start-up held, named in the window line
# Causes whose detail only repeats the cause ('kernels', 'blocking syncs'): summaries leave it out.
GENERIC_DETAIL_CAUSES = ("gpu_compute", "launch_overhead", "host_sync")


def cause_label(cause: str) -> str:
    """The label of an attribution cause; an unknown one (a saved report's) as it is."""
    return label(cause)


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
    """Per (rank, device): its window's causes, largest first (at most MAX_CAUSES; the rest summed as 'other
    causes'), as shares of the window."""
    totals: dict[tuple[Any, Any], float] = defaultdict(float)
    by_cause: dict[tuple[Any, Any], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_detail: dict[tuple[Any, Any, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in window_rows(rows):
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


def window_text(report: Report) -> str | None:
    """What the findings judge and what they leave out: "Judged: 28 steps (found by the host range 'train_step'),
    after 1 warm-up step. Not judged: start-up 8.8 s (NCCL initialisation 1.8 s, …) · warm-up steps 2.3 s · …".
    Outside times are the longest of any GPU's (ranks spend them side by side)."""
    window = report.window
    if not window:
        return None
    if window.get("kind") == "steps":
        count = window.get("step_count") or 0
        text = f"Judged: {count} step{'s' if count != 1 else ''} (found by {window.get('steps')})"
        warm = window.get("warmup_steps") or 0
        if warm:
            text += f", after {warm} warm-up step{'s' if warm != 1 else ''}"
    else:
        text = f"Judged: {window.get('steps')}"
    outside = _outside_parts(report.attribution)
    return text + "." + (f" Not judged: {' · '.join(outside)}." if outside else "")


def _outside_parts(rows: list[dict[str, Any]]) -> list[str]:
    """Per cause outside the window, its time on the GPU that spent the most there, with the largest details."""
    lanes: dict[tuple[str, Any, Any], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in outside_rows(rows):
        lanes[(row["cause"], row["rank"], row["device"])][str(row.get("detail") or "")] += float(row["ms"] or 0.0)
    parts = []
    for cause in OUTSIDE_CAUSES:
        mine = [details for (c, _, _), details in lanes.items() if c == cause]
        if not mine:
            continue
        details = max(mine, key=lambda d: (sum(d.values()), sorted(d)))
        text = f"{label(cause)} {fmt_ms(sum(details.values()))}"
        named = sorted(((ms, name) for name, ms in details.items()
                        if cause == "startup" and name and not name.startswith("before ")), reverse=True)
        if named:
            text += " (" + ", ".join(f"{name} {fmt_ms(ms)}" for ms, name in named[:MAX_STARTUP_DETAILS]) + ")"
        parts.append(text)
    return parts
