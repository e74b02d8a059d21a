"""The dashboard (`tracedoc serve`): the Panel app that serves the report's pages (tracedoc.pages) and the timeline,
one route each, loading the data in the background. Panel comes with the optional ``dashboard`` extra.
"""

from tracedoc.pages import INSTALL_HINT, require

__all__ = ["INSTALL_HINT", "require"]
