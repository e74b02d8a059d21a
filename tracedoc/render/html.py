"""A self-contained HTML report for sharing: the report's pages (tracedoc.pages) in one file that opens offline.

The charts are the pages' Bokeh figures, embedded with Bokeh's JavaScript inline, so the file needs no network;
the text is the pages' escaped fragments (tracedoc/pages/fragments.py). The pages draw a copy of the report whose
strings show their control and bidirectional characters as visible escapes (words.sanitize.visible_strings), so
no raw escape, NUL or override from a trace reaches the file, in the text or in the charts' data. Bokeh is optional
(``dashboard`` extra): the pages are imported only when a report is rendered.
"""

from __future__ import annotations

from tracedoc.pages import require
from tracedoc.render.base import Renderer
from tracedoc.report import Report
from tracedoc.words.sanitize import visible_strings


class HtmlRenderer(Renderer):
    """One HTML file: the dashboard's pages but the timeline (it needs the store), Bokeh's JavaScript inline."""

    name = "html"

    def render(self, report: Report) -> str:
        require("--format html", ("bokeh",))  # before importing the pages, whose Bokeh is an optional extra
        from bokeh.embed import components
        from bokeh.resources import Resources

        from tracedoc.pages.fragments import STYLE, Html, esc, section_head_html
        from tracedoc.pages.report import report_sections

        pages = report_sections(visible_report(report))
        models = [item for _, sections in pages for s in sections for item in s.items if not isinstance(item, Html)]
        script, divs = components(models) if models else ("", ())
        div_of = {id(m): d for m, d in zip(models, divs)}
        body = []
        for page, sections in pages:
            body.append(f'<section id="{esc(page.ROUTE)}"><h2>{esc(page.TITLE)}</h2>')
            for s in sections:
                body.append(section_head_html(s.title, s.note, s.empty).markup)
                body += [item.markup if isinstance(item, Html) else div_of[id(item)] for item in s.items]
            body.append("</section>")
        nav = "".join(f'<a href="#{esc(page.ROUTE)}">{esc(page.TITLE)}</a>' for page, _ in pages)
        # Bokeh's own code only, inline: js_files would add URLs that other imported libraries (Panel) register
        bokeh_js = "".join(f"<script>{code}</script>" for code in Resources(mode="inline", components=["bokeh"]).js_raw)
        return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>tracedoc report</title><style>{STYLE}</style>{bokeh_js}</head><body>"
                f"<h1>tracedoc report</h1><nav>{nav}</nav>{''.join(body)}{script}</body></html>\n")


def visible_report(report: Report) -> Report:
    """A copy of ``report`` whose strings show their control and bidirectional characters visibly."""
    copy = Report.from_dict(visible_strings(report.to_dict()))
    for made, finding in zip(copy.findings, report.findings, strict=True):  # what the rules made of them
        made.kind, made.across_ranks = finding.kind, finding.across_ranks
    return copy
