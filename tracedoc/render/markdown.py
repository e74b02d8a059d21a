"""A Markdown report for issues, pull requests and wikis. Strings from traces are escaped."""

from __future__ import annotations

import re

from tracedoc.render.base import Renderer, fmt_ms, fmt_value, scope_text
from tracedoc.report import Report

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def escape(text: object) -> str:
    """Make text from a trace literal in Markdown (no links, HTML, emphasis or table breaks)."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


class MarkdownRenderer(Renderer):
    name = "md"
    extension = ".md"

    def render(self, report: Report) -> str:
        s = report.summary
        lines = ["# tracedoc report", "",
                 f"{len(report.inputs)} input(s), {s['ranks']} rank(s), wall {fmt_ms(s['wall_ms'])}, "
                 f"GPU busy {fmt_value(s['gpu_busy_pct'], '%')}.", ""]
        lines += ["## Findings", ""]
        if not report.findings:
            lines += ["No problems found by the rules that ran.", ""]
        else:
            lines += ["| # | severity | rule | where | est. saving |", "|---|---|---|---|---|"]
            for i, f in enumerate(report.findings, 1):
                lines.append(f"| {i} | {f.severity} | `{f.rule}` | {escape(scope_text(f.scope.to_dict()))} | "
                             f"{fmt_ms(f.impact_ms)} ({f.impact_pct:.1f}%) |")
            lines.append("")
            for i, f in enumerate(report.findings, 1):
                lines += [f"### {i}. {escape(f.title)} (`{f.rule}`, {f.severity})", "", escape(f.message), "",
                          f"**Estimated saving:** {fmt_ms(f.impact_ms)} ({f.impact_pct:.1f}% of wall time)", "",
                          "| evidence | value |", "|---|---|"]
                lines += [f"| {escape(e.name)} | {escape(fmt_value(e.value, e.unit))} |" for e in f.evidence]
                lines += ["", f"**Fix:** {escape(f.fix)}", ""]
                if f.references:
                    lines += ["References: " + ", ".join(f"<{r}>" for r in f.references), ""]
        lines += ["## Inputs", "", "| rank | format | events | path |", "|---|---|---|---|"]
        lines += [f"| {i.rank} | {i.format} | {i.events:,} | {escape(i.path)} |" for i in report.inputs]
        return "\n".join(lines) + "\n"
