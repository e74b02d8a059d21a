"""A Markdown report for issues, pull requests and wikis. Strings from traces are escaped."""

from __future__ import annotations

import re

from tracedoc.efficiency.render import OPERATOR_HEADERS, efficiency_lines, operator_rows
from tracedoc.pages.kinds import saving_cell
from tracedoc.render.base import Renderer
from tracedoc.report import Report
from tracedoc.units import fmt_pct
from tracedoc.words.attribution import attribution_by_device, window_text
from tracedoc.words.findings import (
    evidence_rows,
    missing_ranks_lines,
    scope_text,
    summary_text,
    what_if_text,
)
from tracedoc.words.memory import NOTE, memory_lines
from tracedoc.words.sanitize import one_line

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def escape(text: object) -> str:
    """Make text from a trace literal in Markdown: one line (a line break could end a table row and start a
    heading), no escape sequences or control characters, no links, HTML, emphasis or table breaks."""
    return _MD_SPECIAL.sub(r"\\\1", one_line(text))


class MarkdownRenderer(Renderer):
    name = "md"

    def __init__(self, headline: bool = True) -> None:
        self.headline = headline  # False when a command writes its own title and summary above the report

    def render(self, report: Report) -> str:
        wall = report.summary.get("wall_ms") or 0.0
        window = window_text(report)
        lines = ["# tracedoc report", "", summary_text(report.summary, report.input_count) + ".", "",
                 *([escape(window), ""] if window else []),
                 *(f"{escape(line)}\n" for line in missing_ranks_lines(report.summary))] if self.headline else []
        lines += ["## Findings", ""]
        if not report.findings:
            lines += ["No problems found by the rules that ran.", ""]
        else:
            lines += ["| # | severity | rule | where | est. saving |", "|---|---|---|---|---|"]
            for i, f in enumerate(report.findings, 1):
                lines.append(f"| {i} | {f.severity} | `{f.rule}` | {escape(scope_text(f.scope.to_dict()))} | "
                             f"{saving_cell(f, wall)} |")
            lines.append("")
            for i, f in enumerate(report.findings, 1):
                lines += [f"### {i}. {escape(f.title)} (`{f.rule}`, {f.severity})", "", escape(f.message), "",
                          f"**Estimated saving:** {saving_cell(f, wall)}", "",
                          "| evidence | value |", "|---|---|"]
                lines += [f"| {escape(name)} | {escape(value)} |" for name, value in evidence_rows(f.evidence)]
                lines += ["", f"**Fix:** {escape(f.fix)}", ""]
                if projection := report.what_if_for(i):
                    lines += [f"*{escape(what_if_text(projection))}*", ""]
                if f.references:
                    lines += ["References: " + ", ".join(f"<{r}>" for r in f.references), ""]
        devices = attribution_by_device(report.attribution)
        if devices:
            lines += ["## Where the time went", "",
                      "Each GPU's window attributed once; the savings above are drawn from it.", "",
                      "| rank | GPU | cause | share | mostly |", "|---|---|---|---|---|"]
            lines += [f"| {rank} | {device} | {s.label} | {fmt_pct(s.pct)} | {escape(s.top_detail or '')} |"
                      for (rank, device), shares in devices.items() for s in shares]
            lines.append("")
        if eff := efficiency_lines(report):
            lines += ["## Efficiency", "", *(f"- {escape(line)}" for line in eff), ""]
        if ops := operator_rows(report):
            lines += ["## Operators", "", "Steady steps; share: of the GPU work; roofline: the op's time at peak "
                      "FLOP/s or bandwidth, % of its GPU time.", "",
                      "| " + " | ".join(OPERATOR_HEADERS) + " |", "|" + "---|" * len(OPERATOR_HEADERS)]
            lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in ops]
            lines.append("")
        if memory := memory_lines(report):
            lines += ["## Memory", "", NOTE + ".", ""]
            for heading, items in memory:
                lines += [f"**{escape(heading)}**", "", *(f"- {escape(item)}" for item in items), ""]
        lines += ["## Inputs", "", "| rank | format | events | path |", "|---|---|---|---|"]
        lines += [f"| {'—' if i.rank is None else i.rank} | {i.format} | {i.events:,} | {escape(i.path)} |"
                  for i in report.inputs]
        return "\n".join(lines) + "\n"
