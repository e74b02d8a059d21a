"""`tracedoc serve --diff BEFORE AFTER`: the diff page (tracedoc/pages/diff.py) served by Panel.

Both sides load on a background thread, as ``tracedoc diff`` reads them (through the cache); the page shows the
progress until the diff is built, and a side that cannot be read as one line in the page.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path

import panel as pn

from tracedoc.dashboard.panes import html_pane, sections_view
from tracedoc.diff.model import Diff, build_diff
from tracedoc.diff.side import load_side
from tracedoc.errors import first_line
from tracedoc.judge import Rule
from tracedoc.pages.diff import diff_sections
from tracedoc.pages.fragments import Html, esc, message_html

POLL_MS = 300


class DiffLoading:
    """The diff of two sides, built on a background thread: ``status`` says what is being done, ``error`` what went
    wrong (one line), ``done`` when it is over."""

    def __init__(self, before: Path, after: Path, cache_dir: Path, rules: Sequence[Rule],
                 thresholds: dict[str, dict[str, float]] | None = None) -> None:
        self.before, self.after, self.cache_dir = before, after, cache_dir
        self.rules, self.thresholds = list(rules), thresholds
        self.status = "starting"
        self.error: str | None = None
        self.diff: Diff | None = None
        self.done = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="tracedoc-diff", daemon=True).start()

    def _run(self) -> None:
        try:
            self.status = f"reading BEFORE ({self.before})"
            before = load_side(self.before, self.rules, self.thresholds, cache_dir=self.cache_dir)
            self.status = f"reading AFTER ({self.after})"
            after = load_side(self.after, self.rules, self.thresholds, cache_dir=self.cache_dir)
            self.status = "comparing"
            self.diff = build_diff(before, after)
        except Exception as exc:  # shown in the page as one line; the server keeps running
            if os.environ.get("TRACEDOC_DEBUG"):
                traceback.print_exc()
            self.error = first_line(exc)
        finally:
            self.done.set()


def body(loading: DiffLoading) -> pn.viewable.Viewable:
    if loading.error is not None or loading.diff is None:
        return html_pane(message_html(f"Could not compare the two runs: {loading.error}", "error"))
    try:
        return sections_view(diff_sections(loading.diff))
    except Exception as exc:  # the page says why it cannot be drawn
        return html_pane(message_html(f"The diff could not be drawn: {first_line(exc)}", "error"))


def diff_app(loading: DiffLoading) -> pn.viewable.Viewable:
    """One browser session's view of the diff, with the loading progress until it is built."""
    content = pn.Column(sizing_mode="stretch_width")
    layout = pn.Column(content, sizing_mode="stretch_width",
                       styles={"max-width": "1400px", "margin": "0 auto", "padding": "0 1rem"})
    if loading.done.is_set():
        content.objects = [body(loading)]
        return layout
    status = html_pane(Html(f'<p class="note">{esc(loading.status)}…</p>'))
    content.objects = [pn.Row(pn.indicators.LoadingSpinner(value=True, size=24), status)]

    def poll() -> None:
        if loading.done.is_set():
            callback.stop()
            content.objects = [body(loading)]
        else:
            status.object = f'<p class="note">{esc(loading.status)}…</p>'

    callback = pn.state.add_periodic_callback(poll, period=POLL_MS)
    return layout


def serve_diff(loading: DiffLoading, host: str, port: int, show: bool) -> None:
    """Start building the diff and serve its page until interrupted."""
    loading.start()
    loopback = host in ("127.0.0.1", "localhost", "::1")
    origins = [f"{h}:{port}" for h in ("127.0.0.1", "localhost", host)] if loopback else ["*"]
    pn.serve({"/": lambda: diff_app(loading)}, address=host, port=port, show=show, title="tracedoc · diff",
             websocket_origin=origins, print=False, verbose=bool(os.environ.get("TRACEDOC_DEBUG")))
