"""The pages of a report: one module per page, each drawing what the Report (and, for the timeline, the store) holds as
Sections of Bokeh charts and escaped HTML fragments. ``PAGES`` is their one ordered list: the HTML report
(tracedoc.render.html, every page but those that need the store) and the dashboard (tracedoc.dashboard, `tracedoc
serve`, every page) both read it, so adding a page is one entry here. Bokeh, HoloViews, Panel and datashader come
with the optional ``dashboard`` extra: this module imports none of them, so the core analyser runs without them;
``require`` says which is missing in one line.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from types import ModuleType

from tracedoc.errors import TracedocError

INSTALL_HINT = "pip install 'tracedoc[dashboard]'"
DASHBOARD_MODULES = ("panel", "holoviews", "bokeh", "datashader")


def require(what: str, modules: tuple[str, ...] = DASHBOARD_MODULES) -> None:
    """Raise a one-line TracedocError naming the extra when one of ``modules`` is not installed; found, not
    imported (Panel, Bokeh and datashader take seconds to import: a command checks first, then reads its
    inputs, and imports them only when it draws)."""
    for name in modules:
        try:
            found = sys.modules[name] is not None if name in sys.modules else \
                importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise TracedocError(f"{what} needs {name} (the dashboard extra): {INSTALL_HINT}")


@dataclass(frozen=True)
class Page:
    """One page: its module under tracedoc.pages (``TITLE``, ``ROUTE``, ``sections``) and whether it draws from the
    store, which only the dashboard holds (the HTML report leaves such a page out)."""

    module: str
    needs_store: bool = False


PAGES: tuple[Page, ...] = (Page("overview"), Page("timeline", needs_store=True), Page("kernels"), Page("efficiency"),
                           Page("ranks"), Page("overlap"), Page("ncu"), Page("hang"), Page("memory"))


def page_modules(*, store: bool = True) -> tuple[ModuleType, ...]:
    """The page modules in order (``store``: with those that need the store), imported now: they need Bokeh."""
    return tuple(importlib.import_module(f"{__name__}.{p.module}") for p in PAGES if store or not p.needs_store)
