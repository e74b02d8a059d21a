"""Store: a DuckDB database holding the normalized tables of schema.sql.

The database file is written once by ingestion and then opened read-only; analyses add TEMP views and macros
on top (or, run several at a time, objects in the connection's own in-memory catalog: ``Store.parallel``), so a
cached store is never modified by analysing it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracedoc.limits import Limits
from tracedoc.store.helper_thread import HelperThread
from tracedoc.store.memory import spill_directory, threads_under_cap

if TYPE_CHECKING:
    import duckdb  # imported on connecting: a run that opens no store (a report read back from the cache) needs none

    from tracedoc.store.compressing import Compressing
    from tracedoc.store.pool import ModulePool

SCHEMA_VERSION = 1
T = TypeVar("T")
# Small work runs on one DuckDB thread: there, parallel operators cost more than they save. Measured on 2 cores:
# analyses of a cached store of 35k events 0.43 → 0.39 s on one thread, 112k events 0.54 → 0.49 s, but 850k events
# 1.85 s on two against 2.19 s on one; `tracedoc analyze` of the 0.6 MB decode-eager sample 4 % faster again when
# its ingest runs on one thread too. Inputs under PARALLEL_INPUT_BYTES on disk hold fewer than about 250k events
# even gzipped (17 bytes an event). Larger stores are analysed on one thread per PARALLEL_EVENTS events at most:
# on 16 cores, the 850k events of a 205 MB PyTorch trace were analysed as fast on 4 threads as on 16 (2.06-2.20 s
# against 2.27-2.47 s), more threads only adding memory, while an Nsight Systems export of 6.1 M events needs
# them (5.2-5.6 s on 16 threads, 9.1-9.4 s on 4).
PARALLEL_EVENTS = 250_000
PARALLEL_INPUT_BYTES = 4 << 20
# Below PARALLEL_EVENTS the analyses are mostly planning, and two of DuckDB's optimizers cost more than they save
# there: with them off the analyses of the 0.6 MB decode-eager sample took 14 % less CPU, every report the same.
# (With every optimizer off they took 5x as long.)
SMALL_STORE_OPTIMIZERS_OFF = "join_order,statistics_propagation"
# Below PARALLEL_EVENTS the analyses' views are also made as tables (store.modules): computed once rather than
# bound again by every statement reading them, which took 10-15 % off the analyses of decode-eager, every report
# the same. Larger stores keep views, whose rows a table would hold in memory whether read or not; a summary of a
# row per source, device or rank that several statements read is written as a table in its module on every store.
# And the modules run several at a time (store.pool), on a cursor per core up to MODULE_WORKERS below
# PARALLEL_EVENTS (DuckDB plans each on its own thread); above it, where the cores hold several statements of one
# thread per PARALLEL_EVENTS events (on 16 cores, 4 cursors for 850k events). Where the cores hold one such
# statement, its statements want up to TWO_CURSORS_UP_TO threads and there are two cores or more, two cursors
# share them all the same: such statements keep about one thread busy (a window sweeps one lane at a time), so on 2
# cores two cursors of one thread beat one cursor of two: the 205 MB trace's run 0.936x the wall (5 pairs), the
# 112 MB trace of small ops 0.835x, for 12 and 26 MiB more at the peak. An export of 4 M events (16 threads a
# statement) keeps one cursor: two took it 1.08x longer under its fitted memory cap.
MODULE_WORKERS = 4
TWO_CURSORS_UP_TO = 4
# The catalog of a connection to ':memory:', where a store opened for analysis (``Store.open``, or made in memory)
# lets its modules make the objects every cursor sees: the connection's own, never the store.
OWN_CATALOG = "memory"
# The catalog a store is attached as when opened (``Store.open``) or made in memory (``_in_memory_store``); a store
# file being written is its connection's own database, named after the file.
STORE_CATALOG = "store"



class Store:
    """A connection to one store, with helpers to run SQL and load analysis modules."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None = None, limits: Limits = Limits()) -> None:
        self.con = con
        self.path = path
        self.limits = limits
        self._included: set[str] = set()
        self._has_rows: dict[str, bool] = {}
        self._formats: frozenset[str] | None = None
        self._ranks: int | None = None
        self._step_range: str | None = None
        self._variables: dict[str, Any] = {}
        self._measurable: bool | None = None
        self.views_as_tables = False
        # Cursors the modules may run on at once (Store.parallel), set by fit_threads; 1: one at a time.
        self.module_workers = 1
        # The catalog of the connection's own (OWN_CATALOG), where the connection may make the modules' objects
        # shared by its cursors; None where it has none (a store made as a file).
        self.own_catalog: str | None = None
        self._shared = False
        self._pool: ModulePool | None = None

    def set_step_range(self, name: str | None) -> None:
        """Name the host range that marks steps (``--step-range``: trace.steps reads it), before the steps are
        found; setting it again to the same name changes nothing."""
        if name == self._step_range:
            return
        if "trace.steps" in self._included:
            raise RuntimeError("the step range is set before the analyses run")
        self.set_variable("step_range", name)
        self._step_range = name

    def set_variable(self, name: str, value: Any) -> None:
        """Set the SQL variable ``name`` (``getvariable``) on the connection and on the cursors modules run on:
        before they run (``parallel`` copies the variables to each cursor as it makes it)."""
        if self._pool is not None:
            raise RuntimeError(f"the variable {name} is set while the analyses run")
        self.con.execute(f"SET VARIABLE {name} = ?", [value])
        self._variables[name] = value
        self._measurable = None
        self._has_rows.clear()  # a row set may read the variable (store.modules.ROW_SETS: steps_to_find)

    @classmethod
    def create(cls, path: Path | None, limits: Limits = Limits()) -> Store:
        """Create an empty store with the normalized schema at ``path`` (None: in memory, the store made ahead
        where one waits: ``premake``), under ``limits``.

        A store in memory is compressed like a file's (``mark_complete`` checkpoints it): uncompressed, the 205 MB
        trace's store takes 80 MB instead of 8 MB for the whole analysis; the checkpoint costs 0.04–0.15 s there.
        """
        if path is not None:
            con = connect(str(path), limits)
            _make_schema(con, in_file=True)
        elif (premade := _take_premade(limits)) is not None:
            con = premade
        else:
            con = _in_memory_store(connect(":memory:", limits))
        store = cls(con, path, limits)
        store.own_catalog = OWN_CATALOG if path is None else None
        return store

    @classmethod
    def open(cls, path: Path, limits: Limits = Limits()) -> Store:
        """Open a finished store read-only, under ``limits`` (on the connection of the store made ahead where one
        waits: ``premake``); analyses then add TEMP objects on top of it."""
        con = _take_premade(limits)
        if con is None:
            con = connect(":memory:", limits)
        else:  # the empty store made ahead gives way to the file
            con.execute(f"USE {OWN_CATALOG}")
            con.execute(f"DETACH {STORE_CATALOG}")
        try:
            con.execute(f"ATTACH {sql_literal(str(path))} AS {STORE_CATALOG} (READ_ONLY)")
            con.execute(f"USE {STORE_CATALOG}")
        except BaseException:
            con.close()
            raise
        store = cls(con, path, limits)
        store.own_catalog = OWN_CATALOG
        return store

    def query(self, sql: str, params: dict[str, Any] | list[Any] | None = None) -> list[dict[str, Any]]:
        """Run ``sql`` and return the rows as dicts."""
        cur = self.con.execute(sql, params) if params is not None else self.con.execute(sql)
        names = [d[0] for d in cur.description] if cur.description else []
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def scalar(self, sql: str, params: dict[str, Any] | list[Any] | None = None) -> Any:
        """Run ``sql`` and return the first column of the first row (None when there is no row)."""
        return scalar(self.con, sql, params)

    def include(self, module: str) -> None:
        """Load an analysis module (e.g. ``gpu.idle``) and its dependencies, once per connection (inside
        ``parallel``, on its cursors)."""
        if self._pool is not None:
            self._pool.wait(module)
            return
        from tracedoc.store import modules  # with DuckDB's parser: on a store's first use, not on importing this

        modules.include(self.con, self._included, module, self.limits.memory_bytes, applies=self.applies,
                        views_as_tables=self.views_as_tables, shared=self._shared)

    def in_turn(self, reads: Sequence[tuple[str, Callable[[], T]]]) -> list[T]:
        """Call each ``(module, read)``'s read once its analysis module is made, the reads of modules made first
        first, and return what they returned in the order given: inside ``parallel``, the main thread reads what
        is made while the cursors make the rest, rather than waiting for each module in turn; elsewhere each
        module is included, and read, in the order given. Where reads fail (a rule's SQL, a module that failed),
        the error raised is the one of the first in the order given, as one at a time, whichever failed first."""
        if self._pool is None:
            results = []
            for module, read in reads:
                self.include(module)
                results.append(read())
            return results
        done: dict[int, T] = {}
        failed: dict[int, Exception] = {}
        pending = dict(enumerate(reads))
        while pending and (not failed or min(pending) < min(failed)):  # later reads cannot change the error
            made = self._pool.wait_any(list(dict.fromkeys(module for module, _ in pending.values())))
            for index in [i for i, (module, _) in pending.items() if module == made]:
                read = pending.pop(index)[1]
                try:
                    done[index] = read()  # include() raises the error of a module that failed
                except Exception as exc:  # noqa: BLE001 - raised below, the first in the order given
                    failed[index] = exc
        if failed:
            raise failed[min(failed)]
        return [done[index] for index in range(len(reads))]

    @contextlib.contextmanager
    def parallel(self, first: Iterable[str] = ()) -> Iterator[None]:
        """Within it, modules run several at a time on cursors of the connection (``module_workers``, store.pool),
        ``first`` started at once, others as they are included; and the connection reads their objects as it
        would TEMP ones. One at a time where ``module_workers`` is 1, the connection has no catalog of its own or
        modules ran before (their objects TEMP ones)."""
        if self.module_workers < 2 or self.own_catalog is None or self._included:
            yield
            return
        from tracedoc.store import modules
        from tracedoc.store.pool import ModulePool  # here: its threads are for analyses, not every import of a store

        self._share_objects()
        cursors = [self._cursor() for _ in range(self.module_workers)]
        pool = ModulePool(cursors, self._run_module, lambda module: modules.dependencies(module, self.applies),
                          self._included)
        self._pool = pool
        finished = False
        try:
            pool.start(first)
            yield
            finished = True
        finally:
            self._pool = None
            pool.close(interrupt=not finished)
            for cursor in cursors:
                cursor.close()

    def start(self, first: Iterable[str]) -> None:
        """Inside ``parallel``, start these modules now (each once); elsewhere nothing: they run when included."""
        if self._pool is not None:
            self._pool.start(first)

    def _share_objects(self) -> None:
        """From here on the modules make their objects in the connection's own catalog, which it reads first (the
        store's tables after), and not as TEMP objects only the connection sees."""
        from tracedoc.store import modules

        self.con.execute(f"USE {self.own_catalog}")
        self.con.execute(f"SET search_path = '{self._search_path()}'")
        modules.declare_formats(self.con, shared=True)
        self._shared = True

    def _search_path(self) -> str:
        """The catalogs the connection reads: its own, then the store's."""
        return f"{self.own_catalog}.main,store.main"

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor that reads and makes the modules' objects as the connection does, with its SQL variables."""
        cursor = self.con.cursor()
        cursor.execute(f"SET search_path = '{self._search_path()}'")
        for name, value in self._variables.items():
            cursor.execute(f"SET VARIABLE {name} = ?", [value])
        return cursor

    def _run_module(self, con: duckdb.DuckDBPyConnection, module: str) -> None:
        """Run ``module``'s own statements on ``con`` (a cursor), its objects shared."""
        from tracedoc.store import modules

        modules.run(con, module, self.limits.memory_bytes, views_as_tables=self.views_as_tables, shared=True,
                    applies=self.applies)

    def fit_threads(self, input_bytes: int | None = None) -> None:
        """Fewer DuckDB threads for less work, never more than already set: one to ingest inputs of ``input_bytes``
        under PARALLEL_INPUT_BYTES; without it, to analyse the store, one per PARALLEL_EVENTS events a statement,
        and the modules run at once on as many cursors (``module_workers``, at most MODULE_WORKERS) as the cores
        (under a memory cap, the threads it holds: ``memory.threads_under_cap``) hold such statements, the threads
        then shared by the cursors: one thread and a cursor per core on a small store (whose optimizers
        SMALL_STORE_OPTIMIZERS_OFF are then off and its views made as tables); on 16 cores, 4 cursors sharing 16
        threads for 850k events; on 2 cores two cursors of one thread up to 1M events (TWO_CURSORS_UP_TO), one
        cursor above."""
        if input_bytes is not None:
            wanted = 1 if input_bytes < PARALLEL_INPUT_BYTES else None
        else:
            events = int(self.scalar("SELECT coalesce(sum(event_count), 0) FROM sources") or 0)
            per_statement = max(1, -(-events // PARALLEL_EVENTS))
            available = threads_under_cap(self.limits.memory_bytes, cores())  # each cursor's statement has buffers
            self.module_workers = max(1, min(MODULE_WORKERS, available // per_statement))
            wanted = min(available, per_statement * self.module_workers) if per_statement > 1 else 1
            if self.module_workers == 1 < min(MODULE_WORKERS, available) and per_statement <= TWO_CURSORS_UP_TO:
                # two cursors whose statements' threads, with the threads DuckDB adds, fill the cores
                self.module_workers, wanted = 2, available - 1
            if events < PARALLEL_EVENTS:
                self.con.execute(f"SET disabled_optimizers = '{SMALL_STORE_OPTIMIZERS_OFF}'")
                self.views_as_tables = True
        if wanted is not None and wanted < self.threads():
            self.con.execute(f"SET threads = {wanted}")

    def lock(self) -> None:
        """From here on no statement on this connection reads or writes a file, and no setting changes: what a
        rule or analysis runs (user rules' SQL included) stays inside the store. Done after ingest, once the
        threads are set; DuckDB still spills to the temp directory set at connection (--memory-limit), and an
        attached store is still read."""
        if not self.scalar("SELECT current_setting('lock_configuration')"):
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")

    def threads(self) -> int:
        """DuckDB's threads on this connection."""
        return int(self.scalar("SELECT current_setting('threads')"))

    def ranks(self) -> int:
        """How many ranks the store's inputs come from (``sources.rank``)."""
        if self._ranks is None:
            self._ask_sources()
        assert self._ranks is not None
        return self._ranks

    def applies(self, module: str) -> bool:
        """True when the analysis ``module`` can find anything here: the store holds rows of a table its header
        says it reads (one without ``-- reads:`` reads timelines: the store holds one, or a module that includes it
        applies), it compares ranks only where the store holds several (store.modules), and an efficiency module
        has what it measures."""
        from tracedoc.store import modules

        facts = modules.facts(module)
        if facts.scope == "ranks" and (self.ranks() < 2 or len(modules.timeline_formats() & self.formats()) > 1):
            return False  # one rank, or timelines of two formats: two recordings, not the ranks of one job
        if module.startswith("efficiency.") and not self.efficiency_measurable():
            return False
        if facts.reads:
            return self.any_rows(facts.reads)
        if module in modules.EVERY_STORE or not modules.timeline_formats().isdisjoint(self.formats()):
            return True
        return any(self.applies(includer) for includer in modules.included_by(module))

    def formats(self) -> frozenset[str]:
        """The formats of the store's inputs (``sources.format``)."""
        if self._formats is None:
            self._ask_sources()
        assert self._formats is not None
        return self._formats

    def _ask_sources(self) -> None:
        """The formats and ranks of the store's inputs, asked together: every run asks both."""
        formats, ranks = self.con.execute(
            "SELECT list(DISTINCT format), count(DISTINCT rank) FROM sources").fetchone() or ([], 0)
        self._formats, self._ranks = frozenset(formats or ()), int(ranks or 0)

    def any_rows(self, tables: Iterable[str]) -> bool:
        """True when one of the store's ``tables`` (or the rows ``store.modules.ROW_SETS`` names so) has a row. Each
        is asked once per store, those not known yet in one statement (a module reading four allocator tables asked
        a statement each of an empty store); rows of a timeline's table without a query where the store holds no
        timeline."""
        from tracedoc.store import modules

        tables = tuple(dict.fromkeys(tables))
        asked: dict[str, str] = {}
        for table in tables:
            if table in self._has_rows:
                continue
            rows = modules.ROW_SETS.get(table)
            if rows is not None and modules.timeline_formats().isdisjoint(self.formats()):
                self._has_rows[table] = False
            else:
                asked[table] = rows or table
        if asked:
            found = self.con.execute(
                "SELECT " + ", ".join(f"EXISTS (SELECT 1 FROM {rows})" for rows in asked.values())).fetchone() or ()
            self._has_rows.update(zip(asked, map(bool, found)))
        return any(self._has_rows[table] for table in tables)

    def efficiency_measurable(self) -> bool:
        """True when the store has what the efficiency modules measure: operator shapes, or a user's FLOPs or
        bytes per step (tracedoc.efficiency); asked once until a variable is set."""
        if self._measurable is None:
            self._measurable = bool(self.scalar("""
                SELECT EXISTS (SELECT 1 FROM op_shapes) OR getvariable('flops_per_step') IS NOT NULL
                       OR getvariable('bytes_per_step') IS NOT NULL"""))
        return self._measurable

    def is_complete(self) -> bool:
        """True when ingestion finished and marked the store complete."""
        return self.scalar("SELECT value FROM store_meta WHERE key = 'complete'") == "true"

    def mark_complete(self) -> None:
        """Record that every input was ingested; only complete stores are reused from the cache."""
        self.con.execute("UPDATE store_meta SET value = 'true' WHERE key = 'complete'")
        self.compress()

    def compress(self) -> None:
        """Compress the rows a store in memory holds (DuckDB keeps them uncompressed until a checkpoint); a store
        file's rows are written compressed, and checkpointing it would only cost time."""
        if self.path is None:
            self.con.execute("CHECKPOINT")

    def compress_aside(self) -> Compressing:
        """What compresses this store's rows on a helper thread while its reader goes on
        (``tracedoc.store.compressing``); for a store file, whose rows are written compressed, one that does
        nothing."""
        from tracedoc.store.compressing import Compressing  # here: its threads are for large inputs' readers

        return Compressing(self.con if self.path is None else None, STORE_CATALOG)

    def self_check(self) -> list[str]:
        """Invariants every ingest must keep; returns the violated ones (empty when the store is sound)."""
        checks = {
            "activity with negative duration": "SELECT count(*) FROM gpu_activity WHERE dur_ns < 0",
            "gpu activity without start time": "SELECT count(*) FROM gpu_activity WHERE ts_ns IS NULL",
            "cpu activity without start time": "SELECT count(*) FROM cpu_activity WHERE ts_ns IS NULL",
            "gpu activity with unknown kind": "SELECT count(*) FROM gpu_activity WHERE kind NOT IN "
            "('kernel', 'memcpy', 'memset', 'sync')",
            "activity of an unknown source": "SELECT count(*) FROM gpu_activity WHERE source_id NOT IN "
            "(SELECT source_id FROM sources)",
        }
        return [what for what, sql in checks.items() if self.scalar(sql)]

    def close(self) -> None:
        if self._pool is not None:  # closed within parallel: the analysis did not finish
            self._pool.close(interrupt=True)
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def schema_files() -> list[Traversable]:
    """schema.sql (the tables every format shares), then the tables readers write beyond them: each
    schema_<name>.sql beside the readers of its family in tracedoc/ingest/<family>/, in the order of their names."""
    extra = sorted((f for _, f in reader_files() if f.name.startswith("schema_") and f.name.endswith(".sql")),
                   key=lambda f: f.name)
    return [resources.files("tracedoc.store").joinpath("schema.sql"), *extra]


def reader_files() -> list[tuple[str, Traversable]]:
    """The readers' modules and schema files (tracedoc/ingest/ and each family's folder in it), each with its path
    there ('nsys/nsys_sql.py'), in the order of those paths."""
    found: list[tuple[str, Traversable]] = []
    folders = [("", resources.files("tracedoc").joinpath("ingest"))]  # found without importing the readers
    while folders:
        prefix, folder = folders.pop()
        for f in folder.iterdir():
            if f.is_dir() and not f.name.startswith(("_", ".")):
                folders.append((f"{prefix}{f.name}/", f))
            elif f.name.endswith((".py", ".sql")):
                found.append((prefix + f.name, f))
    return sorted(found, key=lambda pair: pair[0])


def connect(database: str, limits: Limits) -> duckdb.DuckDBPyConnection:
    """A connection that never draws DuckDB's progress bar, under the memory cap when one is set (spilling to
    disk beyond it): every connection tracedoc analyses on is opened here, a distributed run's too. On no more
    threads than the cores the process may run on: DuckDB counts the machine's, so a process pinned to 2 of 16
    cores (taskset, a batch scheduler's CPU set) read an Nsight Systems export on 16 threads, each with its own
    buffers; and under a cap, on no more than it holds buffers for (``memory.threads_under_cap``)."""
    from tracedoc.store.engine import duckdb

    threads = _threads(limits)
    con = duckdb.connect(database, config={} if threads is None else {"threads": threads})
    no_progress_bar(con)
    _cap_memory(con, limits)
    return con


def _threads(limits: Limits) -> int | None:
    """DuckDB's threads for a connection under ``limits`` (``connect``): None where that is every core of the
    machine, which DuckDB's own default then decides (it counts a Slurm job's CPUs and a container's CPU quota)."""
    available = threads_under_cap(limits.memory_bytes, cores())
    return available if available < (os.cpu_count() or 1) else None


def _cap_memory(con: duckdb.DuckDBPyConnection, limits: Limits) -> None:
    """Put ``con``'s database under the run's memory cap, spilling beyond it, when the run sets one."""
    if (limit := limits.memory_bytes) is not None:
        con.execute(f"SET memory_limit = '{max(1, limit >> 10)}KiB'")
        con.execute(f"SET temp_directory = {sql_literal(str(spill_directory()))}")


def _in_memory_store(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``con`` (a connection to ':memory:') with an empty store attached as ``store`` and used: its rows compressed
    at a checkpoint like a file's (``Store.create``)."""
    con.execute(f"ATTACH ':memory:' AS {STORE_CATALOG} (COMPRESS)")
    con.execute(f"USE {STORE_CATALOG}")
    _make_schema(con, in_file=False)
    return con


def _make_schema(con: duckdb.DuckDBPyConnection, in_file: bool) -> None:
    """Create the normalized schema in ``con``'s current database, marked incomplete; in a file, in one commit (the
    file's log written once, not once a table: about 10 ms of a small store)."""
    if in_file:
        con.execute("BEGIN TRANSACTION")
    for schema in schema_files():
        con.execute(schema.read_text())
    con.execute("INSERT INTO store_meta VALUES ('schema_version', ?), ('complete', 'false')", [str(SCHEMA_VERSION)])
    if in_file:
        con.execute("COMMIT")


# An empty store in memory made ahead of the command that uses it (``premake``, or ``premake_aside`` while the
# helper thread making it runs): the next Store.create(None) or Store.open takes it, once.
_premade: duckdb.DuckDBPyConnection | None = None
_premaking: HelperThread | None = None  # premake_aside's thread


def premake() -> None:
    """Make an empty store in memory now, for the next store the process makes or opens: a resident process makes one
    before it forks (tracedoc.resident), so that each command it runs finds DuckDB's database started and the schema
    made, about 60 ms of a small trace's run. Made on one thread and without DuckDB's asynchronous I/O threads (8 of
    them by default, even under `threads = 1`): DuckDB then runs no thread of its own, and the process may fork.
    What DuckDB fixes as its database starts (its TimeZone, from TZ) is then this process's, not the command's: no
    analysis reads a time zone."""
    global _premade
    from tracedoc.store.engine import duckdb

    con = duckdb.connect(":memory:", config={"threads": 1, "async_threads": 0})
    no_progress_bar(con)
    _premade = _in_memory_store(con)


def premake_aside() -> None:
    """``premake`` on a helper thread (``HelperThread``), while this one goes on (importing the command line): a
    command that will analyse a store in memory (``tracedoc.warm.store_ahead``) then finds DuckDB started and the
    schema made, about 50 ms of a small trace's run, most of it in DuckDB, which lets Python's GIL go. The store
    that takes it waits until the thread is done; one that failed to make it leaves none, and the store taking it
    connects itself and meets the error. A command that ends before taking it (bad input, found at once) waits for
    it (``wait_aside``, and the interpreter's exit), since a process that ends while DuckDB starts its database on
    another thread aborts."""
    global _premaking
    _premaking = HelperThread(lambda: premake(), "tracedoc-store-ahead")  # premake looked up as it runs
    _premaking.begin()


def wait_aside() -> None:
    """Wait until ``premake_aside``'s thread is done, Ctrl-C or not (it takes at most the 50 ms of making the store):
    the command line's last step, so that the interpreter's own wait for the thread at exit, which Ctrl-C would cut
    short, finds it done."""
    if _premaking is not None:
        _premaking.wait_through_interrupts()


def _take_premade(limits: Limits) -> duckdb.DuckDBPyConnection | None:
    """The store ``premake`` made (once ``premake_aside``'s thread is done), set up as ``connect`` sets a connection
    up under ``limits`` (its threads, or DuckDB's default read again in this process; its asynchronous I/O threads
    back to DuckDB's default; the memory cap); None where none is waiting. A connection that fails to be set up is
    closed."""
    global _premade, _premaking
    if _premaking is not None:
        with contextlib.suppress(Exception):  # none made: the store taking its place connects and meets the error
            _premaking.wait()
        _premaking = None
    con, _premade = _premade, None
    if con is not None:
        try:
            con.execute("RESET async_threads")
            threads = _threads(limits)
            con.execute("RESET threads" if threads is None else f"SET threads = {threads}")
            _cap_memory(con, limits)
        except BaseException:
            con.close()
            raise
    return con


def no_progress_bar(con: duckdb.DuckDBPyConnection) -> None:
    """Turn DuckDB's progress bar off (it writes to stdout for queries slower than 2 s, which would land inside a JSON
    or Markdown report). Only when it is on: in a Jupyter kernel without ipywidgets it starts off, and DuckDB refuses
    to change the setting there at all."""
    if scalar(con, "SELECT current_setting('enable_progress_bar')"):
        con.execute("SET enable_progress_bar = false")


def sql_literal(text: str) -> str:
    """``text`` as a single-quoted SQL string literal (a path or name given to a statement that takes no
    parameters: ATTACH, COPY, SET, read_json)."""
    return "'" + text.replace("'", "''") + "'"


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | list[Any] | None = None) -> Any:
    """Run ``sql`` on ``con`` and return the first column of the first row (None when there is no row)."""
    cur = con.execute(sql, params) if params is not None else con.execute(sql)
    rows = cur.fetchall()  # fetch to the end: a half-read result would block the next statement
    return rows[0][0] if rows else None
