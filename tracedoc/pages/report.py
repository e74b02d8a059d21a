"""The report's pages in order (all but the timeline, which needs the store), and the sections each draws for a
report: what the HTML report embeds and the dashboard routes to."""

from __future__ import annotations

from types import ModuleType

from tracedoc.pages import efficiency, hang, kernels, memory, ncu, overlap, overview, ranks
from tracedoc.pages.charts import Section
from tracedoc.report import Report

REPORT_PAGES: tuple[ModuleType, ...] = (overview, kernels, efficiency, ranks, overlap, ncu, hang, memory)


def report_sections(report: Report) -> list[tuple[ModuleType, list[Section]]]:
    """Each page with its sections; pages without data for the report are left out (the overview never is)."""
    pages = [(page, page.sections(report)) for page in REPORT_PAGES]
    return [(page, sections) for page, sections in pages if page is overview or any(not s.empty for s in sections)]
