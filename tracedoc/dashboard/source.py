"""What `tracedoc serve` shows, and loading it in the background so pages can show progress meanwhile.

A target is traces (files or directories, as for `tracedoc analyze`: ingested into the cache, then analysed), a
cached store (``*.duckdb``: analysed), or a saved JSON report (shown as it is; it holds no timeline). Problems
the user can fix before the server starts (a missing path, an unknown format, a file that is no store) are
raised here as InputError; failures while loading become ``Loading.error``, one line shown in the page.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from tracedoc.api import build_report, kept_report, load_report, open_store
from tracedoc.dashboard.target import Target
from tracedoc.errors import first_line
from tracedoc.options import AnalysisOptions
from tracedoc.pages.timeline import Timeline, warm_up
from tracedoc.pipeline import prepare_store
from tracedoc.report import Report
from tracedoc.report_cache import keep_report
from tracedoc.store import Store
from tracedoc.store.cache import discard_damaged, is_damage
from tracedoc.words.sanitize import one_line

READY_LINE = "the pages are ready"
# How long what only the timeline page needs (its bins, datashader's warm-up) waits for the first page to be shown
# before it is made anyway (Loading.finished).
WARM_UP_AFTER_S = 10.0


class BackgroundLoad:
    """Work done on a background thread while the pages show its progress: ``status`` says what is being done,
    ``error`` what went wrong (one line), ``done`` when it is over, ``shown`` once a page drawn from it has been
    shown (tracedoc.dashboard.app.with_progress). Subclasses do the work in ``load``."""

    def __init__(self) -> None:
        self.status = "starting"
        self.error: str | None = None
        self.done = threading.Event()
        self.shown = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="tracedoc-load", daemon=True).start()

    def load(self) -> None:
        raise NotImplementedError

    def _progress(self, message: str) -> None:
        self.status = message

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self.load()
        except Exception as exc:  # shown in the page as one line; the server keeps running
            if os.environ.get("TRACEDOC_DEBUG"):
                traceback.print_exc()
            self.error = first_line(exc)
        finally:
            self.done.set()
        # The terminal that started the server says when the pages can be drawn (READY_LINE), or why not.
        said = (f"could not load the input: {self.error}" if self.error is not None
                else f"{READY_LINE} (loaded in {time.perf_counter() - started:.1f} s)")
        print(one_line(f"tracedoc serve: {said}"), file=sys.stderr, flush=True)
        self.finished()

    def finished(self) -> None:
        """What to do once the pages can be drawn, on the loading thread (nothing by default)."""


class Loading(BackgroundLoad):
    """The report and store of a target, loaded on a background thread and judged by ``options`` (None: the
    defaults). The store stays open for the timeline; ``lock`` serialises the queries on its connection."""

    def __init__(self, target: Target, cache_dir: Path, options: AnalysisOptions | None = None) -> None:
        super().__init__()
        self.target, self.cache_dir = target, cache_dir
        self.options = AnalysisOptions() if options is None else options
        self.report: Report | None = target.report
        self.store: Store | None = None
        self.timeline: Timeline | None = None
        self.lock = threading.Lock()

    def load(self) -> None:
        if self.report is None:
            if self.target.store_path is not None:
                store = self.store = Store.open(self.target.store_path, self.options.limits)
                self.report = build_report(store, self.options, self._progress)
                self.status = "preparing the timeline"
                self.timeline = Timeline(store, self.lock)
            else:
                self._load_traces()

    def _load_traces(self) -> None:
        """The store of the target's traces, its report and timeline. The report kept beside the store by an earlier
        run given the same inputs and options (tracedoc.report_cache) is read back, the store only opened for the
        timeline; else, or when the store is found damaged while the timeline reads it, the store is analysed
        (a cached store found damaged then is rebuilt, as load_report does) and its report kept."""
        inputs, options = self.target.inputs, self.options
        kept, report = kept_report(inputs, self.cache_dir, options)
        if report is not None:
            store, _ = open_store(inputs, self.cache_dir, self._progress, options.limits)
            try:
                self.status = "preparing the timeline"
                prepare_store(store, options)
                self.timeline = Timeline(store, self.lock)
            except Exception as exc:
                store.close()
                if store.path is None or not is_damage(exc, store.path):
                    raise
                discard_damaged(store.path, exc)
            else:
                self.store, self.report = store, report
                return
        self.store, self.report = load_report(inputs, self.cache_dir, options, self._progress)
        keep_report(*kept, self.report)
        self.status = "preparing the timeline"
        self.timeline = Timeline(self.store, self.lock)

    def finished(self) -> None:
        """What only the timeline page needs, made once the first page is shown (or after WARM_UP_AFTER_S without
        one), so that it does not slow the first page down: the timeline's bins (Timeline.make_bins) and datashader
        compiled (about 0.7 s of CPU). A failure to make the bins shows where the timeline page asks for them."""
        self.shown.wait(WARM_UP_AFTER_S)
        if self.timeline is not None:
            with contextlib.suppress(Exception):
                self.timeline.make_bins()
        warm_up()
