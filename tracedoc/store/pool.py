"""Analysis modules run several at a time, each on a cursor of the store's connection.

On a small store the analyses are mostly DuckDB binding and planning, which DuckDB does on the calling thread
with Python's GIL let go: modules that do not depend on one another (their ``-- include:`` and ``-- uses:``
headers, ``modules.dependencies``) run at once, each as soon as the modules it reads are made. A cursor is a
connection of its own to the same database: the modules' objects are made where every cursor sees them, in the
connection's own in-memory catalog rather than as TEMP objects (``Store.parallel``), never in the store. A larger
store's modules run at once too where the cores hold several of its statements, which then share DuckDB's threads
(``Store.fit_threads``).

What the modules make does not depend on the order they ran in (each statement's inputs are complete when it runs),
so the report is the same as from one connection.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable, Sequence

from tracedoc.store.engine import duckdb

RunModule = Callable[[duckdb.DuckDBPyConnection, str], None]


class ModulePool:
    """Runs modules on ``cursors``, a thread and a module per cursor at a time, each module after its
    ``dependencies``: ``run`` runs one module's own statements; ``done`` holds the modules run already (on any
    connection), and gets each module run here once it succeeded."""

    def __init__(self, cursors: Sequence[duckdb.DuckDBPyConnection], run: RunModule,
                 dependencies: Callable[[str], Iterable[str]], done: set[str]) -> None:
        self._run = run
        self._dependencies = dependencies
        self._done = done
        self._changed = threading.Condition()
        self._deps: dict[str, tuple[str, ...]] = {}  # every module asked for, with its dependencies
        self._order: dict[str, int] = {}  # each after its dependencies
        self._dependents: dict[str, list[str]] = {}
        self._waiting: set[str] = set()  # asked for, its dependencies not all run
        self._ready: list[tuple[int, str]] = []  # to run, by the order they were asked for
        self._failed: dict[str, BaseException] = {}
        self._closed = False
        self._cursors = cursors
        self._threads = [threading.Thread(target=self._work, args=(cursor,), daemon=True,
                                          name=f"tracedoc-modules-{n}") for n, cursor in enumerate(cursors)]
        for thread in self._threads:
            thread.start()

    def start(self, modules: Iterable[str]) -> None:
        """Start running ``modules`` (and what they depend on), in this order where they are ready alike."""
        with self._changed:
            for module in modules:
                self._ask(module)

    def wait(self, module: str) -> None:
        """Run ``module`` unless started already, and wait until it is made (raising its error, or the first of
        its dependencies' in their declared order)."""
        with self._changed:
            self._ask(module)
            while module not in self._done and module not in self._failed:
                if self._closed:
                    raise RuntimeError(f"analysis module {module}: its pool is closed")
                self._changed.wait()
            if module in self._failed:
                raise self._failed[module]

    def wait_any(self, modules: Sequence[str]) -> str:
        """Run ``modules`` unless started already, and wait until one of them is made or has failed; return the
        first of them, in the order given, that has (``wait`` on it then returns, or raises its error)."""
        with self._changed:
            for module in modules:
                self._ask(module)
            while True:
                for module in modules:
                    if module in self._done or module in self._failed:
                        return module
                if self._closed:
                    raise RuntimeError(f"analysis modules {', '.join(modules)}: their pool is closed")
                self._changed.wait()

    def close(self, interrupt: bool = False) -> None:
        """Start no more modules, and wait for those running (a connection must not close under them); with
        ``interrupt`` (the analysis failed or was stopped, Ctrl-C say: nothing will read what they make), their
        statements are stopped first rather than waited for, which on a large store may take minutes."""
        self._let_go()
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        for thread in self._threads:
            while interrupt and thread.is_alive():  # again until it ends: a statement may start just after one
                for cursor in self._cursors:
                    cursor.interrupt()
                thread.join(0.05)
            thread.join()

    def _let_go(self) -> None:
        """Release the lock where an interrupt left it held by this thread: a KeyboardInterrupt may land between
        taking it and entering its ``with`` block, and the workers would then wait for it for ever (close is never
        called from inside one)."""
        while self._changed._is_owned():  # type: ignore[attr-defined]
            self._changed.release()

    def _ask(self, module: str) -> None:
        """Ask for ``module`` and its dependencies (the lock held)."""
        if module in self._deps or module in self._done:
            return
        try:
            deps = tuple(dep for dep in dict.fromkeys(self._dependencies(module)) if dep not in self._done)
            for dep in deps:
                self._ask(dep)
        except BaseException as exc:  # known as failed, so that no waiter on it waits for ever
            self._deps[module] = ()
            self._fail(module, exc)
            self._changed.notify_all()
            raise
        self._deps[module] = deps
        for dep in deps:
            self._dependents.setdefault(dep, []).append(module)
        self._order[module] = len(self._order)
        self._waiting.add(module)
        self._settle(module)

    def _settle(self, module: str) -> None:
        """Move a waiting ``module`` on once its dependencies are run: to the ready ones, or failed with theirs."""
        deps = self._deps[module]
        if any(dep not in self._done and dep not in self._failed for dep in deps):
            return
        self._waiting.discard(module)
        failed = next((self._failed[dep] for dep in deps if dep in self._failed), None)
        if failed is not None:
            self._fail(module, failed)
        else:
            heapq.heappush(self._ready, (self._order[module], module))
        self._changed.notify_all()

    def _fail(self, module: str, error: BaseException) -> None:
        """Record ``module``'s error and move on the modules that wait for it."""
        self._failed[module] = error
        for dependent in self._dependents.get(module, ()):
            if dependent in self._waiting:
                self._settle(dependent)

    def _work(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """A thread's loop: run the ready module asked for first on ``cursor``, until the pool closes."""
        while True:
            with self._changed:
                while not self._ready and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                _, module = heapq.heappop(self._ready)
            try:
                self._run(cursor, module)
            except BaseException as exc:  # raised where the module is waited for
                with self._changed:
                    self._fail(module, exc)
                    self._changed.notify_all()
                continue
            with self._changed:
                self._done.add(module)
                for dependent in self._dependents.get(module, ()):
                    if dependent in self._waiting:
                        self._settle(dependent)
                self._changed.notify_all()
