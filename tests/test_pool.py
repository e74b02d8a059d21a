"""Analysis modules run several at a time on cursors of one connection (tracedoc.store.pool): the report is the
one a single connection gives, the modules' objects stay out of the store, and a module's error is raised as
where it ran alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import SAMPLES
from tracedoc import analyze, pipeline
from tracedoc.errors import RuleError, TracedocError
from tracedoc.options import AnalysisOptions, Peaks
from tracedoc.pipeline import build_report, input_files, open_store
from tracedoc.report_tables import ReportTable
from tracedoc.store import modules
from tracedoc.store import store as store_module
from tracedoc.store.store import Store

RUN_MODULE = Store._run_module
RUN = modules.run
REPORT_ROWS = pipeline.report_rows


def report_on_cursors(sample: Path, cursors: int, monkeypatch: pytest.MonkeyPatch,
                      **options: Any) -> tuple[dict[str, Any], set[str]]:
    """``sample``'s report (no cache, ``analyze``'s ``options``) with the modules run on up to ``cursors`` cursors,
    and the threads they ran on."""
    threads: set[str] = set()

    def recorded(store: Store, con: duckdb.DuckDBPyConnection, module: str) -> None:
        threads.add(threading.current_thread().name)
        RUN_MODULE(store, con, module)

    monkeypatch.setattr(store_module, "cores", lambda: cursors)
    monkeypatch.setattr(Store, "_run_module", recorded)
    report = analyze([sample], use_cache=False, **options).to_dict()
    report.pop("tracedoc")
    return report, threads


@pytest.mark.parametrize("sample", ["decode-eager", "nsys-nvfuser-h200"])
def test_modules_run_at_once_give_the_report_of_one_connection(sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, no_threads = report_on_cursors(SAMPLES / sample, 1, monkeypatch)
    at_once, threads = report_on_cursors(SAMPLES / sample, 4, monkeypatch)
    assert no_threads == set()  # one cursor: every module on the connection itself
    assert len(threads) >= 2, threads
    assert at_once == alone


def test_the_cursors_read_the_sql_variables_a_run_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The step range and the FLOPs per step are SQL variables (trace.steps, efficiency.steps read them): set on the
    connection, they reach each cursor, so the window and MFU are the ones a single connection gives."""
    options = {"step_range": "decode_step", "peaks": Peaks(flops_per_step=1e12)}
    alone, _ = report_on_cursors(SAMPLES / "decode-eager", 1, monkeypatch, **options)
    at_once, threads = report_on_cursors(SAMPLES / "decode-eager", 2, monkeypatch, **options)
    assert len(threads) == 2
    assert at_once["window"]["steps"] == "the host range 'decode_step'"
    assert at_once["efficiency"][0]["model_flops"] == 1e12 and at_once["efficiency"][0]["mfu_pct"] is not None
    assert at_once == alone


def test_a_cached_store_is_analysed_at_once_and_keeps_the_analyses_out(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The modules' objects are made in the connection's own catalog: the cached store, opened read-only, gets
    none, and they are no TEMP objects (those only the connection making them sees)."""
    monkeypatch.setattr(store_module, "cores", lambda: 2)
    inputs = input_files(SAMPLES / "decode-eager")
    open_store(inputs, tmp_path)[0].close()
    store, cached = open_store(inputs, tmp_path)
    try:
        assert cached
        build_report(store, AnalysisOptions())
        made = dict(store.con.execute("""
            SELECT database_name, count(*) FROM (SELECT database_name FROM duckdb_tables()
                                                UNION ALL SELECT database_name FROM duckdb_views() WHERE NOT internal)
            WHERE database_name <> 'system' GROUP BY ALL""").fetchall())
        assert made.get("memory", 0) > 50 and "temp" not in made
        assert made["store"] == store.scalar("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'store'")
        assert store.scalar("SELECT count(*) FROM gpu_report_idle") == 1
    finally:
        store.close()


def test_a_failing_module_is_raised_where_it_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that fails on a cursor fails the analysis with its own one-line error, as on one connection, and
    the modules that read it are not run; no thread is left behind."""
    ran: list[str] = []

    def failing(con: duckdb.DuckDBPyConnection, module: str, *args: Any, **kwargs: Any) -> None:
        if module == "gpu.busy":
            raise TracedocError("analysis module gpu.busy failed: on purpose")
        ran.append(module)
        RUN(con, module, *args, **kwargs)

    monkeypatch.setattr(modules, "run", failing)
    errors = []
    for cursors in (1, 2):
        monkeypatch.setattr(store_module, "cores", lambda cursors=cursors: cursors)
        ran.clear()
        with pytest.raises(TracedocError) as raised:
            analyze([SAMPLES / "decode-eager"], use_cache=False)
        errors.append(str(raised.value))
        assert "gpu.idle" not in ran and "trace.summary" not in ran
    assert errors == ["analysis module gpu.busy failed: on purpose"] * 2
    assert not [t for t in threading.enumerate() if t.name.startswith("tracedoc-modules")]


def test_a_module_whose_dependencies_cannot_be_told_fails_and_is_not_waited_for() -> None:
    """Where asking for a module's dependencies raises (an unknown `-- uses:` module, say), the module is failed
    with that error: asking for it again raises it rather than waiting for ever."""
    from tracedoc.store.pool import ModulePool

    def dependencies(module: str) -> list[str]:
        if module == "b":
            raise KeyError("no module b.c")
        return {"a": ["b"]}.get(module, [])

    con = duckdb.connect()
    pool = ModulePool([con.cursor()], lambda cursor, module: None, dependencies, set())
    try:
        with pytest.raises(KeyError):
            pool.start(["a"])
        outcome: list[BaseException] = []
        waiter = threading.Thread(target=lambda: _wait_into(pool, "a", outcome), daemon=True)
        waiter.start()
        waiter.join(10)
        assert not waiter.is_alive() and isinstance(outcome[0], KeyError)
    finally:
        pool.close()
        con.close()


def test_the_report_reads_each_analysis_as_soon_as_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """On cursors, the rules' rows and the report's tables are read while other modules are still being made
    (Store.in_turn): a module held up holds up only the reads of what it makes, and the report is the same."""
    events: list[tuple[str, str]] = []

    def held_up(store: Store, con: duckdb.DuckDBPyConnection, module: str) -> None:
        if module == "attribution.host":
            time.sleep(0.5)
        RUN_MODULE(store, con, module)
        events.append(("made", module))

    def rows(store: Store, table: ReportTable) -> list[dict[str, Any]]:
        events.append(("read", table.module))
        return REPORT_ROWS(store, table)

    alone, _ = report_on_cursors(SAMPLES / "decode-eager", 1, monkeypatch)
    monkeypatch.setattr(store_module, "cores", lambda: 2)
    monkeypatch.setattr(Store, "_run_module", held_up)
    monkeypatch.setattr(pipeline, "report_rows", rows)
    at_once = analyze([SAMPLES / "decode-eager"], use_cache=False).to_dict()
    at_once.pop("tracedoc")
    held = events.index(("made", "attribution.host"))
    read_before = {module for kind, module in events[:held] if kind == "read"}
    assert {"gpu.idle", "gpu.kernels", "trace.window"} <= read_before, events
    assert ("read", "attribution.time") in events[:held]  # made before the module that reads it
    assert at_once == alone


def test_of_several_broken_rules_the_first_in_order_is_said_whichever_fails_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two user rules whose SQL fails: the one read first in the rules' order is the one reported, as on one
    connection, though the other's analysis is made long before (Store.in_turn)."""
    for rule, reads, view in (("a-late", "attribution.host", "attribution_host_bound"),
                              ("b-early", "gpu.idle", "gpu_idle_by_device")):
        (tmp_path / f"{rule}.yaml").write_text(
            f"id: {rule}\ntitle: broken\nseverity: warning\nreads: {reads}\nview: {view}\n"
            f"when: no_such_column > 0\nimpact_ms: 0\nscope: {{rank: rank}}\nmessage: m\nfix: f\n")

    def held_up(store: Store, con: duckdb.DuckDBPyConnection, module: str) -> None:
        if module == "attribution.host":
            time.sleep(0.3)
        RUN_MODULE(store, con, module)

    errors = []
    for cursors in (1, 2):
        monkeypatch.setattr(store_module, "cores", lambda cursors=cursors: cursors)
        monkeypatch.setattr(Store, "_run_module", held_up)
        with pytest.raises(RuleError) as raised:
            analyze([SAMPLES / "decode-eager"], use_cache=False, rules_dirs=[tmp_path])
        errors.append(str(raised.value).split(" (")[0].split(":")[0])
    assert errors == ["rule a-late"] * 2


def test_a_pool_closes_though_an_interrupt_left_its_lock_held() -> None:
    """A KeyboardInterrupt landing just after a ``with`` took the pool's lock leaves it held by the main thread:
    closing the pool then lets it go, rather than waiting for ever on workers that wait for it."""
    from tracedoc.store.pool import ModulePool

    con = duckdb.connect()
    pool = ModulePool([con.cursor(), con.cursor()], lambda cursor, module: None, lambda module: [], set())

    def interrupted_then_closed() -> None:
        pool._changed.acquire()  # what the interrupt leaves behind
        pool.close(interrupt=True)

    closer = threading.Thread(target=interrupted_then_closed, daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive()
    con.close()


def test_waiting_for_any_of_several_modules_gives_the_first_made_or_failed() -> None:
    from tracedoc.store.pool import ModulePool

    release = threading.Event()

    def run(cursor: duckdb.DuckDBPyConnection, module: str) -> None:
        if module in ("slow", "slower"):
            release.wait(10)
        if module == "broken":
            raise TracedocError("analysis module broken failed: on purpose")

    con = duckdb.connect()
    pool = ModulePool([con.cursor(), con.cursor()], run, lambda module: [], set())
    try:
        assert pool.wait_any(["slow", "quick"]) == "quick"  # made first, though asked for second
        release.set()
        pool.wait("slow")
        assert pool.wait_any(["quick", "slow"]) == "quick"  # both made: the first in the order given
        release.clear()
        assert pool.wait_any(["slower", "broken"]) == "broken"  # failed while the other is still being made
        with pytest.raises(TracedocError, match="broken"):
            pool.wait("broken")
        release.set()
    finally:
        pool.close()
        con.close()


def test_ctrl_c_stops_the_statements_running_on_the_cursors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while a module's statement runs on a cursor stops that statement as the analysis ends, rather than
    waiting for it: here a stand-in for a long module of a large trace (a minute or more of hashing), started
    within decode-eager's analysis with its modules on cursors."""
    started = threading.Event()
    ended: list[BaseException | None] = []

    def slow(store: Store, con: duckdb.DuckDBPyConnection, module: str) -> None:
        if module == "gpu.busy":
            started.set()
            try:
                con.execute("SELECT sum(hash(range)) FROM range(10000000000)").fetchall()
                ended.append(None)
            except BaseException as exc:
                ended.append(exc)
                raise
        RUN_MODULE(store, con, module)

    def press_ctrl_c() -> None:
        if started.wait(60):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    monkeypatch.setattr(store_module, "cores", lambda: 4)
    monkeypatch.setattr(Store, "_run_module", slow)
    threading.Thread(target=press_ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        analyze([SAMPLES / "decode-eager"], use_cache=False)
    assert [type(e) for e in ended] == [duckdb.InterruptException]
    assert not [t for t in threading.enumerate() if t.name.startswith("tracedoc-modules")]


def _wait_into(pool: Any, module: str, outcome: list[BaseException]) -> None:
    """Wait for ``module`` in ``pool``, keeping the error it raises."""
    try:
        pool.wait(module)
    except BaseException as exc:  # noqa: BLE001 - the test reads which
        outcome.append(exc)


def test_a_large_store_runs_its_modules_at_once_where_the_cores_hold_its_statements(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Above PARALLEL_EVENTS (lowered here so that decode-eager's 35k events count as large: 7 threads a statement,
    more than TWO_CURSORS_UP_TO) the modules run at once only where the cores hold several such statements: on 2
    cores one at a time, on 16 on 2 cursors, with the report of one connection."""
    monkeypatch.setattr(store_module, "PARALLEL_EVENTS", 5_000)
    two_cores, no_threads = report_on_cursors(SAMPLES / "decode-eager", 2, monkeypatch)
    sixteen_cores, threads = report_on_cursors(SAMPLES / "decode-eager", 16, monkeypatch)
    assert no_threads == set()
    assert len(threads) >= 2, threads
    assert sixteen_cores == two_cores
    monkeypatch.undo()
    alone, _ = report_on_cursors(SAMPLES / "decode-eager", 1, monkeypatch)
    assert sixteen_cores == alone  # as large a store as a small one, views kept: the same report


def test_threads_and_cursors_fitted_to_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cursors times the threads a statement wants stay within the cores; small stores keep one thread."""
    fitted = {}
    for events, available in [(850_000, 2), (850_000, 16), (850_000, 8), (850_000, 6), (6_100_000, 16),
                              (4_000_000, 2), (1_100_000, 2), (35_000, 2), (35_000, 16)]:
        monkeypatch.setattr(store_module, "cores", lambda available=available: available)
        store = Store.create(None)
        try:
            store.con.execute(f"SET threads = {available}")
            store.con.execute("INSERT INTO sources (source_id, path, format, rank, event_count) "
                              "VALUES (0, 'x', 'kineto', 0, ?)", [events])
            store.fit_threads()
            fitted[events, available] = (store.module_workers, store.threads())
        finally:
            store.close()
    # statements of up to 1M events (4 threads) on two cursors wherever the cores hold only one of them: on 2 cores
    # one thread (each cursor's statement on its own thread), on 6 four threads more than the cursors' own
    assert fitted == {(850_000, 2): (2, 1), (850_000, 16): (4, 16), (850_000, 8): (2, 8), (850_000, 6): (2, 5),
                      (6_100_000, 16): (1, 16), (4_000_000, 2): (1, 2), (1_100_000, 2): (1, 2), (35_000, 2): (2, 1),
                      (35_000, 16): (4, 1)}


def test_no_more_cursors_than_module_workers_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    """MODULE_WORKERS caps the cursors, the two of a store of up to TWO_CURSORS_UP_TO threads a statement too."""
    monkeypatch.setattr(store_module, "cores", lambda: 2)
    monkeypatch.setattr(store_module, "MODULE_WORKERS", 1)
    store = Store.create(None)
    try:
        store.con.execute("SET threads = 2")
        store.con.execute("INSERT INTO sources (source_id, path, format, rank, event_count) "
                          "VALUES (0, 'x', 'kineto', 0, 850000)")
        store.fit_threads()
        assert (store.module_workers, store.threads()) == (1, 2)
    finally:
        store.close()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_a_process_pinned_to_fewer_cores_reads_on_as_many_threads() -> None:
    """DuckDB counts the machine's cores; a process pinned to one (taskset, a batch scheduler's CPU set) gets one
    thread for its reading too, not one per core of the machine (an Nsight Systems export read on 16 threads on 2
    pinned cores peaked far above its cap)."""
    threads = "from tracedoc.store.store import Store; print(Store.create(None).threads())"
    pin = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
    pinned = subprocess.run([sys.executable, "-c", pin + threads], capture_output=True, text=True, check=True)
    assert pinned.stdout.strip() == "1"
    whole = subprocess.run([sys.executable, "-c", threads], capture_output=True, text=True, check=True)
    assert int(whole.stdout) == len(os.sched_getaffinity(0)) > 1
