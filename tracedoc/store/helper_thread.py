"""Work run on a helper thread that the process waits for: DuckDB work beside the caller's (the store made ahead,
a store's rows compressed while its reader goes on).

A process must not end while DuckDB works on another of its threads (it aborts: "terminate called after throwing an
instance of ''"), so the thread is not a daemon. It is waited for through an event, not ``join``: a ``join`` that
Ctrl-C interrupts marks the thread ended while it runs (Python 3.11), and the interpreter's exit would then not wait
for it either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class HelperThread:
    """``work`` run once on a helper thread named ``name``, from ``begin`` (where no thread can start, on the
    caller's); its error, an Exception, kept for ``wait``."""

    def __init__(self, work: Callable[[], None], name: str) -> None:
        self._work = work
        self._error: Exception | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def begin(self) -> None:
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had (a limit on processes)
            self._run()

    def _run(self) -> None:
        try:
            self._work()
        except Exception as exc:  # raised where it is waited for
            self._error = exc
        finally:
            self._done.set()

    def wait(self) -> None:
        """Wait until the work is done, raising its error (Ctrl-C interrupts the wait, not the work)."""
        self._done.wait()
        if self._error is not None:
            raise self._error

    def wait_through_interrupts(self) -> None:
        """Wait until the work is done, Ctrl-C or not, its error dropped; work whose thread never started (Ctrl-C
        as it was started) is not waited for."""
        while not self._done.is_set():
            try:
                if self._thread.ident is None:
                    return
                self._done.wait(0.05)
            except KeyboardInterrupt:
                continue
