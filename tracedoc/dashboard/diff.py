"""`tracedoc serve --diff BEFORE AFTER`: the diff page (tracedoc/pages/diff.py) served by Panel.

Both sides load on a background thread, as ``tracedoc diff`` reads them (through the cache); the page shows the
progress until the diff is built, and a side that cannot be read as one line in the page.
"""

from __future__ import annotations

from pathlib import Path

import panel as pn

from tracedoc.dashboard.app import serve_routes, with_progress
from tracedoc.dashboard.panes import html_pane, sections_view
from tracedoc.dashboard.source import BackgroundLoad
from tracedoc.diff.model import Diff, build_diff
from tracedoc.diff.side import load_side
from tracedoc.options import AnalysisOptions
from tracedoc.pages.diff import diff_sections
from tracedoc.pages.fragments import message_html


class DiffLoading(BackgroundLoad):
    """The diff of two sides, each judged by ``options`` (None: the defaults), built on a background thread."""

    def __init__(self, before: Path, after: Path, cache_dir: Path, options: AnalysisOptions | None = None) -> None:
        super().__init__()
        self.before, self.after, self.cache_dir = before, after, cache_dir
        self.options = AnalysisOptions() if options is None else options
        self.diff: Diff | None = None

    def load(self) -> None:
        self.status = f"reading BEFORE ({self.before})"
        before = load_side(self.before, self.options, cache_dir=self.cache_dir)
        self.status = f"reading AFTER ({self.after})"
        after = load_side(self.after, self.options, cache_dir=self.cache_dir)
        self.status = "comparing"
        self.diff = build_diff(before, after)


def body(loading: DiffLoading) -> pn.viewable.Viewable:
    """The diff page once built, or the one line saying why there is none."""
    if loading.error is not None or loading.diff is None:
        return html_pane(message_html(f"Could not compare the two runs: {loading.error}", "error"))
    return sections_view(diff_sections(loading.diff))


def serve_diff(loading: DiffLoading, host: str, port: int, show: bool) -> None:
    """Start building the diff and serve its page until interrupted."""
    def page() -> pn.viewable.Viewable:
        return with_progress(loading, lambda: body(loading), failure="The diff could not be drawn")

    serve_routes(loading, {"/": page}, {"/": "tracedoc · diff"}, host, port, show)
