"""What a run costs, counted rather than timed: the SQL statements DuckDB plans, and the heavy modules imported.

On a small trace most of a run is DuckDB binding, optimizing and planning statements, a few ms each (docs/speed.md),
so every statement added to the analyses costs every run. STATEMENTS is the budget per sample: a run that plans
more fails. Growth needs a matching cut elsewhere or a stated reason (then raise the number here, with the reason
in the commit message); a cut lowers the number, so the next addition has to pay for itself too.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.ingest.nsys import sqlite_arrow
from tracedoc.store import modules
from tracedoc.store import store as store_module

# Statements planned by `analyze SAMPLE --no-cache` (ingest, analyses, rules and report tables), per sample.
# Raised from 250, 305 and 181 by the step without the profiler (efficiency.observer), the GPU floor every saving
# leaves (efficiency.floor), the report's sections read as
# declared views (memory.report, efficiency.report) and the analysis connection locked after ingest; then lowered
# by the floor reading the operator modules only where they are modelled (efficiency.shares, `-- uses:`); then
# raised by each source's own slow leading steps kept apart from the job's warm-up (trace.steps: a distributed run
# judges every rank over the job's, 3 statements on every store) and the step without the profiler on Nsight
# Systems captures (their efficiency rows), less what the formats' declared capabilities saved. Then lowered by the
# input formats declared once per connection (they were declared again at each level of the first module's
# includes) and whether the efficiency modules apply asked once, less 4 statements that set up the modules run at
# once (the connection reads their catalog first, and each of the two cursors does too: tracedoc.store.pool). Then
# lowered by the attribution's segments and their causes made in one statement (attribution.time), and by an Nsight
# Systems export's times put on UTC as its tables are read (an UPDATE per timed table before). Then lowered by
# 26 on each timeline: attribution.time's sets merged in one statement and its gap sets read by its sweep (23),
# efficiency.observer's merge of the GPU work replaced by one sorted pass and its steps' work read as a CTE (3).
# Then by the collectives' matching (ranks.collectives) planned only where the store holds communication kernels,
# and the NVTX projection (nvtx.projection) only where it holds NVTX ranges (ranks.matched and nvtx.idle give their
# readers empty tables elsewhere), and the exposed communication with its rule (comm.exposed, low-comm-overlap)
# only where there is communication. Then by the steps, the window and the busy time (trace.steps, trace.window,
# gpu.busy) planned only where the store holds a timeline (21 on an Nsight Compute report: trace.summary and
# gpu.busy_time give the summary empty tables elsewhere), and by a module's empty tables for the modules it uses
# left out where those ran (nvtx.idle's on an export with NVTX ranges). Then by the ncu rules' lookups of their
# kernel's timeline link and ncu verdict made once as columns (ncu.verdicts' ncu_rule_context) instead of five
# macros, each a subquery per rule (3: five macros gone, one of arithmetic alone added for the saving per
# timeline launch), and by the NVTX projection's user range found per launch (nvtx.projection: the launched work's
# table went). Then the search for steps beyond the profiler's (trace.step_search) planned only where a source has
# no profiler steps or a step range is named: a PyTorch trace's 5 statements give way to 4 empty tables and the
# question whether to search (the same count, the 5 heaviest gone), which costs the Nsight Systems export one.
# Then by the checks asked together (10 on a PyTorch trace, 9 on an export, 8 on an Nsight Compute
# report): which tables hold a row of another rank, found in one statement before any rank is set (an UPDATE per
# ranked table before); whether a module's tables have rows, asked in one statement per module; the inputs' formats
# and ranks in one; a PyTorch trace's allocator events counted with its events, and its clock kept only where it
# has them in the statement that keeps it. Then raised by one on an Nsight Systems export: its store compressed
# between the GPU's rows and the host's, so that the CUDA calls' normalisation runs beside the kernels compressed
# (nsys._load_tables). Then lowered by six on an export: its tables read into a database of their own, attached
# for the read and detached after it (nsys._read_tables), instead of a temp table each dropped one by one.
STATEMENTS = {
    "decode-eager": 212,  # a PyTorch profiler trace
    # an Nsight Systems export; 272 before its streams were typed by DuckDB instead of pyarrow (0.15 s of import):
    # a DESCRIBE per table read (+11), the events counted in one statement (-7)
    "nsys-nvfuser-h200": 270,
    "ncu-h100-gemm-cublas": 161,  # an Nsight Compute CSV (with its GEMM ladder)
}


class CountingConnection:
    """A DuckDB connection that counts the statements run through it (each statement of a script; an
    ``executemany`` or a relation built from SQL as one)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, counts: list[int]) -> None:
        self._con = con
        self._counts = counts

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self._counts.append(len(duckdb.extract_statements(sql)))
        return self._con.execute(sql, *args, **kwargs)

    def executemany(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self._counts.append(1)
        return self._con.executemany(sql, *args, **kwargs)

    def sql(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self._counts.append(1)
        return self._con.sql(sql, *args, **kwargs)

    def cursor(self) -> CountingConnection:
        """A cursor (analysis modules run on several at once: tracedoc.store.pool), counted too."""
        return CountingConnection(self._con.cursor(), self._counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def statements_of_a_run(sample: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The statements one `analyze --no-cache` of ``sample`` runs, on every connection it opens, as on 2 cores (each
    cursor the analysis modules run on is set up with a statement: one per core)."""
    counts: list[int] = []
    connect = store_module.connect
    monkeypatch.setattr(store_module, "cores", lambda: 2)
    monkeypatch.setattr(store_module, "connect", lambda *a, **k: CountingConnection(connect(*a, **k), counts))
    analyze([sample], use_cache=False)
    return sum(counts)


@pytest.mark.parametrize("sample", sorted(STATEMENTS))
def test_a_run_plans_no_more_statements_than_its_budget(sample: str, monkeypatch: pytest.MonkeyPatch) -> None:
    planned = statements_of_a_run(SAMPLES / sample, monkeypatch)
    budget = STATEMENTS[sample]
    assert planned <= budget, (
        f"{sample}: {planned} statements planned per run, over the budget of {budget}: cut as many elsewhere, or "
        f"raise STATEMENTS in {Path(__file__).name} saying why")
    assert planned == budget, f"{sample}: {planned} statements, under the budget of {budget}: lower it to {planned}"


def imported_by_a_run(sample: Path) -> set[str]:
    """The top-level modules a fresh process has imported once it has analysed ``sample``."""
    code = ("import sys; from tracedoc import analyze; analyze([sys.argv[1]], use_cache=False); "
            "print(' '.join(sorted({m.partition('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code, str(sample)], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    return set(done.stdout.split())


def test_a_pytorch_trace_is_analysed_without_arrow_numpy_or_pandas() -> None:
    """pyarrow and numpy took 0.2 s and 35 MiB of a small trace's run, pandas more; the Kineto path needs none."""
    assert imported_by_a_run(SAMPLES / "decode-eager") & {"pyarrow", "numpy", "pandas", "polars"} == set()


def test_an_nsys_export_is_read_without_arrow_numpy_pandas_or_polars() -> None:
    """ADBC's DB-API module imports pandas and polars (about 1 s); its low-level API reads the same Arrow, as a C
    stream that DuckDB scans: pyarrow and numpy (0.15 s, about 45 MiB) are imported only without ADBC."""
    unwanted = {"pandas", "polars"} | ({"pyarrow", "numpy"} if sqlite_arrow._adbc_module() is not None else set())
    assert imported_by_a_run(SAMPLES / "nsys-nvfuser-h200") & unwanted == set()


@pytest.mark.parametrize("sample", ["ncu-a40-julia-csv", "ncu-a40-julia", "snapshot-leak-default",
                                    "hang-2rank-gpu-busy", "health-h100"])
def test_the_readers_that_build_arrow_columns_do_not_import_pandas(sample: str) -> None:
    """pyarrow imports pandas, where installed, to convert a Python value (0.3-0.45 s of a run): the Nsight Compute
    (CSV and report), allocator-snapshot, flight-recorder and telemetry readers build their columns without it
    (tracedoc.ingest.arrow_values)."""
    imported = imported_by_a_run(SAMPLES / sample)
    assert "pyarrow" in imported and imported & {"pandas", "polars"} == set()


def cli_run(args: list[str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`tracedoc ARGS` in a fresh process: what it did, and the top-level modules it had imported by its exit (with
    the number of objects frozen out of the garbage collector then, as 'frozen:' on stderr)."""
    code = ("import atexit, gc, runpy, sys; atexit.register(lambda: sys.stderr.write('\\nfrozen: ' + "
            "str(gc.get_freeze_count()) + '\\nimported: ' + ' '.join(sorted("
            "{m.partition('.')[0] for m in sys.modules})) + '\\n')); sys.argv = ['tracedoc', *sys.argv[1:]]; "
            "runpy.run_module('tracedoc', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True)
    imported = done.stderr.rpartition("imported: ")[2].split()
    return done, set(imported)


def test_a_report_read_back_from_the_cache_does_not_import_duckdb(tmp_path: Path) -> None:
    """A cached re-analysis opens no store: DuckDB's import (about a third of such a run) is left out, in every
    report format; the first run, which analyses, imports it."""
    args = ["analyze", str(SAMPLES / "decode-eager" / "trace.json.gz"), "--cache-dir", str(tmp_path)]
    first, imported = cli_run([*args, "--format", "json"])
    assert first.returncode == 0, first.stderr
    assert imported & {"_duckdb", "duckdb"}
    for fmt in ("json", "md", "text"):
        again, imported = cli_run([*args, "--format", fmt])
        assert again.returncode == 0, again.stderr
        assert imported & {"_duckdb", "duckdb"} == set(), fmt
        if fmt == "json":
            assert again.stdout == first.stdout


def test_a_report_written_off_a_terminal_imports_no_rich(tmp_path: Path) -> None:
    """Rich draws the progress line on a terminal and the text report (about 35 ms of a run's imports); a report
    written as JSON, Markdown or HTML to a pipe or a file, and the line saying where, draw nothing with it: analysed
    or read back from the cache, no Rich is imported; nor by a diff written as JSON."""
    cache = ["--cache-dir", str(tmp_path / "cache")]
    args = ["analyze", str(SAMPLES / "decode-eager" / "trace.json.gz"), *cache]
    diff = ["diff", str(SAMPLES / "decode-eager"), str(SAMPLES / "decode-cudagraph"), *cache, "--format", "json"]
    for run in ([*args, "--format", "json"], [*args, "--format", "json"], [*args, "--format", "md"],
                [*args, "--out", str(tmp_path / "report.md")], [*args, "--out", str(tmp_path / "report.html")], diff):
        done, imported = cli_run(run)
        assert done.returncode == 0, done.stderr
        assert "rich" not in imported, run[3:]
        if "--out" in run:
            assert "report written to" in done.stderr
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert json.loads(done.stdout)["after"]


def test_the_command_line_leaves_its_objects_to_the_exit_without_a_search_for_cycles() -> None:
    """Python's shutdown searched every object left for reference cycles, about 25 ms of every run's CPU: the command
    line freezes them out of the collector as it exits (tracedoc.console)."""
    done, _ = cli_run(["rules", "launch-bound"])
    assert done.returncode == 0, done.stderr
    assert int(done.stderr.rpartition("frozen: ")[2].split()[0]) > 10_000


@pytest.mark.skipif(importlib.util.find_spec("_duckdb") is None, reason="this DuckDB ships no engine module of its own")
def test_a_pytorch_trace_is_analysed_on_the_engine_without_the_duckdb_package() -> None:
    """The duckdb package's Python layer (relations, scans of Arrow objects) took 0.2 s of a small trace's run and
    none of it is used there: the run executes SQL on the compiled engine alone."""
    imported = imported_by_a_run(SAMPLES / "decode-eager")
    assert "_duckdb" in imported
    assert "duckdb" not in imported


@pytest.mark.parametrize("args", [
    ["nsys-cupy-pool"], ["ncu-h100-gemm-naive"], ["hang-2rank-gpu-busy"], ["snapshot-leak-default"],
    ["decode-eager", "--workers", "1"], ["decode-eager", "--format", "perfetto", "--out", "{tmp}/trace.perfetto.json"],
])
def test_what_hands_duckdb_python_objects_works_in_a_fresh_process(args: list[str], tmp_path: Path) -> None:
    """Arrow tables and readers handed to a connection (Nsight Systems, Nsight Compute, flight-recorder and snapshot
    rows, a distributed run's parts) and relations (the Perfetto export) need the duckdb package, which a fresh
    process has not imported: the tests' own process has, so only a fresh one shows a path that forgot to ask."""
    options = [a.format(tmp=tmp_path) for a in args[1:]]
    command = ["analyze", str(SAMPLES / args[0]), "--no-cache", *(options if "--format" in options else
                                                                  [*options, "--format", "json"])]
    done, _ = cli_run(command)
    assert done.returncode in (0, 1), done.stderr
    written = (tmp_path / "trace.perfetto.json").read_text() if "perfetto" in options else done.stdout
    assert json.loads(written)


def test_the_store_opened_for_exploring_has_the_duckdb_package_in_a_fresh_process() -> None:
    """tracedoc.open_store gives its user the duckdb package's connection (relations, Arrow), which tracedoc's own
    runs leave out: in a fresh process, where nothing else imported the package, a relation reads the store as a
    plain statement does."""
    code = ("import sys, tracedoc\n"
            "with tracedoc.open_store(sys.argv[1], use_cache=False) as store:\n"
            "    sql = 'SELECT count(*) FROM gpu_activity'\n"
            "    print(store.con.sql(sql).fetchall()[0][0], store.con.execute(sql).fetchall()[0][0])")
    done = subprocess.run([sys.executable, "-c", code, str(SAMPLES / "decode-eager")], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    as_relation, as_statement = (int(n) for n in done.stdout.split())
    assert as_relation == as_statement > 4000


def included_modules(sample: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The analysis modules one `analyze --no-cache` of ``sample`` runs (on one cursor: each module once)."""
    ran: set[str] = set()
    run = modules.run
    monkeypatch.setattr(store_module, "cores", lambda: 1)
    monkeypatch.setattr(modules, "run", lambda con, module, *a, **k: (ran.add(module), run(con, module, *a, **k)))
    analyze([sample], use_cache=False)
    return ran


TIMELINE_MODULES = {"trace.steps", "trace.window", "gpu.busy"}


@pytest.mark.parametrize(("sample", "timeline_modules"), [
    ("ncu-h100-gemm-cublas", False),  # an Nsight Compute report: the summary reads them as empty tables
    ("hang-2rank-gpu-busy", False),  # flight-recorder dumps
    ("snapshot-leak-default", True),  # an allocator snapshot: its timeline (memory.timeline) includes the steps
    ("health-h100", True),  # GPU health: its throttling (health.throttle) includes the window
    ("decode-eager", True),
])
def test_the_steps_window_and_busy_time_run_only_on_a_timeline_or_for_a_module_that_includes_them(
        sample: str, timeline_modules: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = included_modules(SAMPLES / sample, monkeypatch)
    assert "trace.summary" in ran
    assert ("trace.steps" in ran) is timeline_modules, sorted(ran)
    if not timeline_modules:
        assert not TIMELINE_MODULES & ran, sorted(ran)


@pytest.mark.parametrize(("sample", "searched", "steps"), [
    ("decode-eager", False, "ProfilerStep#N annotations"),  # every source has the profiler's steps
    ("nsys-torch-eager", True, "the host range 'train_step'"),  # none: a repeated user range is found
])
def test_steps_beyond_the_profilers_are_searched_only_where_a_source_has_none(
        sample: str, searched: bool, steps: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """trace.step_search (about 30 ms of planning on a small trace) runs only where it can find steps, and the
    steps are found either way."""
    ran: set[str] = set()
    run = modules.run

    def recorded(con: Any, module: str, *a: Any, **k: Any) -> None:
        ran.add(module)
        run(con, module, *a, **k)

    monkeypatch.setattr(store_module, "cores", lambda: 1)
    monkeypatch.setattr(modules, "run", recorded)
    report = analyze([SAMPLES / sample], use_cache=False)
    assert ("trace.step_search" in ran) is searched, sorted(ran)
    assert "trace.steps" in ran and "trace.launches" in ran
    assert report.to_dict()["window"]["steps"] == steps


def test_a_step_range_on_a_report_without_a_timeline_is_refused_in_one_line() -> None:
    """The steps are not looked for in an Nsight Compute report: a named step range is refused as bad input."""
    done = subprocess.run([sys.executable, "-m", "tracedoc", "analyze", str(SAMPLES / "ncu-h100-gemm-cublas"),
                           "--no-cache", "--step-range", "step"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "--step-range 'step': no host range of that name" in done.stderr
