"""The sections each page of the report draws for a report, the pages in the order of tracedoc.pages.PAGES, those
that need the store left out: what the HTML report embeds."""

from __future__ import annotations

from types import ModuleType

from tracedoc.pages import overview, page_modules
from tracedoc.pages.charts import Section
from tracedoc.report import Report


def report_sections(report: Report) -> list[tuple[ModuleType, list[Section]]]:
    """Each page with its sections; pages without data for the report are left out (the overview never is)."""
    pages = [(page, page.sections(report)) for page in page_modules(store=False)]
    return [(page, sections) for page, sections in pages if page is overview or any(not s.empty for s in sections)]
