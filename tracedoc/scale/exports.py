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
from tracedoc.store.modules import all_modules, facts, on_client

# What the ranks' own modules make only for the client (``-- client only:`` in their headers): the alignment of the
# collectives across ranks (and what reads it). A worker leaves these statements out (a batch's ranks are not the
# job); in the second pass it is given ranks_collectives as the client lined it up.
CLIENT_ONLY = tuple(name for module in all_modules() for name in facts(module).client_only)

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


# The first pass: what the cross-rank modules read, as the modules' headers say (``-- hands back:``): each rank's
# steps and window, its GPUs' busy time, what it recorded, its collectives' kernels and the compute around them, its
# work per step.
SUMMARY_EXPORTS = tuple(Export(name, module, f"SELECT * FROM {view}")
                        for module in all_modules() for name, view in facts(module).hands_back)

# The second pass (with the rank's collectives given): the attribution the report and the savings read.
_ATTRIBUTION_EXPORTS = (
    Export("attribution_slices", "attribution.time", "SELECT * FROM attribution_slices"),
    Export("attribution_gpu_states", "attribution.time", "SELECT * FROM attribution_gpu_states"),
)
# The second pass: the efficiency figures each rank's own trace gives (tracedoc.efficiency words them), the
# profiler's cost on it, and the share of its GPU work at the roofline (the floor its savings leave, judge.savings).
_EFFICIENCY_EXPORTS = tuple(Export(name, module, f"SELECT * FROM {name}") for name, module in (
    ("efficiency_steps", "efficiency.steps"), ("efficiency_by_rank", "efficiency.steps"),
    ("efficiency_observer", "efficiency.observer"), ("efficiency_floor_shares", "efficiency.floor")))
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
