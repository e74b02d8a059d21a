"""The compact rank × step table of multi-rank reports (the ``rank_steps`` metric), for the text report."""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any

from rich.table import Table
from rich.text import Text

MAX_RANKS = 8
MAX_STEPS = 8


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
