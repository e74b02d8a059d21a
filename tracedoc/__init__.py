"""tracedoc: a doctor for GPU profiling traces.

The public names load on first use, so that importing a submodule (the command line, the store) does not pay
for the whole analyser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tracedoc.version import __version__

if TYPE_CHECKING:
    from tracedoc.api import analyze
    from tracedoc.explore import open_store
    from tracedoc.report import Evidence, Finding, Report, Scope

_PUBLIC = {"analyze": "tracedoc.api", "Evidence": "tracedoc.report", "Finding": "tracedoc.report",
           "Report": "tracedoc.report", "Scope": "tracedoc.report", "open_store": "tracedoc.explore"}

__all__ = ["Evidence", "Finding", "Report", "Scope", "__version__", "analyze", "open_store"]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module when first asked for."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'tracedoc' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    from tracedoc import notebook  # noqa: F401  (installs the report's notebook view: a notebook uses these names)
    globals()[name] = value
    return value
