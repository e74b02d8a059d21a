"""Ranks page: rank × step heatmaps of GPU step time, time waiting inside collectives and arrival lateness
(metrics rank_steps), with the straggler-rank finding's rank outlined."""

from __future__ import annotations

import statistics

from bokeh.palettes import Oranges256, RdBu11

from tracedoc.formats import ALLOCATOR_SNAPSHOTS, HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.pages import empty, waits
from tracedoc.pages.charts import Section, heatmap
from tracedoc.pages.fragments import Column, measured, table_html
from tracedoc.report import Report
from tracedoc.report_tables import METRICS
from tracedoc.units import fmt_ms, fmt_pct

_STEP = METRICS["rank_steps"].measure  # what each column of the table measures

TITLE = "Ranks"
ROUTE = "ranks"

# kind of input (tracedoc.pages.empty.input_kind), or 'one_rank' (a timeline of one rank: empty_sentence) → why
# this page has nothing to show
EMPTY: dict[str, str] = {
    "one_rank": "One rank only: this page sets ranks side by side step by step (who is slower, who waits). Give "
                "tracedoc every rank's trace (a directory with one trace per rank) to see it.",
    TIMELINE: "No steps found to compare ranks by: it needs ProfilerStep#N annotations (torch.profiler's schedule), "
              "NVTX step ranges or a CUDA profiler capture range.",
    KERNEL_PROFILE: "An Nsight Compute profile holds single kernels, not the steps of ranks: this page needs a "
                    "timeline of every rank (PyTorch profiler traces or Nsight Systems reports).",
    HANG_DUMPS: "NCCL flight-recorder dumps hold each rank's last collectives, not step times: what each rank issued "
                "is on the Hang page.",
    HEALTH: "GPU telemetry holds no steps: this page needs a timeline of every rank (PyTorch profiler traces or "
            "Nsight Systems reports).",
    ALLOCATOR_SNAPSHOTS: "An allocator snapshot holds one process's memory, not the steps of ranks: this page needs a "
                         "timeline of every rank (PyTorch profiler traces or Nsight Systems reports).",
    empty.OTHER: "No per-step data for several ranks in these inputs.",
}

MIN_SPAN_PCT = 10.0  # the step-time colour scale spans at least ±10 % of the median
MIN_WAIT_MS = 1.0    # the waiting scales reach at least 1 ms

MAPS = (("step_ms", "GPU step time", "GPU time from the step's first to its last activity"),
        ("comm_wait_ms", "Wait inside collectives", waits.RANKS),
        ("arrival_lateness_ms", "Arrival behind the first rank",
         "How much later than the first rank this rank reached the step's collectives (Σ over them)."))

COLUMNS = [Column("rank", "rank"), Column("step", "step"), measured("step_ms", "step ms", _STEP("step_ms")),
           measured("compute_ms", "compute ms", _STEP("compute_ms")),
           measured("comm_wait_ms", "wait ms", _STEP("comm_wait_ms"),
                  help="every wait inside its collectives for later ranks, hidden behind compute or not"),
           measured("exposed_wait_ms", "exposed wait ms", _STEP("exposed_wait_ms"),
                  help="the part of that wait with no compute beside it: about the Overview's 'waiting for a peer'"),
           measured("arrival_lateness_ms", "late ms", _STEP("arrival_lateness_ms"),
                  help="how much later than the first rank it reached the step's collectives (Σ over them)"),
           measured("others_wait_ms", "others' wait ms", _STEP("others_wait_ms"),
                  help="what its lateness cost the others: their exposed wait for it"),
           measured("host_gap_ms", "host gap ms", _STEP("host_gap_ms")),
           measured("kernels", "kernels", _STEP("kernels")),
           measured("collectives", "collectives", _STEP("collectives"))]


def has_data(report: Report) -> bool:
    """Whether the report holds per-step rows of two ranks or more: one rank's rows compare with nothing (its
    heatmaps would be one row at zero wait), so a one-rank trace gets the page's empty state."""
    return len({r.get("rank") for r in report.metrics.get("rank_steps") or []}) > 1


def empty_sentence(report: Report) -> str:
    """Why there is nothing to compare: a timeline of one rank asks for every rank's trace."""
    if empty.input_kind(report) == "timeline" and (report.summary.get("ranks") or 0) <= 1:
        return EMPTY["one_rank"]
    return empty.worded(EMPTY, report)


def sections(report: Report) -> list[Section]:
    rows = report.metrics.get("rank_steps") or []
    if not has_data(report):
        return [Section("Ranks × steps", empty=empty_sentence(report))]
    stragglers = {f.scope.rank for f in report.findings if f.rule == "straggler-rank"}
    ordered = sorted(rows, key=lambda r: (r["rank"], r["step"]))
    cells = [{**r, "rank": f"rank {r['rank']}" + (" (straggler)" if r["rank"] in stragglers else "")}
             for r in ordered]
    outline = [r["rank"] in stragglers for r in ordered]
    note = "ms per rank and step; the straggler's row is outlined in red." if stragglers else "ms per rank and step."
    median = statistics.median(float(r["step_ms"]) for r in rows if r["step_ms"] is not None) \
        if any(r["step_ms"] is not None for r in rows) else 0.0
    span = max([abs(100 * (float(r["step_ms"]) - median) / median) for r in rows
                if r["step_ms"] is not None and median] + [MIN_SPAN_PCT])
    for cell in cells:
        cell["vs_median"] = 100 * (float(cell["step_ms"]) - median) / median \
            if cell["step_ms"] is not None and median else None
    step_note = (f"; coloured by the difference from the median step ({fmt_ms(median)}): red slower, blue faster, "
                 f"the scale spanning ±{fmt_pct(span, 0)} (at least ±{fmt_pct(MIN_SPAN_PCT, 0)}, so that small "
                 "differences stay pale)")
    out = []
    for key, title, what in MAPS:
        if key == "step_ms":
            chart = heatmap(cells, "step", "rank", key, "ms", outline=outline, color="vs_median", low=-span,
                            high=span, scale_title="% vs median", palette=RdBu11)  # blue (faster) to red (slower)
            out.append(Section(title, note=f"{what}{step_note}; {note}", items=[chart]))
        else:  # waiting: from none (white) up
            chart = heatmap(cells, "step", "rank", key, "ms", outline=outline, low=0.0,
                            high=max([float(r[key] or 0) for r in rows] + [MIN_WAIT_MS]), palette=Oranges256[::-1])
            out.append(Section(title, note=f"{what} Coloured from 0 ms (white); {note}", items=[chart]))
    out.append(Section("Per rank and step", items=[table_html(ordered, COLUMNS,
                                                              highlight=lambda r: r["rank"] in stragglers)]))
    return out
