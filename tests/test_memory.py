"""The memory cap (`--memory-limit`, $TRACEDOC_MEMORY_LIMIT) and the thread count fitted to the work's size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracedoc.api import build_report, input_files, open_store
from tracedoc.cli import cli
from tracedoc.options import AnalysisOptions
from tracedoc.store.memory import MEMORY_LIMIT_ENV_VAR
from tracedoc.store.store import PARALLEL_EVENTS

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def analyze_json(monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[int, dict | None, str]:
    monkeypatch.setenv(MEMORY_LIMIT_ENV_VAR, "")  # restored after the test: the option sets the variable
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "decode-eager"), "--no-cache", "--format", "json",
                                      *extra])
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else None, result.stderr


def test_a_memory_cap_gives_the_same_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode-eager under a 64 MiB cap: the same findings, savings and attribution as without one."""
    code, capped, err = analyze_json(monkeypatch, "--memory-limit", "64M")
    assert code == 0, err
    code, free, err = analyze_json(monkeypatch)
    assert code == 0, err
    assert capped is not None and free is not None
    assert [f["rule"] for f in capped["findings"]] == ["launch-bound", "low-gpu-utilization"]  # eager decode
    for key in ("findings", "attribution", "summary"):
        assert capped[key] == free[key], key


def test_the_cap_reaches_duckdb(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable caps every store opened in the process, and spills go to a directory of the process's own."""
    monkeypatch.setenv(MEMORY_LIMIT_ENV_VAR, "96M")
    store, _ = open_store(input_files(SAMPLES / "input-slow"), None)
    try:
        limit = store.scalar("SELECT current_setting('memory_limit')")
        spill = store.scalar("SELECT current_setting('temp_directory')")
    finally:
        store.close()
    assert limit.replace(" ", "") in {"96.0MiB", "100.6MB"}, limit
    assert Path(spill).name.startswith("tracedoc-spill-") and Path(spill).is_dir()


@pytest.mark.parametrize("option, value", [("--memory-limit", "0"), ("--memory-limit", "lots"), ("env", "1.5G")])
def test_a_bad_cap_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch, option: str, value: str) -> None:
    if option == "env":
        monkeypatch.setenv(MEMORY_LIMIT_ENV_VAR, value)
        result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "input-slow"), "--no-cache"])
    else:
        monkeypatch.setenv(MEMORY_LIMIT_ENV_VAR, "")
        result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "input-slow"), "--no-cache", option, value])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "not a positive byte count" in result.stderr and "Traceback" not in result.stderr


def test_a_cap_too_small_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 MiB cannot hold the JSON reader's buffers: one line that names the cap and how to raise it, exit 2."""
    code, _, err = analyze_json(monkeypatch, "--memory-limit", "8M")
    assert code == 2 and err.count("\n") == 1, err
    assert "out of memory" in err and "the memory cap is 8 MiB" in err and "--memory-limit" in err


def test_a_cap_gets_a_thread_per_32_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of DuckDB's threads holds buffers of its own: on 16 threads the 205 MB trace ran out of memory under
    80 MiB, which 2 to 8 threads held (tracedoc.store.memory). On a machine of 16 cores (pretended), a store gets a
    thread per 32 MiB of its cap, every core without one or under a large one, and one at least; decode-eager is
    read and analysed there under 64 MiB with the diagnosis it has on this machine's cores."""
    import os

    import tracedoc.store.store as store_module
    from tracedoc.limits import Limits
    from tracedoc.store.store import Store

    _, on_this_machine, _ = analyze_json(monkeypatch, "--memory-limit", "64M")
    monkeypatch.setattr(store_module, "cores", lambda: 16)
    monkeypatch.setattr(os, "cpu_count", lambda: 32)  # so that the connection asks DuckDB for what it is given
    for cap, threads in ((100 << 20, 3), (64 << 20, 2), (8 << 20, 1), (1 << 30, 16), (None, 16)):
        with Store.create(None, Limits(memory_bytes=cap)) as store:
            assert store.threads() == threads, cap
    code, on_sixteen, err = analyze_json(monkeypatch, "--memory-limit", "64M")
    assert code == 0, err
    assert on_this_machine is not None and on_sixteen is not None
    for key in ("findings", "attribution", "summary"):
        assert on_sixteen[key] == on_this_machine[key], key


def test_small_stores_are_analysed_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of fewer than PARALLEL_EVENTS events is ingested and analysed on one DuckDB thread."""
    monkeypatch.delenv(MEMORY_LIMIT_ENV_VAR, raising=False)
    store, _ = open_store(input_files(SAMPLES / "decode-eager"), None)
    try:
        assert store.scalar("SELECT sum(event_count) FROM sources") < PARALLEL_EVENTS
        assert store.threads() == 1  # ingest: 0.6 MB on disk
        build_report(store, AnalysisOptions())
        assert store.threads() == 1
    finally:
        store.close()


def test_larger_stores_are_analysed_on_one_thread_per_parallel_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """decode-eager's events, with PARALLEL_EVENTS lowered to a fifth of them (they stand for a store five times
    that size, whose statements want more threads than TWO_CURSORS_UP_TO), on a machine of 4 cores (one cursor:
    tests/test_pool.py has more cores and smaller stores): analysed on 4 threads when 8 are set, and on no more than
    were set."""
    import tracedoc.store.store as store_module

    monkeypatch.delenv(MEMORY_LIMIT_ENV_VAR, raising=False)
    monkeypatch.setattr(store_module, "cores", lambda: 4)
    store, _ = open_store(input_files(SAMPLES / "decode-eager"), None)
    try:
        events = int(store.scalar("SELECT sum(event_count) FROM sources"))
        monkeypatch.setattr(store_module, "PARALLEL_EVENTS", -(-events // 5))
        for before, after in ((8, 4), (3, 3)):
            store.con.execute(f"SET threads = {before}")
            store.fit_threads()
            assert (store.module_workers, store.threads()) == (1, after)
    finally:
        store.close()
