"""The steps of the text report: each rank's step times and their spread, and the compact rank × step table of
multi-rank reports (the ``rank_steps`` metric)."""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean, median
from typing import Any

from rich.table import Table
from rich.text import Text

from tracedoc.report_tables import METRICS
from tracedoc.units import cell_format, fmt_measure, unit_symbol

STEP = METRICS["rank_steps"].measure("step_ms")  # what a step's time measures

MAX_RANKS = 8
MAX_STEPS = 8
DRIFT = 1.25  # slowest over fastest step from which the steps are listed one by one


def step_times_text(metrics: dict[str, list[dict[str, Any]]]) -> str | None:
    """'Step time on the GPU (rank 0): median 51.9 ms, 48.2 to 55.1 ms over 4 steps', the steps listed in order
    when they differ by DRIFT or more ('35.2 → 72.4 → 96.1 ms'); for the rank with the slowest median."""
    by_rank: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for row in metrics.get("rank_steps") or []:
        if row.get("step_ms") is not None:
            by_rank[row["rank"]].append((row["step"], float(row["step_ms"])))
    if not by_rank:
        return None
    rank = max(by_rank, key=lambda r: (median(ms for _, ms in by_rank[r]), -r))
    times = [ms for _, ms in sorted(by_rank[rank])]
    if len(times) == 1:
        return f"Step time on the GPU (rank {rank}): {fmt_measure(times[0], STEP)} (one step)."
    text = (f"Step time on the GPU (rank {rank}): median {fmt_measure(median(times), STEP)}, "
            f"{fmt_measure(min(times), STEP)} to {fmt_measure(max(times), STEP)} over {len(times)} steps")
    if len(times) > 1 and min(times) > 0 and max(times) >= DRIFT * min(times):
        cell = cell_format(STEP, 1)
        shown = " → ".join(cell(ms) for ms in times[:MAX_STEPS]) + (" → …" if len(times) > MAX_STEPS else "")
        text += f": {shown} {unit_symbol(STEP)}"
    return text + "."


def rank_steps_parts(metrics: dict[str, list[dict[str, Any]]]) -> list:
    """A heading and a table of per-rank means with each step's arrival lateness; nothing for a single rank.

    With more than MAX_RANKS ranks only the latest ones (largest mean lateness) are listed; with more than
    MAX_STEPS steps the per-step columns show the first ones. A line under the table says what was left out.
    """
    by_rank: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in metrics.get("rank_steps") or []:
        if row.get("collectives"):
            by_rank[row["rank"]].append(row)
    if len(by_rank) < 2:
        return []
    steps = sorted({row["step"] for rows in by_rank.values() for row in rows})
    means = {rank: {key: fmean(float(r[key] or 0) for r in rows)
                    for key in ("step_ms", "compute_ms", "comm_wait_ms", "arrival_lateness_ms")}
             for rank, rows in by_rank.items()}
    shown = sorted(sorted(means, key=lambda r: -means[r]["arrival_lateness_ms"])[:MAX_RANKS])
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("rank", "step", "compute", "wait", "late"):
        table.add_column(col, justify="right")
    for step in steps[:MAX_STEPS]:
        table.add_column(f"late #{step}", justify="right", style="dim")
    for rank in shown:
        late = {r["step"]: float(r["arrival_lateness_ms"] or 0) for r in by_rank[rank]}
        m = means[rank]
        table.add_row(str(rank), *(f"{m[k]:.1f}" for k in ("step_ms", "compute_ms", "comm_wait_ms")),
                      f"{m['arrival_lateness_ms']:.2f}",
                      *(f"{late[s]:.2f}" if s in late else "-" for s in steps[:MAX_STEPS]))
    out: list = [Text("Ranks × steps", style="bold"),
                 Text("ms per step (mean over the steps): GPU step time, compute, wait inside collectives for later "
                      "ranks, arrival behind the first rank (Σ over the step's collectives); then each step's "
                      "lateness", style="dim"),
                 table]
    left_out = [f"{len(means) - len(shown)} more ranks (the latest are listed)"] if len(means) > len(shown) else []
    if len(steps) > MAX_STEPS:
        left_out.append(f"{len(steps) - MAX_STEPS} more steps")
    if left_out:
        out.append(Text("… " + "; ".join(left_out), style="dim"))
    return out
