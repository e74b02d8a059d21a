"""Sections as Panel objects: Bokeh figures in Bokeh panes, escaped HTML fragments in HTML panes."""

from __future__ import annotations

from collections.abc import Sequence

import panel as pn

from tracedoc.pages.charts import Section
from tracedoc.pages.fragments import STYLE, Html, section_head_html


def html_pane(fragment: Html) -> pn.pane.HTML:
    """An escaped fragment (never raw trace text) with the report's style."""
    return pn.pane.HTML(fragment.markup, stylesheets=[STYLE], sizing_mode="stretch_width")


def sections_view(sections: Sequence[Section]) -> pn.Column:
    """A page's sections one under the other."""
    parts: list[pn.viewable.Viewable] = []
    for s in sections:
        parts.append(html_pane(section_head_html(s.title, s.note, s.empty)))
        parts += [html_pane(item) if isinstance(item, Html) else pn.pane.Bokeh(item, sizing_mode="stretch_width")
                  for item in s.items]
    return pn.Column(*parts, sizing_mode="stretch_width")
