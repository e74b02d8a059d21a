"""What a diff says, as sentences and tables of plain strings: the one content the text, Markdown and HTML
renderers each lay out in their own way (and escape in their own way: strings from traces are raw here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tracedoc.diff.findings import NEW, PERSISTING, RESOLVED, FindingChange
from tracedoc.diff.kernels import KernelRow, KernelSide, NcuRow
from tracedoc.diff.model import FROM_LAUNCHES, FROM_MEAN, KERNEL_NOISE_PCT, Diff, changed_by
from tracedoc.diff.stats import Change, Distribution
from tracedoc.diff.steps import BASIS_TEXT, NO_STEPS, StepComparison
from tracedoc.measures import MS, PCT, Measure
from tracedoc.pages.kinds import has_saving
from tracedoc.pages.names import kernel_labels
from tracedoc.report import Finding, Report
from tracedoc.report_tables import EFFICIENCY, MEMORY, METRICS, OPERATORS, summary_measure
from tracedoc.units import cell_format, fmt_bytes, fmt_measure, fmt_ms, fmt_pct, fmt_signed, table_cell, table_header
from tracedoc.words.attribution import cause_label
from tracedoc.words.findings import scope_text

MAX_LISTED = 10
NAME_CHARS = 100
# what the memory tables' figures measure
_MEMORY, _SITE = MEMORY[0].measure, METRICS["memory_growth_sites"].measure("bytes_per_step")


@dataclass
class Section:
    """A titled table: ``numeric`` marks the columns aligned right."""

    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    numeric: set[int] = field(default_factory=set)


def signed_ms(value: float) -> str:
    """'+1.2 ms', '−350.0 µs', '±0' for no change."""
    return fmt_signed(value, MS)


def signed_pct(value: float, unit: str = "%") -> str:
    """'+4.2%', '−23.3%' (a true minus sign, as the deltas in ms)."""
    text = f"{value:+.1f}{unit}"
    return text.replace("-", "−")


def ms_or_dash(value: float | None) -> str:
    return "—" if value is None else fmt_ms(value)


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    """A name cut to ``limit`` characters (an operator's; kernels are shortened together, ``kernel_labels``)."""
    return name if len(name) <= limit else name[:limit - 1] + "…"


def sides_line(diff: Diff) -> str:
    return f"before {diff.before.describe()} → after {diff.after.describe()}"


def change_text(change: Change) -> str:
    """'−23.3%, 95% CI −31.1% to −21.0%'."""
    lo, hi = change.ci_pct
    return f"{signed_pct(change.pct)}, 95% CI {signed_pct(lo)} to {signed_pct(hi)}"


def verdict_line(diff: Diff) -> str:
    """The answer first: faster, slower or no significant change, by how much, how sure."""
    job = diff.job
    if job.change is None or job.before is None or job.after is None:
        if (times := diff.kernel_time()) is not None:
            head = {"faster": "Faster", "slower": "Slower"}.get(diff.verdict, "No significant change")
            return (f"{head}: the kernels profiled on both sides took {fmt_ms(times[0])} → {fmt_ms(times[1])} "
                    f"({signed_pct(100.0 * (times[1] / times[0] - 1.0))}; one measured launch per kernel, no steps: "
                    f"a change under {fmt_pct(KERNEL_NOISE_PCT, 0)} counts as none).")
        if diff.before.kind == "kernel profile":
            return "No steps to compare: kernel profiles time each profiled kernel, not steps (see the kernels)."
        missing = "either side" if job.before is None and job.after is None else \
            "BEFORE" if job.before is None else "AFTER"
        return f"No steps to compare: {BASIS_TEXT[NO_STEPS]} on {missing}."
    change = job.change
    head = {"faster": "Faster", "slower": "Slower"}.get(change.direction, "No significant change")
    text = (f"{head}: the job's median step {fmt_ms(job.before.median_ms)} → {fmt_ms(job.after.median_ms)} "
            f"({change_text(change)}; {job.before.n} and {job.after.n} steps")
    return text + (f"; {change.note})." if change.note else ").")


def warning_lines(diff: Diff) -> list[str]:
    """What may make the verdict meaningless (runs of different jobs or programs), for right under it."""
    return [f"Warning: {w[:1].upper()}{w[1:]}" + ("" if w.endswith("?") else ".") for w in diff.warnings]


def context_line(diff: Diff) -> str:
    """Wall-clock, GPU busy and throughput, before → after."""
    parts = []
    wall_b, wall_a = diff.summary_value("wall_ms")
    if wall_b and wall_a:
        label = "profiled kernel time" if diff.before.kind == "kernel profile" else "wall"
        parts.append(f"{label} {_summary_change('wall_ms', wall_b, wall_a)}")
    busy_b, busy_a = diff.summary_value("gpu_busy_pct")
    if busy_b is not None and busy_a is not None and diff.before.kind != "kernel profile":
        parts.append(f"GPU busy {_summary_change('gpu_busy_pct', busy_b, busy_a)}")
    if (rate := diff.throughput()) is not None:
        parts.append(f"throughput {_rate(rate[0])} → {_rate(rate[1])} items/s "
                     f"({signed_pct(100.0 * (rate[1] / rate[0] - 1.0))})")
    return " · ".join(parts)


def _summary_change(key: str, before: float, after: float) -> str:
    """A number of the summary's head before → after, and its change, by its declared unit: a share in points,
    a time relative to before."""
    measure = summary_measure(key)
    change = signed_pct(after - before, " points") if measure.unit == PCT.unit else \
        signed_pct(100.0 * (after / before - 1.0))
    return f"{fmt_measure(before, measure)} → {fmt_measure(after, measure)} ({change})"


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def _dist_cells(d: Distribution | None) -> list[str]:
    if d is None:
        return ["—", "—"]
    return [fmt_ms(d.median_ms), f"{fmt_ms(d.p10_ms)} – {fmt_ms(d.p90_ms)}"]


def _change_cells(c: Change | None) -> list[str]:
    if c is None:
        return ["—", "—", "—"]
    lo, hi = c.ci_pct
    return [f"{signed_ms(c.median_ms)} ({signed_pct(c.pct)})", f"{signed_pct(lo)} to {signed_pct(hi)}",
            c.direction if c.significant else "not significant"]


def steps_section(diff: Diff) -> Section | None:
    """Step time distributions: the job (slowest rank per step), then each rank with its wait for peers."""
    if diff.job.before is None and diff.job.after is None:
        return None
    multi = len(diff.ranks) > 1

    def row(label: str, s: StepComparison, wait: tuple[float | None, float | None] | None) -> list[str]:
        steps = f"{s.before.n if s.before else 0} → {s.after.n if s.after else 0}"
        cells = [label, steps, *_dist_cells(s.before), *_dist_cells(s.after), *_change_cells(s.change)]
        if multi:
            cells.append("" if wait is None or None in wait else f"{ms_or_dash(wait[0])} → {ms_or_dash(wait[1])}")
        return cells

    rows = [row("job (slowest rank per step)" if multi else "job", diff.job, None)]
    if multi:
        rows += [row(f"rank {r.steps.rank}", r.steps, (r.wait_before_ms, r.wait_after_ms)) for r in diff.ranks]
    header = ["", "steps", "median before", "p10 – p90", "median after", "p10 – p90", "change", "95% CI", "verdict"]
    if multi:
        header.append("waiting for peers per step")
    basis = BASIS_TEXT[diff.step_basis[0]] if diff.step_basis[0] == diff.step_basis[1] else \
        f"{BASIS_TEXT[diff.step_basis[0]]} before, {BASIS_TEXT[diff.step_basis[1]]} after"
    return Section("Step time", header, rows,
                   note=f"Per step: {basis}. The change is after − before, its 95% interval a seeded bootstrap "
                        "over steps of the difference of medians.", numeric=set(range(1, 8)))


def causes_section(diff: Diff) -> Section | None:
    """Where the compared rank's step time went, per cause, before and after."""
    if not diff.causes:
        return None
    rb, ra = diff.cause_ranks
    rank = f"rank {rb}" if rb == ra else f"rank {rb} before, rank {ra} after"
    rows = [[cause_label(c.cause), fmt_ms(c.before_ms), fmt_pct(c.before_pct), fmt_ms(c.after_ms),
             fmt_pct(c.after_pct), signed_ms(c.delta_ms), signed_pct(c.after_pct - c.before_pct, " pts")]
            for c in diff.causes if c.before_ms >= 5e-4 or c.after_ms >= 5e-4]
    return Section(f"Where the time went ({rank}, per step)",
                   ["cause", "before", "% of step", "after", "% of step", "change", "share"], rows,
                   note="The attribution of the rank's steps (each GPU's time counted once), averaged per step; "
                        "largest change first.", numeric={1, 2, 3, 4, 5, 6})


def _count_arrow(before: KernelSide | None, after: KernelSide | None) -> str:
    return f"{before.count if before else 0:,} → {after.count if after else 0:,}"


def _mean_arrow(before: KernelSide | None, after: KernelSide | None) -> str:
    mean = METRICS["top_kernels"].measure("mean_us")
    b = fmt_measure(before.mean_us, mean) if before else "—"
    a = fmt_measure(after.mean_us, mean) if after else "—"
    return f"{b} → {a}"


def _launches_arrow(kernel: KernelRow) -> str:
    """Launches per step ('2.0 → 3.7') when both sides have steps, else in total ('6 → 11')."""
    if (per_step := kernel.launches_per_step()) is None:
        return _count_arrow(kernel.before, kernel.after)
    return f"{per_step[0]:,.1f} → {per_step[1]:,.1f}"


def _kernel_rows(kernels: list[KernelRow], labels: dict[str, str]) -> list[list[str]]:
    rows = []
    for k in kernels:
        split = k.split()
        parts = [signed_ms(split[0]), signed_ms(split[1])] if split is not None else ["—", "—"]
        change = signed_ms(k.delta_ms_per_step) if k.delta_ms_per_step is not None else signed_ms(k.delta_total_ms)
        rows.append([labels[k.name], _launches_arrow(k), _mean_arrow(k.before, k.after), *parts,
                     change])
    return rows


# The kernel tables: title, the part of the change that picks and orders them, its sign.
_KERNEL_TABLES = (("Kernels slower per launch", FROM_MEAN, 1), ("Kernels launched more often", FROM_LAUNCHES, 1),
                  ("Kernels faster per launch", FROM_MEAN, -1), ("Kernels launched less often", FROM_LAUNCHES, -1))


def kernel_sections(diff: Diff, name_chars: int = NAME_CHARS) -> list[Section]:
    """Kernels on both sides that got slower or faster per launch, and those launched more or less often per step
    (a kernel may be in two: its change is split between its mean time and its launches), then new and vanished
    kernels."""
    matched = sum(1 for k in diff.kernels if k.status == "matched")
    new = [k for k in diff.kernels if k.status == "new"]
    gone = [k for k in diff.kernels if k.status == "vanished"]
    per_step = any(k.delta_ms_per_step is not None for k in diff.kernels)
    unit = "per step" if per_step else "in total"
    header = ["kernel", "launches per step" if per_step else "launches", "mean", "from the mean",
              "from launches", f"change {unit}"]
    basis = diff.kernel_basis[:1].upper() + diff.kernel_basis[1:]
    note = (f"{basis}, matched by name: {matched} on both sides, {len(new)} new, {len(gone)} vanished; summed over "
            f"ranks. A kernel's change {unit} is split in two: from the mean (launches before × the change of its "
            "mean time per launch) and from launches (the change of its launches × its mean after)"
            + ("; per step of the job." if per_step else "."))
    out = []
    tables = [(title, changed_by(diff.kernels, part, sign, MAX_LISTED)) for title, part, sign in _KERNEL_TABLES]
    tables += [("New kernels", new[:MAX_LISTED]), ("Vanished kernels", gone[:MAX_LISTED])]
    # the dashboard's shortener, over every name shown, so that no two kernels read alike
    labels = kernel_labels((k.name for _, rows in tables for k in rows), name_chars)
    for title, rows in tables:
        if rows:
            out.append(Section(title, header, _kernel_rows(rows, labels), numeric={1, 2, 3, 4, 5}))
    if out:
        out[0].note = note
    else:
        out.append(Section("Kernels", header, [], note=note + " No kernel changed."))
    return out


# The Nsight Compute figures shown per kernel, each headed by its declared unit where its cells leave it out.
_NCU_SHOWN = (("total_ms", "time"), ("busiest_unit_pct", "busiest unit"), ("sm_pct", "SM"), ("mem_pct", "memory"),
              ("tensor_pct", "tensor"), ("achieved_occupancy_pct", "occupancy"))
_NCU = METRICS["ncu_kernels"].measure


def _ncu_cell(row: NcuRow, key: str) -> str:
    b, a = row.before.get(key), row.after.get(key)
    if not isinstance(b, int | float) or not isinstance(a, int | float):
        return "—"
    return f"{table_cell(b, _NCU(key))} → {table_cell(a, _NCU(key))}"


def _stall_cell(row: NcuRow) -> str:
    top = row.top_stall()
    if top is None:
        return "—"
    reason, b, a = top
    return f"{reason} {'—' if b is None else f'{b:.0f}'} → {'—' if a is None else f'{a:.0f}'}"


def ncu_section(diff: Diff, name_chars: int = NAME_CHARS) -> Section | None:
    """Speed of light, occupancy and the top warp stall of each profiled kernel, before → after."""
    if not diff.ncu:
        return None
    labels = kernel_labels((r.kernel for r in diff.ncu), name_chars)
    rows = [[labels[r.kernel], f"{r.grid} / {r.block}",
             f"{r.before.get('busiest_unit') or '—'} → {r.after.get('busiest_unit') or '—'}",
             *(_ncu_cell(r, k) for k, _ in _NCU_SHOWN), _stall_cell(r)] for r in diff.ncu]
    return Section("Nsight Compute kernels (speed of light, % of peak)",
                   ["kernel", "grid / block", "busiest unit",
                    *(table_header(label, _NCU(key)) for key, label in _NCU_SHOWN), "top stall %"], rows,
                   note="Profiled kernels matched on name, grid and block. Top stall: the reason that held the "
                        "kernel's warps most before, as % of the cycles between two instructions (— where not among "
                        "a side's top three).", numeric=set(range(3, 3 + len(_NCU_SHOWN))))


def _saving(c: FindingChange, diff: Diff) -> str:
    """Time, or bytes for a memory finding (whose saving is in ``impact_bytes``); a finding whose time a bigger
    finding of its side counts says which ('part of #1 below-cublas-ceiling'), one that saves nothing says so."""
    def one(f: Finding | None, side: Report) -> str:
        if f is None:
            return "—"
        if f.impact_bytes is not None:
            return fmt_bytes(f.impact_bytes)
        owner = ""
        if f.part_of:
            rule = side.findings[f.part_of - 1].rule if 0 < f.part_of <= len(side.findings) else ""
            owner = f"part of #{f.part_of}" + (f" {rule}" if rule else "")
        if f.impact_ms <= 0 and has_saving(f):
            return owner or "none estimated"
        return fmt_ms(f.impact_ms) + (f" ({owner})" if owner else "")

    return f"{one(c.before, diff.before.report)} → {one(c.after, diff.after.report)}"


def _arrow(before: float | None, after: float | None, measure: Measure, per: str = "") -> str:
    """'1.5 GiB → 1.1 GiB' (a value by its declared unit, ``per`` after it: '/step'), '—' for a side without it."""
    def one(value: float | None) -> str:
        return "—" if value is None else fmt_measure(value, measure) + per
    return f"{one(before)} → {one(after)}"


def _signed(before: float | None, after: float | None, measure: Measure) -> str:
    """After − before by its declared unit, and relative to before: '+32.0 MiB (+4.2%)'."""
    if before is None or after is None:
        return "—"
    text = fmt_signed(after - before, measure)
    return text + (f" ({signed_pct(100.0 * (after - before) / before)})" if before and after != before else "")


def _gpu(rank: int | None, device: int | None) -> str:
    return f"rank {rank}, GPU {device}" if rank is not None else f"GPU {device} (snapshot)"


def memory_sections(diff: Diff) -> list[Section]:
    """Per GPU with allocator data: peak, reserved peak, growth per step and steps until full, before → after;
    then the allocation sites that hold memory step after step."""
    if not diff.memory:
        return []
    rows = []
    for m in diff.memory:
        peak, reserved = m.pair("peak_bytes"), m.pair("reserved_peak_bytes")
        growth, full = m.pair("growth_bytes_per_step"), m.pair("steps_to_oom")
        rows.append([_gpu(m.rank, m.device), _arrow(*peak, _MEMORY("peak_bytes")),
                     _signed(*peak, _MEMORY("peak_bytes")),
                     _arrow(*reserved, _MEMORY("reserved_peak_bytes")),
                     _arrow(*growth, _MEMORY("growth_bytes_per_step"), "/step"),
                     _signed(*growth, _MEMORY("growth_bytes_per_step")), _arrow(*full, _MEMORY("steps_to_oom"))])
    out = [Section("GPU memory", ["GPU", "peak allocated", "change", "reserved peak", "growth per step", "change",
                                  "steps until full"], rows,
                   note="Bytes, from the memory events of each side (and snapshots). Growth per step: the slope of "
                        "allocated memory over steady steps; steps until full: at that rate (— where it does not "
                        "grow).", numeric={1, 2, 3, 4, 5, 6})]
    if diff.growth_sites:
        out.append(Section("Memory held step after step, by allocation site",
                           ["GPU", "site", "per step before → after", "change"],
                           [[_gpu(s.rank, s.device), s.site, _arrow(s.before, s.after, _SITE, "/step"),
                             _signed(s.before, s.after, _SITE)] for s in diff.growth_sites],
                           note="Allocations of steady steps never freed, per step; 0 where a side measured the "
                                "growth and the site held nothing.", numeric={2, 3}))
    return out


def _severity(c: FindingChange) -> str:
    b, a = (c.before.severity if c.before else None), (c.after.severity if c.after else None)
    return b or a if b == a or None in (b, a) else f"{b} → {a}"  # type: ignore[return-value]


def findings_section(diff: Diff) -> Section:
    """Every finding of either side: resolved, new, persisting (changed or not)."""
    counts = {s: len(diff.by_status(s)) for s in (RESOLVED, NEW, PERSISTING)}
    rows = [[c.status + (" (changed)" if c.changed else ""), _severity(c), c.finding.rule,
             scope_text(c.finding.scope.to_dict()), _saving(c, diff)] for c in diff.findings]
    note = (f"{counts[RESOLVED]} resolved, {counts[NEW]} new, {counts[PERSISTING]} persisting; matched by rule and "
            "scope." if diff.findings else "Neither side has a finding.")
    return Section("Findings", ["status", "severity", "rule", "where", "est. saving before → after"], rows,
                   note=note, numeric={4})


def cross_rank_lines(diff: Diff) -> list[str]:
    """'expert-imbalance (rank 1): resolved.' for each straggler and expert-imbalance finding of either side."""
    if len(diff.ranks) < 2:
        return []
    lines = [f"{c.finding.rule} ({scope_text(c.finding.scope.to_dict())}): "
             + {RESOLVED: "resolved", NEW: "new", PERSISTING: "still there"}[c.status] + "." for c in diff.cross_rank()]
    return lines or ["No straggler-rank or expert-imbalance finding on either side."]


def _cell_arrow(before: float | None, after: float | None, write: Callable[[Any], str]) -> str:
    return f"{'–' if before is None else write(before)} → {'–' if after is None else write(after)}"


def efficiency_section(diff: Diff) -> Section | None:
    """MFU (MBU) per rank before → after, and the operators whose GPU time per step changed most with their
    TFLOP/s (tracedoc.diff.efficiency); None where neither side was measured."""
    if not diff.efficiency and not diff.operators:
        return None
    share = partial(fmt_measure, measure=dict(EFFICIENCY)["mfu_pct"])  # MFU or MBU: both shares of a peak
    ms, tflops = cell_format(OPERATORS.measure("gpu_ms")), cell_format(OPERATORS.measure("tflops"))
    figures = "; ".join(f"rank {r.rank}: {r.figure} {_cell_arrow(r.before, r.after, share)}" for r in diff.efficiency)
    rows = [[str(o.rank), short_name(o.op, 60), _cell_arrow(o.before_ms, o.after_ms, ms),
             signed_ms(o.change_ms), _cell_arrow(o.before_tflops, o.after_tflops, tflops)] for o in diff.operators]
    note = (figures + ". " if figures else "") + "Operators whose GPU time per steady step changed most."
    return Section("Efficiency", ["rank", "op", "GPU ms/step", "change", "TFLOP/s"], rows, note=note,
                   numeric={0, 2, 3, 4})


def sections(diff: Diff, name_chars: int = NAME_CHARS) -> list[Section]:
    """The tables of a diff, in reading order; kernel names cut to ``name_chars``."""
    out = [s for s in (steps_section(diff), causes_section(diff), efficiency_section(diff)) if s is not None]
    out += memory_sections(diff)
    out += kernel_sections(diff, name_chars)
    if (ncu := ncu_section(diff, name_chars)) is not None:
        out.append(ncu)
    out.append(findings_section(diff))
    return out
