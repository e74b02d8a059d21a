"""Hang page: per process group and rank, the last collective each rank enqueued, started and completed (metrics
collectives, from NCCL flight-recorder dumps), with the culprit of a collective-hang finding highlighted."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bokeh.models import BasicTicker, ColumnDataSource, FactorRange, HoverTool, NumeralTickFormatter
from bokeh.plotting import figure

from tracedoc.formats import HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.pages import empty
from tracedoc.pages.charts import Section, style
from tracedoc.pages.fragments import Column, measured, table_html
from tracedoc.report import Report
from tracedoc.report_tables import METRICS

TITLE = "Hang"
ROUTE = "hang"

DUMPS_HOW = ("PyTorch writes them when a collective times out, with TORCH_NCCL_DUMP_ON_TIMEOUT=1 and "
             "TORCH_FR_DUMP_TEMP_FILE set")
# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    TIMELINE: "No NCCL flight-recorder dumps in these inputs: this page is for a job that hung, from the dumps of its "
              f"ranks ({DUMPS_HOW}). A trace that finished did not hang.",
    KERNEL_PROFILE: "No NCCL flight-recorder dumps in these inputs (an Nsight Compute profile): this page is for a "
                    f"job that hung ({DUMPS_HOW}).",
    HEALTH: "No NCCL flight-recorder dumps in these inputs (GPU telemetry): this page is for a job that hung "
            f"({DUMPS_HOW}).",
    empty.OTHER: f"No NCCL flight-recorder dumps in these inputs ({DUMPS_HOW}).",
}

STAGES = (("last_enqueued_seq", "enqueued", "#9aa1ad"), ("last_started_seq", "started", "#e6a23c"),
          ("last_completed_seq", "completed", "#55a868"))

COLUMNS = [Column("role", "culprit"), Column("rank", "rank"), Column("last_enqueued_seq", "last enqueued"),
           Column("last_started_seq", "last started"), Column("last_completed_seq", "last completed"),
           Column("last_state", "state"), Column("last_described", "last collective", wide=True),
           Column("pending_seq", "pending seq"), Column("pending_described", "pending collective", wide=True),
           measured("waited_ms", "waited ms", METRICS["collectives"].measure("waited_ms"), 0),
           Column("last_call_site", "last call site", wide=True), Column("has_dump", "dump")]
DUMP_COLUMNS = [Column("rank", "rank"), Column("path", "path", wide=True), Column("version", "version"),
                Column("encoding", "encoding"),
                measured("entries", "entries", METRICS["flight_recorder_dumps"].measure("entries")),
                Column("used", "used"), Column("note", "note", wide=True)]


def has_data(report: Report) -> bool:
    """Whether the report holds collectives from flight-recorder dumps."""
    return bool(report.metrics.get("collectives"))


def sections(report: Report) -> list[Section]:
    rows = report.metrics.get("collectives") or []
    if not has_data(report):
        return [Section("Collectives per rank", empty=empty.worded(EMPTY, report))]
    culprits = {(str(f.scope.pg), f.scope.rank): f for f in report.findings
                if f.rule == "collective-hang" and f.scope.rank is not None}
    mismatched = {(str(f.scope.pg), f.scope.rank) for f in report.findings if f.rule == "collective-mismatch"}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        key = (str(r["pg"]), r["rank"])
        role = (f"culprit: never issued seq {culprits[key].scope.seq}" if key in culprits
                else "mismatched" if key in mismatched else "")
        groups[(r["backend"], r["pg_label"] or r["pg"])].append({**r, "role": role})
    out = []
    for (backend, label), members in groups.items():
        note = "Sequence numbers of the last collective each rank enqueued, started and completed in this group; " \
               "the culprit (the rank that never issued the collective the others wait in) is outlined in red."
        out.append(Section(f"Process group {label} ({backend})", note=note,
                           items=[progress_chart(members), table_html(members, COLUMNS,
                                                                      highlight=lambda r: bool(r["role"]))]))
    dumps = report.metrics.get("flight_recorder_dumps") or []
    if dumps:
        out.append(Section("Dumps read", items=[table_html(dumps, DUMP_COLUMNS)]))
    return out


def progress_chart(members: list[dict[str, Any]]) -> Any:
    """Per rank, three bars: last enqueued, started and completed sequence number; the culprit's outlined."""
    factors, values, colors, lines, described = [], [], [], [], []
    for r in members:
        for key, stage, color in STAGES:
            factors.append((f"rank {r['rank']}" + (" (culprit)" if r["role"].startswith("culprit") else ""), stage))
            values.append(r[key] if r[key] is not None else 0)
            colors.append(color)
            lines.append("#e31a1c" if r["role"] else None)
            described.append(r["pending_described"] or r["last_described"] or "")
    source = ColumnDataSource({"x": factors, "value": values, "color": colors, "line": lines,
                               "described": described})
    fig = figure(x_range=FactorRange(*factors), height=300, sizing_mode="stretch_width", toolbar_location=None,
                 tools="")
    fig.vbar(x="x", top="value", width=0.8, color="color", line_color="line", line_width=3, source=source)
    fig.add_tools(HoverTool(tooltips=[("", "@x"), ("sequence number", "@value"), ("collective", "@described")]))
    style(fig, "")
    fig.yaxis.axis_label = "sequence number"
    fig.yaxis.ticker = BasicTicker(min_interval=1, desired_num_ticks=min(max(values + [1]), 8))  # whole numbers
    fig.yaxis.formatter = NumeralTickFormatter(format="0")
    fig.yaxis.minor_tick_line_color = None
    fig.y_range.start = 0
    fig.xgrid.visible = False
    fig.ygrid.visible = True
    return fig
