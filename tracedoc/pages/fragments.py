"""The escaped HTML fragments every page is made of (finding cards, tables, the headline, messages) and the style
they share, for the HTML report and the dashboard alike. Every string from a trace (kernel and annotation names,
paths, messages quoting them) is escaped here, once; nothing here needs Bokeh or Panel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from tracedoc.causes import CAUSES, color
from tracedoc.measures import Measure
from tracedoc.pages.kinds import has_saving, impact_text
from tracedoc.pages.waits import headline_note
from tracedoc.units import cell_format, fmt_pct
from tracedoc.words.attribution import CauseShare, attribution_by_device, cause_label, part_of_text, window_text
from tracedoc.words.findings import evidence_rows as evidence_text_rows
from tracedoc.words.findings import (
    finding_saving_text,
    missing_ranks_lines,
    scope_text,
    summary_text,
    what_if_text,
)
from tracedoc.words.sanitize import one_line, visible_text

if TYPE_CHECKING:
    from tracedoc.report import Finding, Report

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2330; margin: 0 auto;
       max-width: 1200px; padding: 0 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: 1.2rem 0 0.2rem; }
h2 { font-size: 1.25rem; margin: 1.6rem 0 0.3rem; border-bottom: 1px solid #d8dce3; padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; margin: 1.1rem 0 0.3rem; }
p.note, p.headline { color: #4a5262; margin: 0.2rem 0 0.6rem; }
p.empty { color: #4a5262; font-style: italic; background: #f4f5f7; padding: 0.6rem 0.8rem; border-radius: 4px; }
p.error { color: #8a1c1c; background: #fbeaea; padding: 0.6rem 0.8rem; border-radius: 4px; }
nav a { margin-right: 1rem; color: #2456a6; text-decoration: none; }
nav span.off { margin-right: 1rem; color: #a3a9b4; cursor: not-allowed; }
table.td { border-collapse: collapse; font-size: 0.85rem; margin: 0.4rem 0 0.8rem; }
table.td th, table.td td { border-bottom: 1px solid #e3e6eb; padding: 0.25rem 0.6rem; text-align: left;
                           vertical-align: top; }
table.td td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.td td.name { overflow-wrap: break-word; max-width: 40rem; }
table.td td[title], table.td th[title] { cursor: help; text-decoration: underline dotted #9aa1ad; }
table.td tr.hl td { background: #fdecea; font-weight: 600; }
article.finding { border: 1px solid #d8dce3; border-left: 6px solid #888; border-radius: 4px;
                  padding: 0.4rem 1rem 0.6rem; margin: 0.8rem 0; }
article.critical { border-left-color: #c0392b; } article.warning { border-left-color: #e67e22; }
article.info { border-left-color: #2e86c1; }
article.finding h3 { margin-top: 0.4rem; }
span.sev { font-size: 0.75rem; text-transform: uppercase; font-weight: 700; padding: 0.1rem 0.4rem;
           border-radius: 3px; color: white; margin-right: 0.4rem; }
span.critical { background: #c0392b; } span.warning { background: #e67e22; } span.info { background: #2e86c1; }
code { background: #f4f5f7; padding: 0 0.25rem; border-radius: 3px; }
a.open { color: #2456a6; font-weight: 600; text-decoration: none; white-space: nowrap; }
a.open::after { content: " →"; }
p.whatif { font-style: italic; color: #1d4f91; background: #eef3fb; padding: 0.3rem 0.6rem; border-radius: 4px; }
span.cause { display: inline-block; margin: 0.05rem 1rem 0.05rem 0; white-space: nowrap; }
span.swatch { display: inline-block; width: 0.75em; height: 0.75em; margin-right: 0.3em; border-radius: 2px; }
span.detail { color: #4a5262; font-size: 0.8rem; }
"""

SEVERITY_COLORS = {"critical": "#c0392b", "warning": "#e67e22", "info": "#2e86c1"}
# One colour per attribution cause, in the order they are stacked, the same on every chart (tracedoc.causes)
CAUSE_COLORS = {c.id: c.color for c in CAUSES}
DETAIL_CHARS = 48


def esc(value: object) -> str:
    """Text from anywhere (traces included) as literal HTML text, its control and bidirectional characters written
    visibly (words.sanitize.visible_text) rather than passed on raw."""
    return escape(visible_text(value), quote=True)


@dataclass(frozen=True)
class Html:
    """An HTML fragment whose untrusted strings are already escaped (only this module builds them)."""

    markup: str


@dataclass(frozen=True)
class Column:
    """A table column: the row key, its header and how its value is written."""

    key: str
    header: str
    fmt: Callable[[Any], str] = str
    numeric: bool = False
    wide: bool = False  # long names: wrapped between words, and inside a word only when it alone is too long
    abbreviate: Callable[[str], str] | None = None  # a shorter text to show; the full one is on hover
    help: str = ""  # what the column means, on hover over its header
    measure: Measure | None = None  # a column of numbers: what they measure, as the report declares it


def measured(key: str, header: str, measure: Measure, digits: int | None = None, *,
             shown: Callable[[Any, str], str] | None = None, help: str = "") -> Column:  # noqa: A002
    """A column of numbers, written in the unit of their declared ``measure`` (tracedoc.units.cell_format: the
    unit's scale and decimals, or ``digits``), which its ``header`` names; ``shown`` may replace a written value
    (value, text → text shown)."""
    cell = cell_format(measure, digits)
    fmt = cell if shown is None else (lambda value: shown(value, cell(value)))
    return Column(key, header, fmt, numeric=True, help=help, measure=measure)


def table_html(rows: Sequence[dict[str, Any]], columns: Sequence[Column],
               highlight: Callable[[dict[str, Any]], bool] | None = None) -> Html:
    """An escaped HTML table (a flag written yes or no); rows for which ``highlight`` is true are marked (class
    ``hl``)."""
    head = "".join(f'<th title="{esc(c.help)}">{esc(c.header)}</th>' if c.help else f"<th>{esc(c.header)}</th>"
                   for c in columns)
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c.key)
            cls = "num" if c.numeric else "name" if c.wide else ""
            text = "" if value is None else ("yes" if value else "no") if isinstance(value, bool) else c.fmt(value)
            shown = c.abbreviate(text) if c.abbreviate else text
            full = f' title="{esc(text)}"' if shown != text else ""
            cells.append(f'<td class="{cls}"{full}>{esc(shown)}</td>' if cls else f"<td{full}>{esc(shown)}</td>")
        mark = ' class="hl"' if highlight is not None and highlight(row) else ""
        body.append(f"<tr{mark}>{''.join(cells)}</tr>")
    return Html(f'<table class="td"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')


def cause_color(cause: str) -> str:
    """The fixed colour of an attribution cause (grey for 'other' and unknown causes)."""
    return color(cause)


def saving_html(finding: Finding, wall_ms: float) -> str:
    """The escaped saving of a card: 'part of #N' for a finding whose time a bigger one already counts (with what
    is left, when anything is); for a hang or an informational health finding, what its time is instead
    (tracedoc.pages.kinds)."""
    if not has_saving(finding):
        return f"<b>{esc(impact_text(finding, wall_ms))}</b>"
    return f"estimated saving <b>{esc(finding_saving_text(finding, wall_ms))}</b>"


def evidence_rows(finding: Finding) -> list[dict[str, str]]:
    """A finding's evidence as table rows (render.base.evidence_rows: a time and its share on one row)."""
    return [{"name": name, "value": value} for name, value in evidence_text_rows(finding.evidence)]


def finding_html(number_: int, finding: Finding, wall_ms: float, projection: dict[str, Any] | None = None,
                 link: str | None = None) -> str:
    """One finding as an escaped card: title, where, saving, message, evidence, fix, the what-if projection
    (``projection``, when the report has one), references, and a link to where it lies on the timeline
    (``link``, in the dashboard)."""
    shared = f'<p class="note">{esc(part_of_text(finding.part_of))}</p>' if finding.part_of else ""
    after = f'<p class="whatif">{esc(what_if_text(projection))}</p>' if projection else ""
    evidence = table_html(evidence_rows(finding), [Column("name", "evidence"),
                                                   Column("value", "value", numeric=True)]).markup
    refs = "".join(f'<li><a href="{esc(r)}" rel="noopener noreferrer">{esc(r)}</a></li>'
                   for r in finding.references if r.startswith(("https://", "http://")))
    return (f'<article class="finding {esc(finding.severity)}">'
            f"<h3>{number_}. {esc(finding.title)}</h3>"
            f'<p class="note"><span class="sev {esc(finding.severity)}">{esc(finding.severity)}</span>'
            f"<code>{esc(finding.rule)}</code> · {esc(scope_text(finding.scope.to_dict()))} · "
            f"{saving_html(finding, wall_ms)}"
            + (f' · <a class="open" href="{esc(link)}">show on the timeline</a>' if link else "") + "</p>"
            f"<p>{esc(finding.message)}</p>{shared}{evidence}<p><b>Fix:</b> {esc(finding.fix)}</p>{after}"
            + (f"<ul>{refs}</ul>" if refs else "") + "</article>")


def findings_html(report: Report, findings: Sequence[Finding] | None = None,
                  link: Callable[[Finding], str | None] | None = None) -> Html:
    """Finding cards, numbered by their rank in the report (so a filtered list keeps the numbers); ``link`` gives a
    finding's place on the timeline (the dashboard's)."""
    wall = float(report.summary.get("wall_ms") or 0.0)
    shown = report.findings if findings is None else findings
    number_of = {id(f): i for i, f in enumerate(report.findings, 1)}
    return Html("".join(finding_html(number_of[id(f)], f, wall, report.what_if_for(number_of[id(f)]),
                                     link(f) if link else None) for f in shown))


def cause_share_html(share: CauseShare) -> str:
    """One cause's share as an escaped chip: its colour, label, % and the detail holding most of it."""
    detail = ""
    if share.telling_detail:
        full = share.telling_detail
        text = full if len(full) <= DETAIL_CHARS else full[:DETAIL_CHARS - 1] + "…"
        detail = f' <span class="detail" title="{esc(full)}">({esc(text)})</span>'
    return (f'<span class="cause"><span class="swatch" style="background:{esc(cause_color(share.cause))}"></span>'
            f"{esc(cause_label(share.cause))} <b>{fmt_pct(share.pct)}</b>{detail}</span>")


def attribution_table_html(rows: Sequence[dict[str, Any]]) -> Html:
    """Per rank and GPU, its causes' shares of the window, largest first, each with its top detail."""
    body = "".join(f"<tr><td>{esc(rank)}</td><td>{esc(device)}</td>"
                   f"<td>{''.join(cause_share_html(s) for s in shares)}</td></tr>"
                   for (rank, device), shares in attribution_by_device(list(rows)).items())
    return Html('<table class="td"><thead><tr><th>rank</th><th>GPU</th><th>share of the window (mostly)</th></tr>'
                f"</thead><tbody>{body}</tbody></table>")


def headline_html(report: Report) -> Html:
    """The report's one-line summary, and a line for each rank a distributed run could not read."""
    window = window_text(report)
    waiting = headline_note(report)
    return Html(f'<p class="headline">{esc(summary_text(report.summary, report.input_count))}</p>'
                + (f'<p class="note">{esc(waiting)}</p>' if waiting else "")
                + (f'<p class="note">{esc(one_line(window))}</p>' if window else "")
                + "".join(message_html(one_line(line), "error").markup
                          for line in missing_ranks_lines(report.summary)))


def message_html(text: str, kind: str = "empty") -> Html:
    """A sentence in a box: 'empty' for pages without data, 'error' for failures."""
    return Html(f'<p class="{esc(kind)}">{esc(text)}</p>')


def section_head_html(title: str, note: str = "", empty: str = "") -> Html:
    """A page section's heading, its note, and the sentence saying its data is missing (when ``empty``)."""
    return Html(f"<h3>{esc(title)}</h3>" + (f'<p class="note">{esc(note)}</p>' if note else "")
                + (message_html(empty).markup if empty else ""))
