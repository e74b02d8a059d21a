"""Where one analysis spends its CPU, statement by statement: `analyze --no-cache` in this process, every SQL
statement timed (process CPU, so DuckDB's threads count, and wall), each charged to the module that ran it.

Run on a quiet machine or compare CPU columns only; the statements of a module script are run one at a time here
(as DuckDB runs a script), which costs nothing measurable. For benchmarks, never for tests.

    python benchmarks/profile_statements.py /tmp/big/large.json --top 25
    python benchmarks/profile_statements.py /tmp/big/large.json --ingest   # the read and the normalisation alone
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from tracedoc import analyze, ingest
from tracedoc.limits import Limits
from tracedoc.options import AnalysisOptions
from tracedoc.pipeline import build_report
from tracedoc.store import modules
from tracedoc.store import store as store_module
from tracedoc.store.store import Store
from tracedoc.units import parse_size


class Timings:
    """CPU and wall seconds per statement, each charged to the module running on its thread (or 'ingest/other').
    Process CPU counts every thread: where modules run at once on cursors (store.pool), each statement's CPU
    includes what the other threads did meanwhile, so compare CPU on one cursor (the default here)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, float, float]] = []
        self._local = threading.local()

    @property
    def module_stack(self) -> list[str]:
        """The modules running on this thread, innermost last."""
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        stack: list[str] = self._local.stack
        return stack

    @property
    def label(self) -> str:
        return self.module_stack[-1] if self.module_stack else "ingest/other"

    @contextmanager
    def timed(self, text: str) -> Iterator[None]:
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self.rows.append((self.label, " ".join(text.split())[:110], time.process_time() - cpu,
                              time.perf_counter() - wall))


class TimingConnection:
    """A DuckDB connection whose scripts run one statement at a time, each timed; with ``planning``, DuckDB's own
    profiler on too, each statement's binding, optimizing, physical planning and operators' time summed."""

    def __init__(self, con: duckdb.DuckDBPyConnection, timings: Timings, planning: dict[str, float] | None = None
                 ) -> None:
        self._con = con
        self._timings = timings
        self._planning = planning
        if planning is not None:
            try:
                con.execute("PRAGMA enable_profiling = 'no_output'")
                con.execute("PRAGMA profiling_mode = 'detailed'")
            except duckdb.InvalidInputException:  # a cursor made once the store is locked (Store.lock): not profiled
                self._planning = None

    def _profiled(self) -> None:
        """Add the last statement's phases, as DuckDB's profiler measured them, to ``planning``."""
        if self._planning is None:
            return
        try:
            profile = json.loads(self._con.get_profiling_information(format="json"))
        except (duckdb.Error, ValueError):
            return
        for phase in ("planner", "optimizer", "physical_planner"):
            self._planning[phase] += profile.get(phase, {}).get("total_time", 0.0)
        stack = list(profile.get("operator", []))
        while stack:
            node = stack.pop()
            self._planning["operators"] += node.get("timing") or 0.0
            stack.extend(node.get("children", []))

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        statements = duckdb.extract_statements(sql) if not args and not kwargs else ()
        if len(statements) <= 1:
            with self._timings.timed(sql):
                result = self._con.execute(sql, *args, **kwargs)
            self._profiled()
            return result
        for statement in statements:
            with self._timings.timed(statement.query):
                result = self._con.execute(statement.query)
            self._profiled()
        return result

    def executemany(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        with self._timings.timed(sql):
            return self._con.executemany(sql, *args, **kwargs)

    def cursor(self) -> TimingConnection:
        """A cursor (modules run at once run on these: store.pool), its statements timed too."""
        return TimingConnection(self._con.cursor(), self._timings, self._planning)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", type=Path, help="traces, or with --store one cached store (.duckdb)")
    parser.add_argument("--store", action="store_true",
                        help="analyse the cached store given (the analyses alone, no ingest)")
    parser.add_argument("--ingest", action="store_true",
                        help="read the traces into an in-memory store and stop (no analyses); the statements run "
                             "once per group of parts are summed as one")
    parser.add_argument("--top", type=int, default=20, help="statements to list, most CPU first")
    parser.add_argument("--workers", type=int, default=1,
                        help="at most this many cursors for the modules to run on at once (store.pool); 1 (the "
                             "default): one at a time, each statement's CPU its own")
    parser.add_argument("--memory-limit", help="DuckDB's memory cap, as --memory-limit takes it (e.g. 80M)")
    parser.add_argument("--planning", action="store_true",
                        help="also print, summed over the statements, what DuckDB's own profiler counts as binding, "
                             "optimizing, physical planning and the operators' time (the profiler adds its own; "
                             "cursors made after the store is locked are not profiled: keep --workers 1)")
    args = parser.parse_args()

    timings = Timings()
    planning = dict.fromkeys(("planner", "optimizer", "physical_planner", "operators"), 0.0) if args.planning else None
    connect = store_module.connect
    store_module.connect = lambda *a, **k: TimingConnection(connect(*a, **k), timings,  # type: ignore[assignment]
                                                            planning)
    run_module = modules.run

    def timed_run(con: Any, module: str, *rest: Any, **kw: Any) -> None:
        """modules.run, which runs each module's own statements (included or on a pool's cursor)."""
        timings.module_stack.append(module)
        try:
            run_module(con, module, *rest, **kw)
        finally:
            timings.module_stack.pop()

    modules.run = timed_run
    # Store.fit_threads fits the cursors, and the threads to them, within this cap.
    store_module.MODULE_WORKERS = max(1, min(store_module.MODULE_WORKERS, args.workers))
    limits = Limits.from_env(memory_bytes=parse_size(args.memory_limit, "--memory-limit") if args.memory_limit
                             else None)
    cpu, wall = time.process_time(), time.perf_counter()
    if args.store:
        with Store.open(args.inputs[0], limits) as store:
            build_report(store, AnalysisOptions(limits=limits))
    elif args.ingest:
        with Store.create(None, limits) as store:
            ingest.load_all(store, ingest.discover(args.inputs, limits))
    else:
        analyze(args.inputs, use_cache=False, limits=limits)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    per_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for label, _, c, w in timings.rows:
        per_module[label][0] += c
        per_module[label][1] += w
        per_module[label][2] += 1
    in_sql = sum(r[2] for r in timings.rows)
    print(f"{'ingest' if args.ingest else 'analyze'}: {cpu:.2f} s CPU, {wall:.2f} s wall, peak RSS {peak_mb:.0f} MB; "
          f"{len(timings.rows)} statements {in_sql:.2f} s CPU, Python and the rest {cpu - in_sql:.2f} s")
    if planning is not None:
        print(f"DuckDB's profiler, over the statements: binding {planning['planner']:.3f} s, optimizing "
              f"{planning['optimizer']:.3f} s, physical planning {planning['physical_planner']:.3f} s, operators "
              f"{planning['operators']:.3f} s (of {sum(r[3] for r in timings.rows):.3f} s of statements' wall)")
    print("\nper module (own statements; CPU s, wall s, statements):")
    for label, (c, w, n) in sorted(per_module.items(), key=lambda kv: -kv[1][0]):
        print(f"  {c:7.3f} {w:7.3f} {int(n):4d}  {label}")
    rows = timings.rows
    if args.ingest:  # one row per statement text, its runs summed
        summed: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for _, text, c, w in rows:
            summed[text][0] += c
            summed[text][1] += w
            summed[text][2] += 1
        rows = [(f"ingest x{int(n)}", text, c, w) for text, (c, w, n) in summed.items()]
    print(f"\ntop {args.top} statements (CPU s, wall s, module, statement):")
    for label, text, c, w in sorted(rows, key=lambda r: -r[2])[:args.top]:
        print(f"  {c:7.3f} {w:7.3f}  {label:24s} {text}")


if __name__ == "__main__":
    main()
