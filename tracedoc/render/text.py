"""The terminal report (rich): the top findings and their savings readable at a glance.

Every string that can hold text from a trace is passed to Rich as a ``Text`` (never parsed as markup) after
``sanitize.terminal_text`` took out escape sequences and control characters.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracedoc.efficiency.render import OPERATOR_HEADERS, efficiency_lines, operator_rows
from tracedoc.pages.kinds import has_saving, saving_cell
from tracedoc.pages.names import kernel_labels
from tracedoc.render.base import Renderer
from tracedoc.render.ranks import rank_steps_parts, step_times_text
from tracedoc.report import Finding, Report
from tracedoc.report_tables import METRICS
from tracedoc.units import fmt_measure, fmt_pct
from tracedoc.words.attribution import attribution_by_device, part_of_text, window_text
from tracedoc.words.findings import (
    evidence_rows,
    finding_saving_text,
    fmt_ms,
    missing_ranks_lines,
    saving_text,
    scope_text,
    summary_text,
    what_if_text,
)
from tracedoc.words.memory import NOTE, memory_lines
from tracedoc.words.sanitize import one_line, terminal_text

_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
KERNEL_CHARS = 60  # kernel names in the top-kernels table, shortened as the dashboard does (the JSON has them whole)


class TextRenderer(Renderer):
    name = "text"

    def __init__(self, width: int = 110, color: bool = False) -> None:
        self.width = width
        self.color = color

    def render(self, report: Report) -> str:
        buf = io.StringIO()
        console = Console(file=buf, width=self.width, force_terminal=self.color, no_color=not self.color,
                          highlight=False)
        for part in self.parts(report):
            console.print(part)
        return buf.getvalue()

    def parts(self, report: Report) -> list:
        """The renderables, so the CLI can print them to a live console with colour."""
        wall = report.summary.get("wall_ms") or 0.0
        head = Text.assemble(("tracedoc ", "bold"), one_line(summary_text(report.summary, report.input_count)))
        out: list = [head, *(Text(one_line(line), style="yellow") for line in missing_ranks_lines(report.summary))]
        if window := window_text(report):
            out.append(Text(one_line(window), style="dim"))
        if steps := step_times_text(report.metrics):
            out.append(Text(steps, style="dim"))
        if not report.findings:
            out.append(Text("No problems found by the rules that ran.", style="green"))
            return (out + top_kernel_parts(report) + attribution_parts(report) + memory_parts(report)
                    + rank_steps_parts(report.metrics) + efficiency_parts(report))
        table = Table(show_header=True, header_style="bold", expand=False, box=None, pad_edge=False)
        columns: tuple[tuple[str, dict[str, Any]], ...] = (
            ("#", {"justify": "right"}), ("severity", {}), ("rule", {}), ("where", {}),
            ("est. saving", {"justify": "right"}), ("", {"justify": "right"}))
        for col, kw in columns:
            table.add_column(col, **kw)
        for i, f in enumerate(report.findings, 1):
            table.add_row(str(i), Text(f.severity, style=_STYLE.get(f.severity, "")), Text(one_line(f.rule)),
                          Text(one_line(scope_text(f.scope.to_dict()))), *_saving_cells(f, wall))
        out.append(table)
        for i, f in enumerate(report.findings, 1):
            evidence = Table.grid(padding=(0, 2))
            evidence.add_column(style="dim")
            evidence.add_column()
            for name, value in evidence_rows(f.evidence):
                evidence.add_row(Text(one_line(name)), Text(one_line(value)))
            shared = [Text(part_of_text(f.part_of), style="dim"), Text("")] if f.part_of else []
            projection = report.what_if_for(i)
            after = [Text(""), Text(terminal_text(what_if_text(projection)), style="italic")] if projection else []
            body = Group(Text(terminal_text(f.message)), Text(""), *shared, evidence, Text(""),
                         Text.assemble(("fix: ", "bold"), terminal_text(f.fix)), *after)
            # the rule id goes with the saving, under the box: a long title cut at the terminal's width keeps it
            title = Text.assemble((f"{i}. ", "bold"), (one_line(f.title), "bold"))
            out.append(Panel(body, title=title, title_align="left", border_style=_STYLE.get(f.severity, ""),
                             subtitle=Text(f"{one_line(f.rule)} · {_saving_subtitle(f, wall)}"),
                             subtitle_align="right"))
        return (out + attribution_parts(report) + memory_parts(report) + rank_steps_parts(report.metrics)
                + efficiency_parts(report))


def memory_parts(report: Report) -> list:
    """The Memory section: per GPU, peak, growth, live sites, fragmentation and OOMs (bytes)."""
    devices = memory_lines(report)
    if not devices:
        return []
    out: list = [Text("Memory", style="bold"), Text(NOTE, style="dim")]
    for heading, lines in devices:
        out.append(Text(one_line(heading), style="bold"))
        out += [Text("  " + terminal_text(line)) for line in lines]
    return out


def _saving_cells(finding: Finding, wall: float) -> tuple[str, str]:
    """A finding's two cells in the findings table: its saving (in bytes for memory) and its share of the wall
    time or 'part of #N'; blank where it saves nothing, and what its time is for a hang or a health finding."""
    if not has_saving(finding) and finding.impact_bytes is None:
        return saving_cell(finding, wall), ""
    if finding.impact_bytes is not None:
        return saving_text(0, 0, 0, finding.impact_bytes), f"part of #{finding.part_of}" if finding.part_of else ""
    if finding.impact_ms <= 0:
        return "", f"part of #{finding.part_of}" if finding.part_of else ""
    return fmt_ms(finding.impact_ms), f"part of #{finding.part_of}" if finding.part_of else \
        fmt_pct(finding.impact_pct) if wall else ""


def _saving_subtitle(finding: Finding, wall: float) -> str:
    """A finding panel's subtitle: what fixing it saves, 'part of #N' when a bigger finding counts its time, that
    it has no time to save of its own (a hang or a health finding: its time is in the table, no saving)."""
    if not has_saving(finding) and finding.impact_bytes is None:
        return "no saving: the job is stuck" if finding.kind == "hang" else "informational, no saving"
    if finding.impact_ms > 0 or finding.impact_bytes is not None:
        return f"saves ~{finding_saving_text(finding, wall)}"
    return f"part of #{finding.part_of}" if finding.part_of else "no time saving estimated"


def efficiency_parts(report: Report) -> list:
    """MFU/MBU per rank and the operators with the most GPU time (tracedoc.efficiency.render)."""
    lines = efficiency_lines(report)
    rows = operator_rows(report)
    if not lines and not rows:
        return []
    out: list = [Text("Efficiency", style="bold"), *(Text(one_line(line)) for line in lines)]
    if rows:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        # what a terminal's width holds: no intensity, no shapes (the Markdown and HTML reports have them)
        keep = [i for i, col in enumerate(OPERATOR_HEADERS) if col not in ("FLOP/B", "shape")]
        for i in keep:
            col = OPERATOR_HEADERS[i]
            op: dict[str, Any] = {"overflow": "ellipsis", "max_width": 28} if col == "op" else {}
            table.add_column(col, justify="left" if col == "op" else "right", no_wrap=True, **op)
        for row in rows:
            table.add_row(*(Text(one_line(row[i])) for i in keep))
        out += [Text("Operators (steady steps; share: of the GPU work; roofline: the op's time at peak FLOP/s or "
                     "bandwidth, % of its GPU time)", style="dim"), table]
    return out


def top_kernel_parts(report: Report, count: int = 5) -> list:
    """The kernels that take the GPU's time, for a report without findings: where a busy GPU spends it."""
    rows = sorted(report.metrics.get("top_kernels") or [], key=lambda r: -(r.get("total_ms") or 0))[:count]
    if not rows:
        return []
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    aligned: tuple[tuple[str, Any], ...] = (("rank", "right"), ("kernel", "left"), ("launches", "right"),
                                            ("time", "right"), ("share", "right"))
    for col, justify in aligned:
        table.add_column(col, justify=justify, **({"overflow": "fold"} if col == "kernel" else {"no_wrap": True}))
    labels = kernel_labels((str(r["name"]) for r in rows), KERNEL_CHARS)  # no two kernels alike
    declared = METRICS["top_kernels"]
    for r in rows:
        table.add_row(str(r["rank"]), Text(one_line(labels[str(r["name"])])),
                      *(fmt_measure(float(r[c] or 0), declared.measure(c)) for c in ("launch_count", "total_ms",
                                                                                   "share_pct")))
    return [Text("Top kernels", style="bold"), Text("share: of the kernels' time", style="dim"), table]


def attribution_parts(report: Report) -> list:
    """'Where the time went': each GPU's causes (the attribution the savings are drawn from), largest first."""
    devices = attribution_by_device(report.attribution)
    if not devices:
        return []
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for (rank, device), shares in devices.items():
        cells = Text()
        for i, share in enumerate(shares):
            if i:
                cells.append(" · ")
            cells.append(f"{share.label} {fmt_pct(share.pct)}")
            if share.telling_detail:
                cells.append(f" ({one_line(share.telling_detail)})", style="dim")
        table.add_row(f"rank {rank}, GPU {device}", cells)
    return [Text("Where the time went", style="bold"),
            Text("each GPU's window attributed once; the savings above are drawn from it", style="dim"), table]
