"""The attribution's causes (analyses/attribution/time.sql), in the order reports stack them: one table that the
savings, the wording and the pages read.

``in_window`` causes cut each GPU's window and sum to it; the others are what the trace recorded outside the
window (start-up, warm-up steps, work queued before the first step, teardown), attributed but never judged: no
finding draws a saving from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cause:
    """One attribution cause: its id (the JSON's ``cause``), label, chart colour and whether it is in the window."""

    id: str
    label: str
    color: str
    in_window: bool = True


CAUSES: tuple[Cause, ...] = (
    Cause("gpu_compute", "GPU computing", "#4c72b0"),
    Cause("comm_transfer", "communication", "#dd8452"),
    Cause("wait_for_peer", "waiting for a peer", "#c44e52"),
    Cause("launch_overhead", "launch overhead", "#e6b422"),
    Cause("dependency_wait", "waiting on a dependency", "#c9a0dc"),
    Cause("host_sync", "blocking syncs", "#937860"),
    Cause("data_loading", "data loading", "#55a868"),
    Cause("phase", "named phases", "#da8bc3"),
    Cause("host_work", "host work", "#8172b3"),
    Cause("uninstrumented_host", "un-instrumented host time", "#64b5cd"),
    Cause("startup", "start-up", "#d0d3d9", in_window=False),
    Cause("warmup", "warm-up steps", "#c5c9d1", in_window=False),
    Cause("prologue", "work queued before the window", "#b8bcc4", in_window=False),
    Cause("teardown", "after the window", "#aab0ba", in_window=False),
)
BY_ID = {c.id: c for c in CAUSES}
WINDOW_CAUSES = tuple(c.id for c in CAUSES if c.in_window)
OUTSIDE_CAUSES = tuple(c.id for c in CAUSES if not c.in_window)
OTHER_COLOR = "#7f7f7f"


def label(cause: str) -> str:
    """The label of a cause; an unknown one (a saved report's) as it is."""
    return BY_ID[cause].label if cause in BY_ID else cause


def color(cause: str) -> str:
    """The chart colour of a cause (grey for one this version does not know)."""
    return BY_ID[cause].color if cause in BY_ID else OTHER_COLOR


def in_window(cause: str) -> bool:
    """Whether a cause's time lies inside the judged window (an unknown one counts as inside, as it used to)."""
    return cause not in OUTSIDE_CAUSES


def window_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attribution rows (``Report.attribution``) of the judged window: what sums to each GPU's window."""
    return [r for r in rows if in_window(r.get("cause", ""))]


def outside_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attribution rows of what was recorded outside the window (start-up, warm-up, teardown)."""
    return [r for r in rows if not in_window(r.get("cause", ""))]
