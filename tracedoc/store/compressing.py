"""A store in memory's rows compressed on a helper thread while its reader goes on.

DuckDB keeps a store in memory uncompressed until a checkpoint, so the readers that write a large input in batches
(the Chrome-trace reader, the allocator-snapshot reader) compress the store between them. A checkpoint runs on one
thread; here it runs on a helper thread and a cursor of its own while the reader parses or unpickles the next
batch (the connection may meanwhile read into TEMP tables, not write the store's), and the reader waits for it
before it writes again.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb


class Compressing:
    """One reader's compressions of a store, one checkpoint at a time: the reader ``start``s one once it has
    written rows, ``wait``s for it before it writes more, and ``close``s it when the load ends, which waits for one
    still running (DuckDB does not stop a checkpoint midway) through Ctrl-C, its error dropped (a failed or
    interrupted load, whose store is discarded). Nothing is done without a connection (a store file, whose rows are
    written compressed)."""

    def __init__(self, con: duckdb.DuckDBPyConnection | None) -> None:
        self._con = con
        self._running: _Checkpoint | None = None

    def start(self) -> None:
        """Compress the rows written so far, once the compression before is done."""
        self.wait()
        if self._con is not None:
            self._running = _Checkpoint(self._con)  # recorded before its thread starts: close() waits for it
            self._running.begin()

    def wait(self) -> None:
        """Wait until the rows are compressed, raising the checkpoint's error."""
        running = self._running
        if running is not None:
            try:
                running.wait()
            finally:
                if running.done:
                    self._running = None

    def close(self) -> None:
        """Wait for a checkpoint still running, through Ctrl-C, its error dropped."""
        running, self._running = self._running, None
        if running is not None:
            running.wait_through_interrupts()


class _Checkpoint:
    """One ``CHECKPOINT`` of the connection's current database on a helper thread and a cursor of its own.

    Not a daemon thread, and waited for through an event, not ``join``: a process must not end while DuckDB works on
    another of its threads, and a ``join`` that Ctrl-C interrupts marks the thread ended while it runs (Python
    3.11). Where no thread can start, the checkpoint runs on the caller's."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        database = con.execute("SELECT current_database()").fetchall()[0][0]
        self._sql = 'CHECKPOINT "' + str(database).replace('"', '""') + '"'
        self._cursor = con.cursor()
        self._error: Exception | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._checkpoint, name="tracedoc-compress")

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def begin(self) -> None:
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had (a limit on processes)
            self._checkpoint()

    def _checkpoint(self) -> None:
        try:
            self._cursor.execute(self._sql)
        except Exception as exc:  # raised where it is waited for
            self._error = exc
        finally:
            self._cursor.close()
            self._done.set()

    def wait(self) -> None:
        """Wait until the checkpoint is done, raising its error."""
        self._done.wait()
        if self._error is not None:
            raise self._error

    def wait_through_interrupts(self) -> None:
        """Wait until the checkpoint is done, Ctrl-C or not; one whose thread never started (Ctrl-C as it was
        started) is not waited for."""
        while not self._done.is_set():
            try:
                if self._thread.ident is None:
                    return
                self._done.wait(0.05)
            except KeyboardInterrupt:
                continue
