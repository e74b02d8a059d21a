"""The renderer interface and registry: each format's name and file extension are held once, here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from tracedoc.units import fmt_ms

if TYPE_CHECKING:
    from tracedoc.report import Finding, Report


class Renderer:
    """Turns a Report into one output document."""

    name: ClassVar[str]
    extension: ClassVar[str]

    def render(self, report: Report) -> str:
        raise NotImplementedError


RENDERERS: dict[str, type[Renderer]] = {}


def renderer_for_extension(suffix: str) -> type[Renderer] | None:
    """The renderer whose files end with ``suffix`` (e.g. '.md'), if any."""
    return next((r for r in RENDERERS.values() if r.extension == suffix.lower()), None)


def fmt_value(value: object, unit: str) -> str:
    """An evidence value with its unit."""
    if isinstance(value, float):
        text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.3g}"
    elif isinstance(value, int):
        text = f"{value:,}"
    elif value is None:
        return "n/a"
    else:
        text = str(value)
    unit = {"count": "", "us": "µs"}.get(unit, unit)
    return f"{text} {unit}".strip() if unit != "%" else f"{text}%"


def summary_text(summary: dict[str, object], inputs: int) -> str:
    """The report's one-line headline; inputs without a timeline (e.g. hang dumps) have no wall time."""
    ranks = f"{summary['ranks']} of {summary['world_size']} ranks" if summary.get("world_size") else \
        f"{summary.get('ranks')} rank(s)"
    parts = [f"{inputs} input(s)"] + ([ranks] if summary.get("ranks") else [])
    if summary.get("wall_ms") and summary.get("gpu_busy_pct") is not None:
        parts += [f"wall {fmt_ms(float(summary['wall_ms']))}",
                  f"GPU busy {fmt_value(summary['gpu_busy_pct'], '%')}{_busy_breakdown(summary)}"]
    elif summary.get("wall_ms") and summary.get("basis") == "host-only timeline":
        parts += [f"wall {fmt_ms(float(summary['wall_ms']))}", "no GPU activity recorded"]
    elif summary.get("wall_ms"):  # kernel profiles: no timeline, only the profiled kernels' time
        parts.append(f"profiled kernel time {fmt_ms(float(summary['wall_ms']))}")
    if summary.get("efficiency"):  # tracedoc.efficiency.headline
        parts.append(str(summary["efficiency"]))
    return " · ".join(parts)


def missing_ranks_lines(summary: dict[str, object]) -> list[str]:
    """Lines for under the headline: when the inputs are runs of different kinds (``summary['mixed_inputs']``),
    when the traces hold fewer ranks than their job has, and one per input a
    distributed run could not analyse (``summary['missing_ranks']``); the paths and reasons are untrusted text, for
    the caller to sanitize or escape."""
    lines = []
    if summary.get("mixed_inputs"):
        lines.append(f"These inputs are runs of different kinds, not the ranks of one job: {summary['mixed_inputs']}. "
                     "The rank count and the headline mix them; analyse each kind apart.")
    if summary.get("world_size"):
        lines.append(f"The job has {summary['world_size']} ranks and these traces hold {summary['ranks']}: what they "
                     "wait for and who straggles are judged among these alone.")
    for missing in summary.get("missing_ranks") or []:
        rank = "an input" if missing.get("rank") is None else f"rank {missing['rank']}"
        lines.append(f"Missing {rank} ({missing.get('path')}): {missing.get('reason')}; the report is of the others.")
    return lines


def _busy_breakdown(summary: dict[str, object]) -> str:
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


def what_if_text(projection: dict[str, object]) -> str:
    """'If fixed: step 68.9 ms → 18.2 ms (−73.6%); next: host-sync (#2), 28.6% of the projected step.'"""
    text = (f"If fixed: step {fmt_ms(float(projection['step_ms']))} → {fmt_ms(float(projection['projected_step_ms']))}"
            f" (−{float(projection['gain_pct']):.1f}%) on rank {projection['rank']}; next: {projection['next']}, "
            f"{float(projection['next_share_pct']):.1f}% of the projected step.")
    if projection.get("latent"):
        text += f" Latent: {projection['latent']}."
    return text


def saving_text(impact_ms: float, impact_pct: float, wall_ms: float) -> str:
    """'12.3 ms (4.5%)', or just the time when there is no wall time to compare with."""
    return f"{fmt_ms(impact_ms)} ({impact_pct:.1f}%)" if wall_ms else fmt_ms(impact_ms)


def scope_text(scope: dict[str, object]) -> str:
    """'rank 0, device 1, kernel ...' from a finding's scope."""
    return ", ".join(f"{k} {v}" for k, v in scope.items()) or "whole job"


def finding_span(finding: Finding, window: tuple[float, float] | None, steps: Mapping[int, tuple[float, float]],
                 per_ms: float, origin: float | None = None) -> tuple[float, float] | None:
    """The time a finding is about, in the unit of ``window`` and ``steps`` (its rank's window and its steps' spans;
    ``per_ms`` units make a ms): its longest gap (gpu-gaps' evidence, ms into the trace: after ``origin``, the
    rank's first recorded activity, the window's start when not given), else the step it names, else the window;
    None without a window. The timeline and the Perfetto trace place findings by it."""
    if window is None:
        return None
    evidence = {e.name: e.value for e in finding.evidence}
    at, length = evidence.get("longest gap starts after"), evidence.get("longest gap")
    if isinstance(at, int | float) and isinstance(length, int | float):
        start = (window[0] if origin is None else origin) + float(at) * per_ms
        return start, start + float(length) * per_ms
    if finding.scope.step is not None and finding.scope.step in steps:
        return steps[finding.scope.step]
    return window
