"""The overview's chart of the findings' estimated savings.

Only findings whose time is a saving get a bar (tracedoc.pages.kinds: no bar for a hang or an informational health
finding), one per rule and GPU (telemetry and an NVML snapshot may both find one GPU throttled); every bar is
labelled with its saving, and the axis is logarithmic when the savings span more than LOG_SPAN, so that a 95 µs
finding beside a 183 ms one is still seen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bokeh.models import LabelSet

from tracedoc.pages.charts import hbar_chart, open_on_click, short
from tracedoc.pages.fragments import SEVERITY_COLORS
from tracedoc.pages.kinds import bar_text, charted
from tracedoc.report import Finding, Report
from tracedoc.words.findings import scope_text

MAX_BARS = 20
LOG_SPAN = 30.0  # largest saving over the smallest one from which the axis is logarithmic


def note(report: Report, findings: Sequence[Finding]) -> str:
    """The chart's note: what is ranked, what the scale is, and which findings have no bar and why."""
    bars = charted(findings)
    left = f" (the first {MAX_BARS} of {len(bars)} shown)" if len(bars) > MAX_BARS else ""
    out = (f"Findings ranked by the time fixing them is estimated to save{left}; each bar is labelled with it."
           if bars else "No finding here has a time saving to chart.")
    if is_log([f for f, _ in bars[:MAX_BARS]]):
        out += " The scale is logarithmic, so that small savings show beside large ones."
    hangs = sum(f.kind == "hang" for f in findings)
    health = sum(f.kind == "health" for f in findings)
    if hangs:
        out += f" No bar for {hangs} hang finding(s): their time is how long the ranks waited, not a saving."
    if health:
        out += (f" No bar for {health} informational health finding(s): nothing is broken, so there is nothing "
                "to save.")
    if sum(n - 1 for _, n in bars):
        out += " One bar per rule and GPU: where several inputs found the same thing there, the largest is shown."
    return out


def is_log(findings: Sequence[Finding]) -> bool:
    """Whether the savings span more than LOG_SPAN (largest over smallest non-zero)."""
    values = [f.impact_ms for f in findings if f.impact_ms > 0]
    return len(values) > 1 and max(values) / min(values) > LOG_SPAN


def savings_chart(report: Report, findings: Sequence[Finding],
                  link: Callable[[Finding], str | None] | None = None) -> Any | None:
    """One bar per charted finding (the first MAX_BARS), its estimated saving in ms, coloured by severity and
    labelled with its value; None when no finding has a saving. With ``link``, a click on a bar opens the timeline
    where the finding lies."""
    bars = charted(findings)[:MAX_BARS]
    if not bars:
        return None
    wall = float(report.summary.get("wall_ms") or 0.0)
    number_of = {id(f): i for i, f in enumerate(report.findings, 1)}
    top = [f for f, _ in bars]
    log = is_log(top)
    floor = min((f.impact_ms for f in top if f.impact_ms > 0), default=1.0) / 4 if log else 0.0
    labels = [f"{number_of[id(f)]}. {f.rule} · {short(scope_text(f.scope.to_dict()), 40)}" for f in top]
    values = [max(f.impact_ms, floor) for f in top]
    fig = hbar_chart(labels, values, [SEVERITY_COLORS[f.severity] for f in top],
                     "estimated saving (ms" + (", log scale)" if log else ")"),
                     [("finding", "@y"), ("title", "@title"), ("saving", "@saving"), ("counted by", "@part_of"),
                      ("found", "@found")],
                     extra={"title": [f.title for f in top], "saving": [bar_text(f, wall) for f in top],
                            "part_of": [f"finding #{f.part_of}" if f.part_of else "itself" for f in top],
                            "found": [f"{n} times here; the largest is shown" if n > 1 else "once" for _, n in bars],
                            "href": [(link(f) if link else None) or "" for f in top]},
                     x_axis_type="log" if log else "linear", left=floor)
    fig.add_layout(LabelSet(x="value", y="y", text="saving", source=fig.renderers[0].data_source, x_offset=5,
                            text_baseline="middle", text_font_size="8.5pt", text_color="#1d2330"))
    top_value = max(values)
    fig.x_range.end = top_value * (6 if log else 1.3)  # room for the labels right of the longest bar
    if log:
        fig.x_range.start = floor
    if link:
        open_on_click(fig)
    return fig
