"""Ranks page: rank × step heatmaps of GPU step time, time waiting inside collectives and arrival lateness
(metrics rank_steps), with the straggler-rank finding's rank outlined."""

from __future__ import annotations

from tracedoc.pages.charts import Section, heatmap
from tracedoc.pages.fragments import Column, number, table_html
from tracedoc.report import Report

TITLE = "Ranks"
ROUTE = "ranks"

MAPS = (("step_ms", "GPU step time", "GPU time from the step's first to its last activity"),
        ("comm_wait_ms", "Wait inside collectives", "time a rank's collectives spent waiting for later ranks"),
        ("arrival_lateness_ms", "Arrival behind the first rank",
         "how much later than the first rank this rank reached the step's collectives (Σ over them)"))

COLUMNS = [Column("rank", "rank"), Column("step", "step"), Column("step_ms", "step ms", number(2), numeric=True),
           Column("compute_ms", "compute ms", number(2), numeric=True),
           Column("comm_wait_ms", "wait ms", number(2), numeric=True),
           Column("arrival_lateness_ms", "late ms", number(2), numeric=True),
           Column("others_wait_ms", "others' wait ms", number(2), numeric=True),
           Column("host_gap_ms", "host gap ms", number(2), numeric=True),
           Column("kernels", "kernels", number(), numeric=True),
           Column("collectives", "collectives", number(), numeric=True)]


def sections(report: Report) -> list[Section]:
    rows = report.metrics.get("rank_steps") or []
    if not rows:
        return [Section("Ranks × steps", empty="No per-step data: it needs PyTorch profiler traces with "
                                               "ProfilerStep annotations (torch.profiler's schedule).")]
    stragglers = {f.scope.rank for f in report.findings if f.rule == "straggler-rank"}
    ordered = sorted(rows, key=lambda r: (r["rank"], r["step"]))
    cells = [{**r, "rank": f"rank {r['rank']}" + (" (straggler)" if r["rank"] in stragglers else "")}
             for r in ordered]
    outline = [r["rank"] in stragglers for r in ordered]
    note = "ms per rank and step; the straggler's row is outlined in red." if stragglers else "ms per rank and step."
    out = [Section(title, note=f"{what}; {note}",
                   items=[heatmap(cells, "step", "rank", key, "ms", outline=outline)])
           for key, title, what in MAPS]
    out.append(Section("Per rank and step", items=[table_html(ordered, COLUMNS,
                                                              highlight=lambda r: r["rank"] in stragglers)]))
    return out
