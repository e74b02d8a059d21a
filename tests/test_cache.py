"""The store cache: what killed runs leave is swept, a damaged store is rebuilt, a finished store is flushed before
it is renamed in, and `tracedoc cache` lists, sizes and clears it."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.api import load_report
from tracedoc.cli import cli
from tracedoc.dashboard.source import Loading
from tracedoc.dashboard.target import resolve
from tracedoc.ingest import discover
from tracedoc.options import AnalysisOptions
from tracedoc.store import cache as store_cache

EAGER = SAMPLES / "decode-eager"
COMPILE = SAMPLES / "decode-compile"  # a small PyTorch trace
SMALL = SAMPLES / "hang-size-mismatch"  # flight-recorder dumps: ingested in a fraction of a second


def tiled_trace(path: Path, copies: int) -> Path:
    """The decode-eager sample with its event array repeated ``copies`` times: a real trace that takes seconds to
    ingest (its events repeat; the test needs the time, not new events)."""
    text = gzip.decompress((EAGER / "trace.json.gz").read_bytes()).decode()
    start = text.index("[", text.index('"traceEvents"')) + 1
    end = text.rindex("]")
    path.write_text(text[:start] + ",".join([text[start:end].rstrip()] * copies) + text[end:])
    return path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def wait_for(cache: Path, pattern: str, proc: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """Wait until a file matching ``pattern`` appears in ``cache`` (the run is ingesting)."""
    deadline = time.monotonic() + timeout_s
    while not list(cache.glob(pattern)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no {pattern} in {cache}"
        time.sleep(0.01)


def store_of(cache: Path) -> Path:
    """The one finished store in ``cache``."""
    (store,) = [p for p in cache.glob("*.duckdb") if ".partial-" not in p.name]
    return store


def forget_reports(cache: Path) -> None:
    """Remove the reports kept beside the stores (tracedoc.report_cache), so that the next run opens its store
    rather than reading its report back."""
    for folder in cache.glob("*.reports"):
        shutil.rmtree(folder)


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiled_trace(tmp_path_factory.mktemp("big") / "big.json", copies=12)


def test_a_killed_run_leaves_nothing_for_long(big_trace: Path, tmp_path: Path) -> None:
    """A run killed while ingesting leaves its partial store and work folder; the next run removes the partial store
    (its process is gone) and, once it is an hour old, the work folder."""
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "tracedoc", "analyze", str(big_trace), "--cache-dir", str(cache)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(cache, "tracedoc-ingest-*/*", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = list(cache.glob(f"*.partial-{proc.pid}.duckdb*"))
    (folder,) = cache.glob("tracedoc-ingest-*")
    assert partial

    assert run("analyze", str(SMALL), "--cache-dir", str(cache))[0] == 0
    assert not any(p.exists() for p in partial)
    assert folder.exists(), "a work folder changed minutes ago may belong to a run still going"

    hours_ago = time.time() - 2 * 3600
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (hours_ago, hours_ago))
    assert run("analyze", str(SMALL), "--cache-dir", str(cache))[0] == 0
    assert not folder.exists()
    store = store_of(cache)
    assert sorted(p.name for p in cache.iterdir()) == [store.name, store.with_suffix('.reports').name]


def test_leftovers_of_a_live_run_are_kept(tmp_path: Path) -> None:
    """A partial store whose process still runs (this one), and any work folder beside it, are never swept."""
    cache = tmp_path / "cache"
    cache.mkdir()
    live = cache / f"{'0' * 32}.partial-{os.getpid()}.duckdb"
    live.write_bytes(b"being written")
    folder = cache / "tracedoc-ingest-x1"
    folder.mkdir()
    os.utime(folder, (0, 0))
    assert run("analyze", str(SMALL), "--cache-dir", str(cache))[0] == 0
    assert live.exists() and folder.exists()
    code, out, _ = run("cache", "clear", "--cache-dir", str(cache))
    assert code == 0 and "removed 1 item(s)" in out
    assert live.exists() and folder.exists()


def _not_a_database(path: Path) -> None:
    path.write_text("not a database\n")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _kernel_block_overwritten(path: Path) -> None:
    """Bytes inside the block holding the GPU activity table: the store opens, but reading the kernels fails.
    (DuckDB's layout: 3 header pages of 4 KiB, then blocks of the database's block size.)"""
    with duckdb.connect(str(path), read_only=True) as con:
        (block,) = con.execute("SELECT min(block_id) FROM pragma_storage_info('gpu_activity') "
                               "WHERE block_id >= 0").fetchone()
        block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    with path.open("r+b") as f:
        f.seek(3 * 4096 + block * block_size + 1000)
        f.write(b"\x5a" * 4096)


DAMAGE = {"not a database": _not_a_database, "truncated": _truncated, "kernels overwritten": _kernel_block_overwritten}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_store_is_rebuilt(damage: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    code, first, _ = run("analyze", str(COMPILE), "--cache-dir", str(cache), "--format", "json")
    assert code == 0
    DAMAGE[damage](store_of(cache))
    forget_reports(cache)
    code, out, err = run("analyze", str(COMPILE), "--cache-dir", str(cache), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["findings"] == json.loads(first)["findings"]
    assert len(err.strip().splitlines()) == 1 and "is damaged" in err and "rebuilding it" in err
    code, _, err = run("analyze", str(COMPILE), "--cache-dir", str(cache))
    assert code == 0 and "damaged" not in err


def test_an_error_that_is_not_the_stores_leaves_the_cache_alone(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory cap too small to read the cached store: an error of this run, not a damaged file; the store stays
    (the same file) and the next run without the cap reads it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRACEDOC_MEMORY_LIMIT", "")  # --memory-limit sets it for the process: undone at the end
    assert run("analyze", str(COMPILE), "--cache-dir", str(cache))[0] == 0
    inode = store_of(cache).stat().st_ino
    forget_reports(cache)
    code, _, err = run("analyze", str(COMPILE), "--cache-dir", str(cache), "--memory-limit", "1K")
    assert code == 2 and "Out of Memory" in err and "damaged" not in err
    assert store_of(cache).stat().st_ino == inode
    monkeypatch.delenv("TRACEDOC_MEMORY_LIMIT")
    code, _, err = run("analyze", str(COMPILE), "--cache-dir", str(cache))
    assert code == 0 and "damaged" not in err and store_of(cache).stat().st_ino == inode


def test_serve_rebuilds_a_store_damaged_where_it_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The dashboard loads its store and report with load_report: a store that opens but fails when read is
    rebuilt, and the store it hands on is the sound one."""
    inputs = discover([EAGER])
    options = AnalysisOptions()
    store, report = load_report(inputs, tmp_path, options)
    store.close()
    _kernel_block_overwritten(store_of(tmp_path))
    store, again = load_report(inputs, tmp_path, options)
    with store:
        assert store.scalar("SELECT count(*) FROM gpu_activity") > 4000
    assert [f.rule for f in again.findings] == [f.rule for f in report.findings]
    assert "is damaged" in capsys.readouterr().err


def _timeline_of(loading: Loading) -> tuple[Any, ...]:
    """What the dashboard's timeline found in its store: lanes, time zero, windows, levels, steps, span (the levels
    made from the store on first use: it must be open)."""
    t = loading.timeline
    assert t is not None
    return t.lanes, t.zero_ns, t.windows, t.origins, t.levels, t.steps, t.start_ms, t.end_ms


def test_serve_reads_a_kept_report_and_rebuilds_a_store_damaged_where_the_timeline_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The dashboard keeps the report it analysed beside the store; served again, it reads that report back and only
    opens the store, whose timeline is the one an analysed store gives. A store that is found damaged when the
    timeline reads it is rebuilt and analysed again."""
    first = Loading(resolve([EAGER]), tmp_path)
    first.load()
    assert first.store is not None and first.report is not None
    expected = first.report.to_json(), _timeline_of(first)
    first.store.close()

    def analysed(*args: object, **kwargs: object) -> None:
        raise AssertionError("analysed again")

    with monkeypatch.context() as patched:
        patched.setattr("tracedoc.dashboard.source.load_report", analysed)
        again = Loading(resolve([EAGER]), tmp_path)
        again.load()
    assert again.store is not None and again.report is not None
    assert (again.report.to_json(), _timeline_of(again)) == expected
    again.store.close()
    _kernel_block_overwritten(store_of(tmp_path))
    rebuilt = Loading(resolve([EAGER]), tmp_path)
    rebuilt.load()
    assert rebuilt.store is not None and rebuilt.report is not None
    with rebuilt.store:
        assert rebuilt.store.scalar("SELECT count(*) FROM gpu_activity") > 4000
        assert (rebuilt.report.to_json(), _timeline_of(rebuilt)) == expected
    assert "is damaged" in capsys.readouterr().err


def test_the_finished_store_is_flushed_before_it_is_renamed_in(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(f"fsync {Path(os.readlink(f'/proc/self/fd/{fd}')).name}")
        real_fsync(fd)

    def replace(src: Path, dst: Path) -> None:
        events.append(f"rename {Path(src).name}")
        real_replace(src, dst)

    monkeypatch.setattr(store_cache.os, "fsync", fsync)
    monkeypatch.setattr(store_cache.os, "replace", replace)
    assert run("analyze", str(SMALL), "--cache-dir", str(tmp_path / "cache"))[0] == 0
    events = [e for e in events if not e.endswith(".json")]  # the report kept beside the store (report_cache)
    partial = next(e.split()[1] for e in events if e.startswith("rename"))
    assert events == [f"fsync {partial}", f"rename {partial}", "fsync cache"]


def test_cache_list_size_and_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(cache))
    assert run("analyze", str(SMALL))[0] == 0
    old = store_of(cache)
    assert run("analyze", str(EAGER))[0] == 0
    new = next(p for p in cache.glob("*.duckdb") if p != old)
    days_ago = time.time() - 3 * 86400
    os.utime(old, (days_ago, days_ago))

    code, out, _ = run("cache", "list")
    rows = out.splitlines()
    assert code == 0 and rows[0].split() == ["key", "size", "age", "inputs"]
    assert rows[1].startswith(new.stem) and str(EAGER / "trace.json.gz") in rows[1]
    assert any(line.startswith(old.stem) and "3 d" in line and str(SMALL) in line for line in rows)

    code, out, _ = run("cache", "size")
    total = old.stat().st_size + new.stat().st_size
    assert code == 0 and f"{total / 1e6:.1f} MB in {cache}: 2 store(s)" in out

    assert run("cache", "clear", "--older-than", "2")[0] == 0
    assert not old.exists() and new.exists()
    other = tmp_path / "other"
    assert run("cache", "list", "--cache-dir", str(other))[1].strip() == f"no stores in {other}"
    code, out, _ = run("cache", "clear")
    assert code == 0 and out.startswith("removed 1 item(s)") and list(cache.iterdir()) == []


def test_cache_list_names_a_damaged_store(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert run("analyze", str(SMALL), "--cache-dir", str(cache))[0] == 0
    _truncated(store_of(cache))
    code, out, _ = run("cache", "list", "--cache-dir", str(cache))
    assert code == 0 and "damaged: IO Error" in out
