"""The diff page of ``tracedoc serve --diff BEFORE AFTER``: the verdict, both sides' step times as distributions,
the compared rank's step split by cause before and after, the kernel deltas and the findings' fate.

The tables are the HTML diff's (tracedoc/diff/html.py, built from tracedoc/diff/sections.py like the text and
Markdown diffs); the charts are Bokeh, drawn in the dashboard.
"""

from __future__ import annotations

import math
from typing import Any

from bokeh.models import ColumnDataSource, FactorRange, HoverTool
from bokeh.plotting import figure

from tracedoc.diff.html import section_html
from tracedoc.diff.model import Diff
from tracedoc.diff.sections import context_line, cross_rank_lines, sections, sides_line, verdict_line, warning_lines
from tracedoc.pages.charts import BAR_HEIGHT_PX, Section, stacked_hbar_chart, style
from tracedoc.pages.fragments import Html, cause_color, esc
from tracedoc.words.attribution import cause_label

TITLE = "Diff"
SIDE_COLORS = {"before": "#9aa1ad", "after": "#4c72b0"}


def step_chart(diff: Diff) -> Any | None:
    """Each step of the job and of every rank as a dot, before above after, with each side's median as a bar: the
    two distributions the verdict compares."""
    scopes = [("job", diff.job)]
    if len(diff.ranks) > 1:
        scopes += [(f"rank {r.steps.rank}", r.steps) for r in diff.ranks]
    if not any(s.before_steps or s.after_steps for _, s in scopes):
        return None
    dots: dict[str, list[Any]] = {"y": [], "ms": [], "step": [], "side": [], "color": []}
    medians: dict[str, list[Any]] = {"y": [], "ms": [], "side": []}
    for label, comparison in scopes:
        for side, steps, dist in (("before", comparison.before_steps, comparison.before),
                                  ("after", comparison.after_steps, comparison.after)):
            for step, ms in sorted(steps.items()):
                dots["y"].append((label, side))
                dots["ms"].append(ms)
                dots["step"].append(step)
                dots["side"].append(side)
                dots["color"].append(SIDE_COLORS[side])
            if dist is not None:
                medians["y"].append((label, side))
                medians["ms"].append(dist.median_ms)
                medians["side"].append(side)
    factors = [(label, side) for label, _ in scopes for side in ("before", "after")]
    fig = figure(y_range=FactorRange(*reversed(factors)), height=90 + 2 * BAR_HEIGHT_PX * len(factors),
                 sizing_mode="stretch_width", toolbar_location=None, tools="")
    fig.scatter(x="ms", y="y", marker="dash", angle=math.pi / 2, size=22, line_width=3, line_color="#1a1d23",
                source=ColumnDataSource(medians))
    points = fig.scatter(x="ms", y="y", size=9, color="color", alpha=0.8, legend_field="side",
                         source=ColumnDataSource(dots))
    fig.add_tools(HoverTool(renderers=[points], tooltips=[("", "@side, step @step"), ("step time", "@ms{0,0.000} ms")]))
    style(fig, "step time (ms): one dot per step, each side's median a black bar")
    fig.yaxis.group_label_orientation = "horizontal"
    fig.x_range.start = 0
    fig.legend.orientation = "horizontal"
    fig.add_layout(fig.legend[0], "above")
    return fig


def cause_chart(diff: Diff) -> Any | None:
    """The compared rank's mean step, before and after, split by cause on one scale."""
    causes = [c for c in diff.causes if c.before_ms > 0 or c.after_ms > 0]
    if not causes:
        return None
    causes.sort(key=lambda c: -(c.before_ms + c.after_ms))
    stacks = {cause_label(c.cause): [c.before_ms, c.after_ms] for c in causes}
    return stacked_hbar_chart(["before", "after"], stacks, [cause_color(c.cause) for c in causes],
                              "ms per step (mean)")


def diff_sections(diff: Diff) -> list[Section]:
    """The page, top to bottom."""
    head = (f'<p class="headline">{esc(sides_line(diff))}</p><p class="verdict"><b>{esc(verdict_line(diff))}</b></p>'
            + "".join(f'<p class="note"><b>{esc(line)}</b></p>' for line in warning_lines(diff))
            + (f'<p class="note">{esc(context)}</p>' if (context := context_line(diff)) else ""))
    out = [Section("tracedoc diff", items=[Html(head)])]
    for section in sections(diff):
        charts = []
        if section.title.startswith("Step time"):
            charts = [c for c in (step_chart(diff),) if c is not None]
        elif section.title.startswith("Where the time went"):
            charts = [c for c in (cause_chart(diff),) if c is not None]
        table = section_html(section, heading=False)
        out.append(Section(section.title, note=section.note, items=[*charts, *([Html(table)] if table else [])]))
    if cross := cross_rank_lines(diff):
        out.append(Section("Across ranks", items=[Html("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in cross)
                                                       + "</ul>")]))
    if diff.notes:
        out.append(Section("Notes", items=[Html("".join(f'<p class="note">{esc(n)}</p>' for n in diff.notes))]))
    return out
