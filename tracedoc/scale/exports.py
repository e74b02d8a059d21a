"""What a rank hands back to the client: the per-rank objects the cross-rank analyses and the report read —
summaries over ranks × steps × collectives, never the rank's events.

The analysis modules fall in two kinds, as their headers say (``-- scope:``, store.modules). Cross-rank ones run
on the client over every rank's summaries (``ranks``: collective alignment, rank × step table, stragglers,
all-to-all load; ``hang``: the flight-recorder dumps of all ranks; ``trace.summary``: the headline over all ranks;
``health`` and ``ncu``, whose inputs a distributed run does not take). Every other module reads one rank's events
and runs on that rank's worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tracedoc.errors import InputError
from tracedoc.judge import Rule
from tracedoc.report_tables import ReportTable
from tracedoc.store.modules import on_client

# What the ranks' own modules make only for the client: the alignment of the collectives across ranks (and what
# reads it). A worker leaves these statements out (a batch's ranks are not the job); in the second pass it is
# given ranks_collectives as the client lined it up.
CLIENT_ONLY = ("ranks_alignment", "ranks_matched_kernels", "ranks_clock_offsets", "ranks_collectives",
               "ranks_alignment_quality", "ranks_steps", "ranks_report_steps")

# Store tables a rank hands back whole: its profiler steps, GPUs and flight-recorder dumps (a dump is bounded by
# its ring buffer; steps and devices by the window).
BASE_TABLES = ("sources", "devices", "steps", "fr_dumps", "fr_process_groups", "fr_pg_status", "fr_entries")


@dataclass(frozen=True)
class Export:
    """One object a rank hands back: ``name`` (the object's name on the client), the ``module`` that makes it and
    the ``query`` that reads it on the worker (``params``: what the rule binds, Rule.bindings). ``macro_args``: for
    a rule view that is a table macro (``gpu_gaps_long($min_gap_ms)``), its argument count; the client calls it the
    same way and gets the rows the worker computed with those thresholds."""

    name: str
    module: str
    query: str
    params: dict[str, str | float] = field(default_factory=dict)
    macro_args: int | None = None


# The first pass: what the cross-rank modules read. ranks_compute_busy is kept to the merged compute intervals that
# overlap a collective's kernel (the waits it is compared with lie inside those kernels): a range join on
# (source, device, time) packed into HUGEINT keys (an equality beside two inequalities would compare every pair).
SUMMARY_EXPORTS = (
    Export("trace_steps", "trace.steps", "SELECT * FROM trace_steps"),
    Export("trace_step_method", "trace.steps", "SELECT * FROM trace_step_method"),
    Export("trace_windows", "trace.window", "SELECT * FROM trace_windows"),
    Export("trace_wall", "trace.window", "SELECT * FROM trace_wall"),
    Export("gpu_busy_by_device", "gpu.busy", "SELECT * FROM gpu_busy_by_device"),
    Export("trace_recording", "trace.recording", "SELECT * FROM trace_recording"),
    Export("ranks_comm_kernels", "ranks.collectives", "SELECT * FROM ranks_comm_kernels"),
    Export("ranks_compute_busy", "ranks.collectives", """
        SELECT DISTINCT b.source_id, b.device, b.ts_ns, b.end_ns
        FROM (SELECT *, ((source_id::HUGEINT * 65536 + device) << 64) + ts_ns AS k_start,
                     ((source_id::HUGEINT * 65536 + device) << 64) + end_ns AS k_end FROM ranks_compute_busy) b
        JOIN (SELECT ((source_id::HUGEINT * 65536 + device) << 64) + ts_ns AS k_start,
                     ((source_id::HUGEINT * 65536 + device) << 64) + end_ns AS k_end FROM ranks_comm_kernels) c
          ON b.k_start < c.k_end AND b.k_end > c.k_start"""),
    Export("ranks_step_work", "ranks.steps", "SELECT * FROM ranks_step_work"),
    Export("ranks_step_kernels", "ranks.steps", "SELECT * FROM ranks_step_kernels"),
)

# The second pass (with the rank's collectives given): the attribution the report and the savings read.
_ATTRIBUTION_EXPORTS = (
    Export("attribution_slices", "attribution.time", "SELECT * FROM attribution_slices"),
    Export("attribution_gpu_states", "attribution.time", "SELECT * FROM attribution_gpu_states"),
)
# The second pass: the efficiency figures each rank's own trace gives (tracedoc.efficiency words them).
_EFFICIENCY_EXPORTS = tuple(Export(name, "efficiency.steps", f"SELECT * FROM {name}")
                            for name in ("efficiency_steps", "efficiency_by_rank"))
_PARAM = re.compile(r"\$([A-Za-z_]\w*)")
_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)


def report_exports(rules: Sequence[Rule], thresholds: dict[str, dict[str, float]] | None,
                   tables: Iterable[ReportTable]) -> list[Export]:
    """The second pass: the views the per-rank rules read (a table macro evaluated with the rule's thresholds),
    the per-rank views of the report (``tables``: each rank's rows, ordered on the client),
    and the time attribution (what the first pass handed back already is not asked for again)."""
    exports: dict[str, Export] = {e.name: e for e in (*_ATTRIBUTION_EXPORTS, *_EFFICIENCY_EXPORTS)}
    summarized = {e.name for e in SUMMARY_EXPORTS}
    for rule in rules:
        if on_client(rule.reads) or rule.view.strip() in summarized:
            continue
        values = rule.bindings(thresholds)
        params = {name: values[name] for name in _PARAM.findall(rule.view) if name in values}
        call = _CALL.match(rule.view)
        name = call.group(1) if call else rule.view.strip()
        export = Export(name, rule.reads, f"SELECT * FROM {rule.view}", params,
                        len([a for a in call.group(2).split(",") if a.strip()]) if call else None)
        if name in exports and exports[name] != export:
            raise InputError(f"rules read {name} with different thresholds or params; a distributed run needs the "
                             "same ones")
        exports[name] = export
    for table in tables:
        if not on_client(table.module):
            exports.setdefault(table.view, Export(table.view, table.module, f"SELECT * FROM {table.view}"))
    return list(exports.values())
