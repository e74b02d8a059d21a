"""The dashboard (`tracedoc serve`) and the charts of the HTML report: one module per page, each drawing what the
Report (and, for the timeline, the store) already holds. Panel, HoloViews, Bokeh and datashader come with the
optional ``dashboard`` extra; nothing here imports them, so the core analyser runs without them.
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
