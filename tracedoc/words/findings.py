"""A report's facts in words, for every output: values with their units, a finding's scope, saving and evidence,
the headline, what-if projections, and where a finding lies in time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.units import fmt_bytes, fmt_count, fmt_ms, fmt_pct

if TYPE_CHECKING:
    from tracedoc.report import Evidence, Finding


# a size given in one of these units is written in the largest of them that keeps it at 1 or more
SIZE_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def fmt_value(value: object, unit: str) -> str:
    """An evidence value with its unit: a count as a whole number ('1,152 kernels', a mean of many things rounded
    too), a size in the unit that keeps it short ('1.92 TB', not '1,924,615.1 MB'), a flag as yes or no; byte counts
    as '32.0 MiB (33,554,432 bytes)'."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "n/a"
    if unit == "bytes" and isinstance(value, int | float):
        return f"{fmt_bytes(value)} ({value:,.0f} bytes)" if abs(value) >= 1024 else f"{value:,.0f} bytes"
    if unit in SIZE_UNITS and isinstance(value, int | float) and value:
        value, unit = _scaled_size(float(value), unit)
    if isinstance(value, float) and unit == "count" and (value.is_integer() or abs(value) >= 100):
        value = round(value)
    if isinstance(value, float):
        text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3g}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    unit = {"count": "", "us": "µs"}.get(unit, unit)
    return f"{text} {unit}".strip() if unit != "%" else f"{text}%"


def _scaled_size(value: float, unit: str) -> tuple[float, str]:
    """A size moved to the largest unit (powers of 1000, as the rules give them) in which it is still 1 or more."""
    i = SIZE_UNITS.index(unit)
    while i + 1 < len(SIZE_UNITS) and abs(value) >= 1000:
        value, i = value / 1000, i + 1
    while i > 0 and abs(value) < 1:
        value, i = value * 1000, i - 1
    return value, SIZE_UNITS[i]


def evidence_rows(evidence: Sequence[Evidence]) -> list[tuple[str, str]]:
    """(name, value text) per evidence name: a figure given in two units under one name (a time and its share)
    reads as one row, '182.7 ms (88.3%)', rather than two rows with one label."""
    merged: list[tuple[str, list[str]]] = []
    for e in evidence:
        if merged and merged[-1][0] == e.name:
            merged[-1][1].append(fmt_value(e.value, e.unit))
        else:
            merged.append((e.name, [fmt_value(e.value, e.unit)]))
    return [(name, values[0] + (f" ({', '.join(values[1:])})" if values[1:] else "")) for name, values in merged]


def summary_text(summary: dict[str, Any], inputs: int) -> str:
    """The report's one-line headline; inputs without a timeline (e.g. hang dumps) have no wall time."""
    ranks = f"{summary['ranks']} of {summary['world_size']} ranks" if summary.get("world_size") else \
        fmt_count(summary.get("ranks"), "rank", "ranks")
    parts = [fmt_count(inputs, "input", "inputs")] + ([ranks] if summary.get("ranks") else [])
    if summary.get("wall_ms") and summary.get("gpu_busy_pct") is not None:
        parts += [f"wall {fmt_ms(float(summary['wall_ms']))}",
                  f"GPU busy {fmt_value(summary['gpu_busy_pct'], '%')}{_busy_breakdown(summary)}"]
    elif summary.get("wall_ms") and summary.get("basis") == "host-only timeline":
        parts += [f"wall {fmt_ms(float(summary['wall_ms']))}", "no GPU activity recorded"]
    elif summary.get("wall_ms"):  # kernel profiles: no timeline, only the profiled kernels' time
        parts.append(f"profiled kernel time {fmt_ms(float(summary['wall_ms']))}")
    if summary.get("efficiency"):  # tracedoc.efficiency.headline
        parts.append(str(summary["efficiency"]))
    if summary.get("memory"):  # tracedoc.memory_report.memory_headline: a memory-only input
        parts.append(str(summary["memory"]))
    return " · ".join(parts)


def missing_ranks_lines(summary: dict[str, Any]) -> list[str]:
    """Lines for under the headline: the thresholds --set changed (``summary['thresholds']``), the earlier cycles
    of a profiler's schedule set aside (``summary['set_aside']``), when the inputs are separate runs
    (``summary['mixed_inputs']``), when the traces hold fewer ranks than their job has, and one per input a
    distributed run could not analyse (``summary['missing_ranks']``); the paths and reasons are untrusted text, for
    the caller to sanitize or escape."""
    lines = []
    if summary.get("thresholds"):
        lines.append("Thresholds set: " + ", ".join(f"{rule}.{name}={value:g}" for rule, values
                                                    in summary["thresholds"].items() for name, value in values.items())
                     + " (--set; the others are the rules' own).")
    if summary.get("set_aside"):
        lines.append(_set_aside_line(summary["set_aside"]))
    if summary.get("mixed_inputs"):
        lines.append(f"These inputs are separate runs, not the ranks of one job: {summary['mixed_inputs']}. "
                     "The rank count and the headline mix them; analyse each apart.")
    if summary.get("world_size"):
        lines.append(f"The job has {summary['world_size']} ranks and these traces hold {summary['ranks']}: what they "
                     "wait for and who straggles are judged among these alone.")
    for missing in summary.get("missing_ranks") or []:
        rank = "an input" if missing.get("rank") is None else f"rank {missing['rank']}"
        lines.append(f"Missing {rank} ({missing.get('path')}): {missing.get('reason')}; the report is of the others.")
    return lines


def _set_aside_line(rows: list[dict[str, Any]]) -> str:
    """'Judged the last of the 3 traces process 476 wrote, one per cycle of the profiler's schedule (….json.gz);
    the 2 earlier ones are set aside (….json.gz, ….json.gz): name one to judge it.' For several processes, the count."""
    judged = list(dict.fromkeys(str(row.get("judged")) for row in rows))
    earlier = [Path(str(row.get("path"))).name for row in rows]
    if len(judged) == 1:
        pid = rows[0].get("pid")
        process = "one process" if pid is None else f"process {pid}"
        return (f"Judged the last of the {len(rows) + 1} traces {process} wrote, one per cycle of the profiler's "
                f"schedule ({Path(judged[0]).name}); {_earlier(len(rows))} set aside ({', '.join(earlier)}): "
                "name one to judge it.")
    return (f"Judged the last of the traces each of {len(judged)} processes wrote, one per cycle of the profiler's "
            f"schedule; {len(rows)} earlier traces are set aside ({', '.join(earlier[:3])}"
            f"{', …' if len(earlier) > 3 else ''}): name one to judge it.")


def _earlier(count: int) -> str:
    return "the earlier one is" if count == 1 else f"the {count} earlier ones are"


def _busy_breakdown(summary: dict[str, Any]) -> str:
    """' (computing 79.1%, communication 19.1%, of which 13.5% waiting for rank 1)' when the report knows."""
    computing, comm = summary.get("computing_pct"), summary.get("communication_pct")
    if computing is None or comm is None:
        return ""
    text = f" (computing {fmt_value(computing, '%')}"
    if float(comm) >= 0.05:
        text += f", communication {fmt_value(comm, '%')}"
        waiting, peer = summary.get("waiting_pct"), summary.get("waiting_for_rank")
        if waiting is not None and float(waiting) >= 0.05 and peer is not None:
            text += f", of which {fmt_value(waiting, '%')} waiting for rank {peer}"
    return text + ")"


def what_if_text(projection: dict[str, Any]) -> str:
    """'If fixed: step 68.9 ms → 26.2 ms (−62.0%); next: host-sync (#2), 31.1% of the projected step.'"""
    text = (f"If fixed: step {fmt_ms(float(projection['step_ms']))} → {fmt_ms(float(projection['projected_step_ms']))}"
            f" (−{fmt_pct(float(projection['gain_pct']))}) on rank {projection['rank']}; next: {projection['next']}, "
            f"{fmt_pct(float(projection['next_share_pct']))} of the projected step.")
    if projection.get("latent"):
        text += f" Latent: {projection['latent']}."
    return text


def saving_text(impact_ms: float, impact_pct: float, wall_ms: float, impact_bytes: int | None = None) -> str:
    """'12.3 ms (4.5%)', or just the time when there is no wall time to compare with; a memory finding's saving is
    in bytes ('32.0 MiB of memory'), never added to time."""
    if impact_bytes is not None:
        return f"{fmt_bytes(impact_bytes)} of memory"
    return f"{fmt_ms(impact_ms)} ({fmt_pct(impact_pct)})" if wall_ms else fmt_ms(impact_ms)


def finding_saving_text(finding: Finding, wall_ms: float) -> str:
    """A finding's saving; 'part of #N' alone when the finding it is part of holds all of its time."""
    if finding.part_of and finding.impact_ms <= 0 and finding.impact_bytes is None:
        return f"part of #{finding.part_of}"
    part = f", part of #{finding.part_of}" if finding.part_of else ""
    return saving_text(finding.impact_ms, finding.impact_pct, wall_ms, finding.impact_bytes) + part


def scope_text(scope: dict[str, Any]) -> str:
    """'rank 0, device 1, kernel ...' from a finding's scope."""
    return ", ".join(f"{k} {v}" for k, v in scope.items()) or "whole job"


def finding_span(finding: Finding, window: tuple[float, float] | None, steps: Mapping[int, tuple[float, float]],
                 per_ms: float, origin: float | None = None) -> tuple[float, float] | None:
    """The time a finding is about, in the unit of ``window`` and ``steps`` (its rank's window and its steps' spans;
    ``per_ms`` units make a ms): the span its rule gives it (``Finding.span``, e.g. gpu-gaps' longest gap; ms
    into the trace: after ``origin``, the rank's first recorded activity, the window's start when not given), else
    the step it names, else the window; None without a window. The timeline and the Perfetto trace place findings
    by it."""
    if window is None:
        return None
    if finding.span is not None:
        start = (window[0] if origin is None else origin) + float(finding.span.start_ms) * per_ms
        return start, start + float(finding.span.dur_ms) * per_ms
    if finding.scope.step is not None and finding.scope.step in steps:
        return steps[finding.scope.step]
    return window
