"""The pages of a report: one module per page (overview, kernels, ranks, overlap, ncu, hang, timeline), each drawing
what the Report (and, for the timeline, the store) holds as Sections of Bokeh charts and escaped HTML fragments.
The HTML report (tracedoc.render.html) and the dashboard (tracedoc.dashboard, `tracedoc serve`) show the same
pages. Bokeh, HoloViews, Panel and datashader come with the optional ``dashboard`` extra: this module imports
none of them, so the core analyser runs without them; ``require`` says which is missing in one line.
"""

from __future__ import annotations

import importlib

from tracedoc.errors import TracedocError

INSTALL_HINT = "pip install 'tracedoc[dashboard]'"
DASHBOARD_MODULES = ("panel", "holoviews", "bokeh", "datashader")


def require(what: str, modules: tuple[str, ...] = DASHBOARD_MODULES) -> None:
    """Raise a one-line TracedocError naming the extra when one of ``modules`` cannot be imported."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise TracedocError(f"{what} needs {name} (the dashboard extra): {INSTALL_HINT}") from None
