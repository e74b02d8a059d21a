"""A store in memory's rows compressed on a helper thread while its reader goes on.

DuckDB keeps a store in memory uncompressed until a checkpoint, so the readers that write a large input in batches
(the Chrome-trace reader, the allocator-snapshot reader) compress the store between them. A checkpoint runs on one
thread; here it runs on a helper thread and a cursor of its own while the reader parses or unpickles the next
batch (the connection may meanwhile read into TEMP tables, not write the store's), and the reader waits for it
before it writes again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracedoc.store.helper_thread import HelperThread

if TYPE_CHECKING:
    import duckdb


class Compressing:
    """One reader's compressions of a store, one checkpoint at a time: the reader ``start``s one once it has
    written rows, ``wait``s for it before it writes more, and ``close``s it when the load ends, which waits for one
    still running (DuckDB does not stop a checkpoint midway) through Ctrl-C, its error dropped (a failed or
    interrupted load, whose store is discarded). Nothing is done without a connection (a store file, whose rows are
    written compressed). ``catalog``: the store's, which a cursor of its own names (it starts in its default one)."""

    def __init__(self, con: duckdb.DuckDBPyConnection | None, catalog: str) -> None:
        self._con, self._catalog = con, catalog
        self._running: _Checkpoint | None = None

    def start(self) -> None:
        """Compress the rows written so far, once the compression before is done."""
        self.wait()
        if self._con is not None:
            # recorded before its thread starts: close() waits for it
            self._running = _Checkpoint(self._con, self._catalog)
            self._running.thread.begin()

    def wait(self) -> None:
        """Wait until the rows are compressed, raising the checkpoint's error."""
        running = self._running
        if running is not None:
            try:
                running.thread.wait()
            finally:
                if running.done:
                    self._running = None

    def close(self) -> None:
        """Wait for a checkpoint still running, through Ctrl-C, its error dropped."""
        running, self._running = self._running, None
        if running is not None:
            running.thread.wait_through_interrupts()


class _Checkpoint:
    """One ``CHECKPOINT`` of the store's catalog on a cursor of ``con``'s own and a helper thread (``HelperThread``:
    not a daemon, waited for through Ctrl-C)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, catalog: str) -> None:
        self._sql = f"CHECKPOINT {catalog}"
        self._cursor = con.cursor()
        self.thread = HelperThread(self._checkpoint, "tracedoc-compress")

    @property
    def done(self) -> bool:
        return self.thread.done

    def _checkpoint(self) -> None:
        try:
            self._cursor.execute(self._sql)
        finally:
            self._cursor.close()
