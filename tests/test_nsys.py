"""Nsight Systems ingest: totals equal `nsys stats`, rule hits agree with `nsys analyze`, schema drift, NVTX,
ranks, privacy and bad input. Runs on .sqlite samples without nsys; the .nsys-rep test needs nsys on PATH."""

from __future__ import annotations

import csv
import json
import lzma
import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.api import open_store
from tracedoc.cli import cli
from tracedoc.cli.options import report_formats
from tracedoc.ingest import discover
from tracedoc.ingest.nsys import memory_cap, nsys, sqlite_arrow
from tracedoc.limits import Limits
from tracedoc.store import Store

TORCH = SAMPLES / "nsys-torch-h100"
NVFUSER = SAMPLES / "nsys-nvfuser-h200" / "report1.sqlite"
TRAIN = SAMPLES / "nsys-fastvideo-train-2gpu" / "mfu_2gpu_before.sqlite"
INFER = SAMPLES / "nsys-fastvideo-infer-2gpu" / "h100_2gpu_1s.sqlite"
SECRET = "hf_s3cr3tT0kenThatMustNeverShow"


@pytest.fixture(scope="module")
def torch_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """The nsys-torch-h100 export, ingested once for the module."""
    store, _ = open_store(discover([TORCH / "sample.sqlite"]), tmp_path_factory.mktemp("nsys-store"))
    with store:
        yield store


def _csv(name: str) -> list[dict[str, str]]:
    with (TORCH / name).open() as f:
        return list(csv.DictReader(f))


def _session_start(export: Path) -> int:
    """When the capture session started, UTC ns: tracedoc's times are the export's plus this."""
    with sqlite3.connect(export) as con:
        return con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]


def _theirs(name: str) -> list[tuple[int, int]]:
    """(start, duration) of each row of an `nsys analyze` CSV, the start on tracedoc's clock (UTC ns)."""
    start = _session_start(TORCH / "sample.sqlite")
    return [(int(r["Start (ns)"]) + start, int(r["Duration (ns)"])) for r in _csv(name)]


def _in_window(store: Store, rows: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The rows that start inside the analysed window, and those that do not."""
    w = store.query("SELECT start_ns, end_ns FROM trace_wall")[0]
    inside = [r for r in rows if w["start_ns"] <= r[0] < w["end_ns"]]
    return inside, [r for r in rows if r not in inside]


def _in_warmup(store: Store, rows: list[tuple[int, int]]) -> bool:
    """Every row starts before the window: in start-up or the warm-up step (step 1 here, 5.7 times the median)."""
    start = store.scalar("SELECT start_ns FROM trace_wall")
    return all(ts < start for ts, _ in rows)


def _api(name: str) -> str:
    """nsys stats' name for a CUDA call: a '_vNNNN' version suffix dropped."""
    return name[:-6] if name[-6:-4] == "_v" and name[-4:].isdigit() else name


# --- totals: exactly what `nsys stats` reports -----------------------------------------------------------------

def test_kernel_totals_match_nsys_stats(torch_store: Store) -> None:
    ours = {r["name"]: r for r in torch_store.query(
        "SELECT name, count(*) AS n, sum(dur_ns) AS total, min(dur_ns) AS lo, max(dur_ns) AS hi, "
        "median(dur_ns) AS med FROM gpu_activity WHERE kind = 'kernel' GROUP BY name")}
    theirs = _csv("stats_cuda_gpu_kern_sum.csv")
    assert len(theirs) == len(ours) == 8
    for row in theirs:
        got = ours[row["Name"]]
        assert (got["n"], got["total"], got["lo"], got["hi"]) == (
            int(row["Instances"]), int(row["Total Time (ns)"]), int(row["Min (ns)"]), int(row["Max (ns)"]))
        assert float(got["med"]) == float(row["Med (ns)"])


def test_api_totals_match_nsys_stats(torch_store: Store) -> None:
    ours = {r["name"]: r for r in torch_store.query(
        "SELECT name, count(*) AS n, sum(dur_ns) AS total, min(dur_ns) AS lo, max(dur_ns) AS hi "
        "FROM cpu_activity WHERE kind IN ('runtime', 'driver') GROUP BY name")}
    theirs = _csv("stats_cuda_api_sum.csv")
    assert {r["Name"] for r in theirs} == set(ours)
    for row in theirs:
        got = ours[row["Name"]]
        assert (got["n"], got["total"], got["lo"], got["hi"]) == (
            int(row["Num Calls"]), int(row["Total Time (ns)"]), int(row["Min (ns)"]), int(row["Max (ns)"]))


def test_memory_totals_match_nsys_stats(torch_store: Store) -> None:
    operation = {"HtoD": "[CUDA memcpy Host-to-Device]", "DtoH": "[CUDA memcpy Device-to-Host]",
                 "DtoD": "[CUDA memcpy Device-to-Device]"}
    ours = {("[CUDA memset]" if r["kind"] == "memset" else operation[r["copy_kind"]]): r for r in torch_store.query(
        "SELECT kind, copy_kind, count(*) AS n, sum(dur_ns) AS total, min(dur_ns) AS lo, max(dur_ns) AS hi "
        "FROM gpu_activity WHERE kind IN ('memcpy', 'memset') GROUP BY kind, copy_kind")}
    theirs = _csv("stats_cuda_gpu_mem_time_sum.csv")
    assert {r["Operation"] for r in theirs} == set(ours)
    for row in theirs:
        got = ours[row["Operation"]]
        assert (got["n"], got["total"], got["lo"], got["hi"]) == (
            int(row["Count"]), int(row["Total Time (ns)"]), int(row["Min (ns)"]), int(row["Max (ns)"]))


# --- rule hits: what `nsys analyze` reports --------------------------------------------------------------------

# nsys analyze judges the whole capture; tracedoc its steady steps (step 1 of the sample is a warm-up step: 528 ms
# against a median of 93 ms, its GPU work 376 ms against 15). What nsys finds inside that window, tracedoc finds to
# the nanosecond; what it finds outside lies in the warm-up step.

def test_gpu_gaps_equal_nsys_gpu_gaps(torch_store: Store) -> None:
    torch_store.include("gpu.gaps")
    ours = torch_store.query("SELECT ts_ns, dur_ns FROM gpu_gaps_all WHERE dur_ns >= 500e6 ORDER BY ts_ns")
    assert [(r["ts_ns"], r["dur_ns"]) for r in ours] == _theirs("analyze_gpu_gaps.csv")


def test_sync_copies_and_memsets_equal_nsys(torch_store: Store) -> None:
    torch_store.include("host.blocking")
    for kind, name in (("memcpy", "analyze_cuda_memcpy_sync.csv"), ("memset", "analyze_cuda_memset_sync.csv")):
        ours = torch_store.query(f"""
            SELECT a.ts_ns, a.dur_ns FROM host_blocking_calls b
            JOIN cpu_activity c ON c.ts_ns = b.ts_ns AND c.name = b.call
            JOIN gpu_activity a ON a.correlation_id = c.correlation_id AND a.kind = '{kind}'
            WHERE b.kind = '{kind}' ORDER BY a.dur_ns DESC""")
        assert [(r["ts_ns"], r["dur_ns"]) for r in ours] == _theirs(name), kind


def test_pageable_async_copies_equal_nsys(torch_store: Store) -> None:
    ours = torch_store.query("""
        SELECT a.ts_ns, a.dur_ns FROM gpu_activity a
        JOIN cpu_activity c ON c.correlation_id = a.correlation_id AND c.kind = 'runtime'
        WHERE a.kind = 'memcpy' AND a.host_memory = 'pageable' AND c.name LIKE 'cudaMemcpy%Async%'
        ORDER BY a.dur_ns DESC""")
    assert [(r["ts_ns"], r["dur_ns"]) for r in ours] == _theirs("analyze_cuda_memcpy_async.csv")
    torch_store.include("host.memcpy")
    inside, outside = _in_window(torch_store, _theirs("analyze_cuda_memcpy_async.csv"))
    assert len(inside) == 10 and len(outside) == 2 and _in_warmup(torch_store, outside)  # 5 steady steps, 2 each
    assert torch_store.scalar("SELECT sum(copy_count) FROM host_copies_by_rank WHERE host_memory = 'pageable'") \
        == len(inside) + 2  # and the two synchronous pageable copies of step 4's checkpoint


def test_sync_calls_equal_nsys_cuda_api_sync(torch_store: Store) -> None:
    """host.sync sees every call nsys lists; host-sync does not fire here because it judges by the GPU idle the
    calls cause (under 2 % of the window), where nsys lists every call without a cost."""
    torch_store.include("host.sync")
    ours = torch_store.query("SELECT ts_ns, dur_ns FROM host_sync_calls WHERE call IN "
                             "('cudaStreamSynchronize', 'cudaDeviceSynchronize') ORDER BY dur_ns DESC, ts_ns")
    theirs = sorted(_theirs("analyze_cuda_api_sync.csv"), key=lambda t: (-t[1], t[0]))
    inside, outside = _in_window(torch_store, theirs)
    assert [(r["ts_ns"], r["dur_ns"]) for r in ours] == inside
    assert len(outside) == 4 and _in_warmup(torch_store, outside)
    assert torch_store.scalar("SELECT gpu_idle_pct FROM host_sync_by_rank") < 2


def test_low_utilization_covers_nsys_region(torch_store: Store) -> None:
    """nsys: one merged region of all 30 chunks of the capture's GPU span, 2.9 % in use (a sum of durations);
    tracedoc: 30 chunks of the analysed window (the steady steps, inside nsys's region; what the busy share is of),
    all under 50 % busy (a union)."""
    (row,) = _csv("analyze_gpu_time_util.csv")
    region = (int(row["Start (ns)"]) + _session_start(TORCH / "sample.sqlite"), int(row["Duration (ns)"]))
    torch_store.include("gpu.utilization")
    chunks = torch_store.query("SELECT ts_ns, dur_ns, busy_pct FROM gpu_utilization_chunks(30) ORDER BY ts_ns")
    window = torch_store.query("SELECT start_ns, end_ns FROM trace_windows")[0]
    assert len(chunks) == 30 and all(c["busy_pct"] < 50 for c in chunks)
    assert region[0] < window["start_ns"] == chunks[0]["ts_ns"] < region[0] + region[1]
    assert chunks[-1]["ts_ns"] + chunks[-1]["dur_ns"] >= window["end_ns"]
    span_busy = sum(c["busy_pct"] * c["dur_ns"] for c in chunks) / sum(c["dur_ns"] for c in chunks)
    assert 0 < span_busy < float(row["In-Use (%)"]) + 1


def test_report_on_torch_sample_names_the_nvtx_range() -> None:
    report = analyze([TORCH])
    by_rule = {f.rule: f for f in report.findings}
    assert {"pageable-memcpy", "sync-memcpy", "sync-memset", "gpu-gaps", "low-gpu-utilization"} <= set(by_rule)
    gaps = by_rule["gpu-gaps"]
    evidence = {e.name: e.value for e in gaps.evidence}
    assert evidence["longest gap"] == pytest.approx(652.404, abs=0.001)
    assert evidence["host annotation over the longest gap"] == "checkpoint"
    # The gap's time is the host-bound idle's already: counted there once, the gap finding says so.
    idle = by_rule["gpu-idle-host-bound"]
    assert gaps.impact_ms == 0 and report.findings[gaps.part_of - 1] is idle
    assert "Most idle time falls in NVTX range 'checkpoint': 100% of the GPU time there is idle (1,092.9 ms)." \
        in idle.message
    assert {e.name: e.value for e in idle.evidence}["NVTX range with the most idle GPU time"] == "checkpoint"


def test_gpu_gaps_threshold_is_configurable() -> None:
    fired = {f.rule for f in analyze([NVFUSER]).findings}
    assert "gpu-gaps" not in fired  # longest gap 397 ms
    lowered = analyze([NVFUSER], thresholds={"gpu-gaps": {"min_gap_ms": 100}})
    (gap,) = [f for f in lowered.findings if f.rule == "gpu-gaps"]
    assert {e.name: e.value for e in gap.evidence}["longest gap"] == pytest.approx(396.816, abs=0.001)


# --- mapping and schema drift -----------------------------------------------------------------------------------

def test_mapping_of_the_torch_export(torch_store: Store) -> None:
    s = torch_store
    assert s.scalar("SELECT tool FROM sources") == "Nsight Systems 2025.3.2.0, export schema 3.20.3"
    gemm = s.query("SELECT grid, block, registers_per_thread, shared_memory_bytes FROM gpu_activity "
                   "WHERE name LIKE 'sm80_xmma_gemm%' LIMIT 1")[0]
    assert gemm["grid"].count(",") == 2 and gemm["registers_per_thread"] > 0 and gemm["shared_memory_bytes"] > 0
    assert s.scalar("SELECT count(*) FROM gpu_activity WHERE kind = 'memset' AND host_memory = 'managed'") == 1
    assert s.scalar("SELECT count(*) FROM gpu_activity WHERE name = 'Sync (cudaStreamSynchronize)'") == 18
    assert s.scalar("SELECT count(*) FROM cpu_activity WHERE kind = 'os'") > 1000
    window = s.query("SELECT min(ts_ns) AS a, max(ts_ns + dur_ns) AS b FROM cpu_activity WHERE kind = 'os'")[0]
    api = s.query("SELECT min(ts_ns) AS a FROM cpu_activity WHERE kind IN ('runtime', 'driver')")[0]
    assert window["a"] >= api["a"]  # OS calls clipped to the CUDA/NVTX span
    assert s.scalar("SELECT count(*) FROM nsys_threads WHERE process_name = 'python3'") >= 1
    assert s.query("SELECT name, kind, depth FROM nvtx_ranges WHERE name IN ('epoch', 'checkpoint') "
                   "ORDER BY name") == [{"name": "checkpoint", "kind": "push_pop", "depth": 2},
                                        {"name": "epoch", "kind": "start_end", "depth": 0}]
    assert s.query("SELECT name FROM devices") == [{"name": "NVIDIA H100 80GB HBM3"}]


def test_nvtx_projection_attributes_gpu_work(torch_store: Store) -> None:
    torch_store.include("nvtx.projection")
    by_range = {r["range_name"]: r for r in torch_store.query("SELECT * FROM nvtx_range_gpu_time")}
    assert by_range["forward"]["activity_count"] == 5 * 16  # 8 matmuls + 8 tanh per step, 5 steady steps
    assert by_range["optimizer"]["activity_count"] == 5 * 200
    # The work is kept summed per device and range, not a row per work item (a million on a long export).
    assert torch_store.scalar("SELECT count(*) FROM nvtx_range_work") == torch_store.scalar(
        "SELECT count(DISTINCT (source_id, device, range_id)) FROM nvtx_range_work")
    assert torch_store.scalar("SELECT sum(activity_count) FROM nvtx_range_work") == sum(
        row["activity_count"] for row in by_range.values())
    # A gap's idle time goes to the ranges the host was in during it, by overlap: the 470 ms gap that starts 6 µs
    # before the last step's 'optimizer' ends lies in 'checkpoint' (1,094 ms), which holds the idle, not 'optimizer'
    # (49.6 ms in all), and no range holds more idle than its ranges last.
    [(start, end)] = torch_store.con.execute("SELECT ts_ns, ts_ns + dur_ns FROM nvtx_ranges "
                                             "WHERE name = 'checkpoint'").fetchall()
    gaps = torch_store.con.execute("SELECT ts_ns, end_ns FROM gpu_idle_gaps WHERE device = 0").fetchall()
    overlap = sum(max(0, min(end, e) - max(start, s)) for s, e in gaps)
    assert overlap > 1_000e6 and by_range["checkpoint"]["idle_ns"] == overlap
    lasted = dict(torch_store.con.execute("SELECT name, sum(dur_ns) FROM nvtx_ranges GROUP BY name").fetchall())
    assert all(row["idle_ns"] <= lasted[name] for name, row in by_range.items())
    assert by_range["optimizer"]["idle_ns"] < 50e6


def test_old_and_new_schemas_load(tmp_path: Path) -> None:
    """2024.6 (schema 3.16.1, TARGET_INFO_GPU) and 2026.2 (3.25.0, no GPU table, NVTX as registered strings)."""
    old = analyze([NVFUSER])
    assert old.inputs[0].format == "nsys" and old.inputs[0].events == 1642
    with Store.create(tmp_path / "store.duckdb") as store:
        nsys.load(store, 0, TRAIN, tmp_path)
        assert store.scalar("SELECT count(*) FROM gpu_activity WHERE category = 'communication'") == 66
        assert store.scalar("SELECT count(DISTINCT collective) FROM gpu_activity WHERE category = 'communication'") == 1
        assert store.scalar("SELECT count(*) FROM nvtx_ranges WHERE name = 'ncclSend' AND domain_id = 1") == 132
        assert store.scalar("SELECT count(*) FROM cpu_activity WHERE kind = 'op' AND name = 'aten::empty'") > 0
        assert store.query("SELECT device, name FROM devices ORDER BY device") == [
            {"device": 0, "name": None}, {"device": 1, "name": None}]


def test_a_large_export_is_read_under_a_cap_fitted_to_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An export counted as large (the threshold lowered to take the sample) is read and analysed under a DuckDB
    memory cap fitted to its size, the store made and the store opened from the cache alike, and concludes what it
    does without the cap; a cap the run sets is left as it is, and a small export gets none. A compressed export
    or an .nsys-rep gets none either: the export read from it is larger than the file by an amount not known
    beforehand (this xz export unpacks to 6x its size). On 16 cores the cap is 32 MiB a core (512 MiB): DuckDB runs a
    thread per core, each with buffers of its own, and on 16 threads the 199 MB export ran out of memory under
    the 192 MiB fitted to its size (docs/speed-history.md)."""
    export = TORCH / "sample.sqlite"
    size = export.stat().st_size
    inputs = discover([export])
    assert memory_cap.fitted_limits(Limits(), inputs) == Limits()  # 1.5 MB: under the threshold
    uncapped = analyze([export], use_cache=False).to_dict()
    monkeypatch.setattr(memory_cap, "FITTED_MEMORY_FROM_BYTES", 0)
    monkeypatch.setattr(memory_cap, "cores", lambda: 16)  # a thread per core, each given 32 MiB
    assert memory_cap.fitted_limits(Limits(), inputs) == Limits(memory_bytes=16 << 25)
    monkeypatch.setattr(memory_cap, "cores", lambda: 2)
    cap = max(memory_cap.FITTED_MEMORY_FLOOR_BYTES, memory_cap.MEMORY_PER_EXPORT_BYTE * size)
    assert memory_cap.fitted_limits(Limits(), inputs) == Limits(memory_bytes=cap)
    assert memory_cap.fitted_limits(Limits(memory_bytes=1 << 30), inputs) == Limits(memory_bytes=1 << 30)
    report = tmp_path / "sample.nsys-rep"
    report.write_bytes(lzma.decompress((TORCH / "sample.nsys-rep.xz").read_bytes()))
    others = discover([SAMPLES / "decode-eager", report, TORCH / "sample.nsys-rep.xz", SAMPLES / "nsys-cupy-pool"])
    assert [(i.format, i.compression) for i in others] == [("torch", "gzip"), ("nsys", None), ("nsys", "xz"),
                                                           ("nsys", "xz")]
    assert memory_cap.fitted_limits(Limits(), others) == Limits()
    for cached in (False, True):  # built now, then opened from the cache
        store, from_cache = open_store(discover([export]), tmp_path / "cache")
        with store:
            assert from_cache == cached and store.limits.memory_bytes == cap
            assert store.scalar("SELECT current_setting('memory_limit')") == f"{cap / (1 << 20):.1f} MiB"
    capped = analyze([export], use_cache=False).to_dict()
    assert capped["findings"] == uncapped["findings"] and capped["metrics"] == uncapped["metrics"]


def test_running_out_of_memory_while_reading_an_export_says_which_cap_to_raise() -> None:
    """Under a cap too small for the export's rows DuckDB runs out of memory: the run says so and names the cap to
    raise (exit 2), where it said "malformed Nsight Systems export"."""
    result = CliRunner().invoke(cli, ["analyze", str(TORCH / "sample.sqlite"), "--no-cache", "--memory-limit", "8M"])
    assert result.exit_code == 2, result.output
    assert "out of memory while reading the export" in result.output and "malformed" not in result.output
    assert "the memory cap is 8 MiB: a larger --memory-limit" in result.output


def test_no_temp_table_of_the_export_outlives_its_load(tmp_path: Path) -> None:
    """The export's tables and views (``_ns_*``) are dropped once it is in the store."""
    with Store.create(None) as store:
        nsys.load(store, 0, TORCH / "sample.sqlite", tmp_path)
        assert store.scalar("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE '\\_ns\\_%' ESCAPE '\\'") == 0
        assert store.scalar("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '\\_ns\\_%' ESCAPE '\\'") == 0
        assert store.scalar("SELECT min(ts_ns) FROM gpu_activity") > _session_start(TORCH / "sample.sqlite")
        assert store.scalar("SELECT count(*) FROM duckdb_databases() WHERE database_name LIKE '\\_nsys%' "
                            "ESCAPE '\\'") == 0


def test_tables_read_at_once_give_the_rows_read_one_at_a_time(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """The export's tables read each on a cursor of its own (as many as DuckDB's threads) land in the store as
    they do read one after the other on the store's connection."""
    if sqlite_arrow._adbc_module() is None:
        pytest.skip("ADBC's SQLite driver is not installed: the tables are read one at a time")

    def rows(reads: int) -> dict[str, list[tuple]]:
        monkeypatch.setattr(nsys, "_MAX_READS", reads)
        with Store.create(None) as store:
            store.con.execute("SET threads = 4")
            nsys.load(store, 0, TORCH / "sample.sqlite", tmp_path)
            return {table: store.con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
                    for table in ("gpu_activity", "cpu_activity", "nvtx_ranges", "devices", "nsys_threads")}

    at_once, one_at_a_time = rows(4), rows(1)
    assert at_once["gpu_activity"] and at_once["cpu_activity"] and at_once["nvtx_ranges"]
    assert at_once == one_at_a_time


def test_sqlite3_fallback_reads_the_same(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if sqlite_arrow._adbc_module() is None:
        pytest.skip("ADBC's SQLite driver is not installed: every test already uses the fallback")
    with_adbc = analyze([INFER], cache_dir=tmp_path / "a").to_dict()
    monkeypatch.setattr(sqlite_arrow, "_adbc_module", lambda: None)
    without = analyze([INFER], cache_dir=tmp_path / "b").to_dict()
    assert with_adbc["metrics"] == without["metrics"] and with_adbc["inputs"] == without["inputs"]


def _edited_export(tmp_path: Path, *statements: str | tuple[str, tuple]) -> Path:
    """A copy of the sample export with ``statements`` (SQL, or SQL and its parameters) run on it."""
    edited = tmp_path / f"edited-{len(list(tmp_path.glob('edited-*')))}.sqlite"
    shutil.copyfile(TORCH / "sample.sqlite", edited)
    con = sqlite3.connect(edited)
    for statement in statements:
        sql, params = statement if isinstance(statement, tuple) else (statement, ())
        con.execute(sql, params)
    con.commit()
    con.close()
    return edited


def _untyped(table: str) -> tuple[str, ...]:
    """Statements that make ``table`` again with columns without a declared type, where SQLite keeps each value as
    it is given (an INTEGER column would turn the text '7' into the integer 7), its rows in their order."""
    con = sqlite3.connect(TORCH / "sample.sqlite")
    names = ", ".join(f'"{r[1]}"' for r in con.execute(f"PRAGMA table_info({table})"))
    con.close()
    return (f"CREATE TABLE _copy ({names})", f"INSERT INTO _copy SELECT {names} FROM {table} ORDER BY rowid",
            f"DROP TABLE {table}", f"ALTER TABLE _copy RENAME TO {table}")


def _read(export: Path, tmp_path: Path, sql: str) -> list[tuple]:
    """``sql``'s rows on a store that holds ``export`` alone."""
    with Store.create(None) as store:
        nsys.load(store, 0, export, tmp_path)
        return store.con.execute(sql).fetchall()


_RUNTIME_READ = "SELECT count(*), sum(tid), sum(dur_ns), sum(ts_ns) FROM cpu_activity WHERE kind = 'runtime'"
_FIRST_CALL = "rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME)"


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize(("value", "row"), [("12,13", "min"), ("12\n1,2,3,4,5", "min"), (1.5, "min"), ("x", "min"),
                                            (1.5, "max"), ("x", "max")])
def test_a_non_integer_in_an_integer_column_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: object,
                                                      row: str, reader: str) -> None:
    """An edited copy of the export: a value that is text with a comma or a line break (which the sqlite3 reader's
    CSV would read as another field or row), a fraction or a word in an integer column, in its first row (in the
    batch ADBC types the column from) or its last (in a later batch: batches of 64 rows here), fails the read (exit
    2) with either reader, instead of shifting, rounding or adding rows."""
    if reader == "adbc" and sqlite_arrow._adbc_module() is None:
        pytest.skip("ADBC's SQLite driver is not installed")
    if row == "max":
        monkeypatch.setattr(sqlite_arrow, "_BATCH_ROWS", 64)
    edited = _edited_export(tmp_path, (f"UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = ? WHERE rowid = "
                                       f"(SELECT {row}(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME)", (value,)))
    if reader == "sqlite3":
        monkeypatch.setattr(sqlite_arrow, "_adbc_module", lambda: None)
    _fails_with(edited, "malformed Nsight Systems export")


def test_whole_numbers_stored_as_text_read_as_integers_and_floats_are_refused(tmp_path: Path) -> None:
    """Edited copies of the export whose CUDA calls' table has columns without a type. The first call's thread id
    stored as text: ADBC types the column from that row as text, and the export reads as the unedited one does. Its
    end stored as a float: ADBC makes every value of the batch a float, which beyond 2^53 is no longer the integer
    stored (a time on the UTC clock is about 1.8e18), so the read fails (exit 2)."""
    untyped = _untyped("CUPTI_ACTIVITY_KIND_RUNTIME")
    as_text = _edited_export(tmp_path, *untyped, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME "
                             f"SET globalTid = CAST(globalTid AS TEXT) WHERE {_FIRST_CALL}")
    as_is = _edited_export(tmp_path, *untyped)
    read = _read(as_is, tmp_path, _RUNTIME_READ)
    assert _read(as_text, tmp_path, _RUNTIME_READ) == read and read[0][0] > 1000
    _fails_with(_edited_export(tmp_path, *untyped,
                            f'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = CAST("end" AS REAL) WHERE {_FIRST_CALL}'),
             "malformed Nsight Systems export")


def test_a_name_stored_as_a_blob_reads_as_its_text(tmp_path: Path) -> None:
    """An edited copy of the export with a kernel's name stored as a blob (its UTF-8 bytes) and another's name not
    ASCII: ADBC types the names' column as blobs, and both names read as their text, not as escaped bytes."""
    names = "SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY demangledName LIMIT 1 OFFSET ?"
    edited = _edited_export(tmp_path, (f"UPDATE StringIds SET value = CAST(? AS BLOB) WHERE id = ({names})",
                                       (b"kernel_blob", 0)),
                            (f"UPDATE StringIds SET value = ? WHERE id = ({names})", ("kernel_café", 1)))
    read = _read(edited, tmp_path, "SELECT DISTINCT name FROM gpu_activity WHERE name LIKE 'kernel\\_%' ESCAPE '\\'")
    assert sorted(n for (n,) in read) == ["kernel_blob", "kernel_café"]


def test_a_string_id_given_twice_is_refused(tmp_path: Path) -> None:
    """An edited copy of the export whose StringIds, made again without its key, holds a kernel's name twice: each
    kernel named by it would count twice (1,090 compute kernels read as 2,135), so the export is refused (exit 2)."""
    con = sqlite3.connect(TORCH / "sample.sqlite")
    named = con.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    con.close()
    edited = _edited_export(tmp_path, *_untyped("StringIds"),
                            ("INSERT INTO StringIds SELECT id, value FROM StringIds WHERE id = ?", (named,)))
    _fails_with(edited, f"string id {named} appears more than once")


def test_a_very_long_name_is_cut_and_stays_distinct(tmp_path: Path) -> None:
    """An edited copy of the export whose two kernel names are 200,000 characters long and differ in their last
    one: every kernel row gets a copy of its name, so one name of 10 MB took the analyses to 7.8 GB for an 11.5 MB
    file. Names over 16,384 characters are cut to 16,000 and a hash of the whole: bounded, and still two names."""
    edited = _edited_export(tmp_path, *(
        (f"UPDATE StringIds SET value = ? WHERE id = (SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
         f"ORDER BY demangledName LIMIT 1 OFFSET {n})", ("k" * 199_999 + last,)) for n, last in enumerate("AB")))
    long_names = _read(edited, tmp_path, "SELECT DISTINCT name FROM gpu_activity WHERE name LIKE 'kkkk%'")
    assert len(long_names) == 2
    assert all(len(n) == 16000 + 1 + 32 and n.startswith("k" * 16000 + "…") for (n,) in long_names)


def test_generated_columns_are_read(tmp_path: Path) -> None:
    """An edited copy of the export whose kernels' start is a generated column (SQLite's table_info leaves those
    out, and the column read as missing dropped every kernel): the kernels read as in the unedited export."""
    con = sqlite3.connect(TORCH / "sample.sqlite")
    cols = [(r[1], r[2]) for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    con.close()
    defs = ", ".join(f'"{n}" {t}' if n != "start" else '"start" INTEGER GENERATED ALWAYS AS ("end" - duration_ns)'
                     for n, t in cols)
    kept = ", ".join(f'"{n}"' for n, _ in cols if n != "start")
    edited = _edited_export(tmp_path, f"CREATE TABLE kernels ({defs}, duration_ns INTEGER)",
                            f'INSERT INTO kernels ({kept}, duration_ns) SELECT {kept}, "end" - start '
                            "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid",
                            "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL",
                            "ALTER TABLE kernels RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    kernels = "SELECT count(*), sum(ts_ns), sum(dur_ns) FROM gpu_activity WHERE kind = 'kernel'"
    read = _read(TORCH / "sample.sqlite", tmp_path, kernels)
    assert _read(edited, tmp_path, kernels) == read and read[0][0] > 1000


def test_a_damaged_schema_that_is_not_utf8_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """An edited copy of the export whose schema names a table in bytes that are not UTF-8, its definition cut
    short: SQLite's error quotes the name, which Python's sqlite3 fails to decode (UnicodeDecodeError, not an
    sqlite3 error). The run says the file is unreadable, naming it (exit 2)."""
    edited = _edited_export(tmp_path, "PRAGMA writable_schema = ON",
                            "UPDATE sqlite_master SET name = CAST(X'414EC953' AS TEXT), sql = 'CREATE TABLE broken(' "
                            "WHERE name = 'ThreadNames'")
    _fails_with(edited, f"{edited}: unreadable SQLite database")


def test_one_export_of_two_processes_is_two_ranks() -> None:
    """The FastVideo capture holds both torchrun workers in one export: each process is a rank, numbered by the
    GPU it ran on, and comm.overlap runs per rank (each rank's NCCL kernels share its compute stream: 0 %)."""
    report = analyze([TRAIN])
    assert [(i.rank, i.path) for i in report.inputs] == [(0, str(TRAIN)), (1, str(TRAIN))]
    assert report.summary["ranks"] == 2 and report.input_count == 1
    overlap = {(r["rank"], r["device"]): r for r in report.metrics["comm_overlap"]}
    assert set(overlap) == {(0, 0), (1, 1)} and all(r["overlap_ms"] == 0 for r in overlap.values())


# --- privacy: the environment the export keeps never leaves it --------------------------------------------------

def test_environment_variables_never_reach_store_or_report(tmp_path: Path) -> None:
    planted = tmp_path / "planted.sqlite"
    shutil.copyfile(TORCH / "sample.sqlite", planted)
    con = sqlite3.connect(planted)
    con.execute("INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)",
                (f'HF_TOKEN="{SECRET}"',))
    con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'DeviceEnvironment'", (SECRET,))
    assert con.total_changes == 2
    con.commit()
    con.close()
    cache = tmp_path / "cache"
    runner = CliRunner()
    for fmt in sorted(report_formats()):  # the renderers' and the exports' (the Perfetto trace)
        result = runner.invoke(cli, ["analyze", str(planted), "--format", fmt, "--cache-dir", str(cache)])
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
    stores = list(cache.glob("*.duckdb"))
    assert stores and all(SECRET.encode() not in p.read_bytes() for p in stores)


# --- bad input: exit code 2 and one line ------------------------------------------------------------------------

def _fails_with(path: Path, *needles: str) -> None:
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    for needle in needles:
        assert needle in lines[0]


def test_truncated_export(tmp_path: Path) -> None:
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes((TORCH / "sample.sqlite").read_bytes()[:300_000])
    _fails_with(cut, "truncated SQLite database")


def test_corrupt_export(tmp_path: Path) -> None:
    data = bytearray((TORCH / "sample.sqlite").read_bytes())
    data[200_000:400_000] = b"\xff" * 200_000
    bad = tmp_path / "corrupt.sqlite"
    bad.write_bytes(bytes(data))
    _fails_with(bad, str(bad))


def test_sqlite_that_is_not_an_export(tmp_path: Path) -> None:
    other = tmp_path / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    _fails_with(other, "not a trace format")


EXPORTS = Path(__file__).parent / "data" / "nsys-exports"
NSYS_HINT = "give tracedoc the .nsys-rep or its SQLite export (nsys export --type sqlite REPORT.nsys-rep)"


@pytest.mark.parametrize(("path", "said"), [
    (EXPORTS / "sample.json", "Nsight Systems' export as JSON (nsys export --type json)"),
    (EXPORTS / "sample.txt", "Nsight Systems' export as text (nsys export --type text)"),
    (EXPORTS / "parquetdir", "Nsight Systems' export as a folder of tables (nsys export --type parquetdir)"),
    (EXPORTS / "arrowdir", "Nsight Systems' export as a folder of tables (nsys export --type arrowdir)"),
    *((TORCH / name, "a summary printed by nsys stats or nsys analyze")
      for name in ("stats_cuda_api_sum.csv", "stats_cuda_gpu_kern_sum.csv", "stats_cuda_gpu_mem_time_sum.csv",
                   "analyze_gpu_gaps.csv", "analyze_gpu_time_util.csv", "analyze_cuda_memcpy_async.csv",
                   "analyze.txt")),
    (EXPORTS / "nsys_stats_stdout.txt", "a summary printed by nsys stats or nsys analyze"),
])
def test_what_nsys_writes_besides_its_sqlite_export_is_named(path: Path, said: str) -> None:
    """nsys-torch-h100's report exported as JSON, text, Parquet and Arrow (the first lines or one table of each:
    tests/data/nsys-exports/SOURCE.md), and what nsys stats and nsys analyze said about it: one line that names it
    and what to give tracedoc instead, where each was 'not a trace format' or 'no trace files found'."""
    _fails_with(path, f"{path}: this is {said}, which tracedoc does not read; {NSYS_HINT}")


def test_a_csv_of_times_in_ns_is_not_named_as_nsys(tmp_path: Path) -> None:
    """A CSV of one's own whose columns are times in ns is not called a summary of nsys stats: only the first
    columns nsys's tables start with are."""
    own = tmp_path / "times.csv"
    own.write_text("Start (ns),End (ns),kernel\n1,2,gemm\n")
    _fails_with(own, "not a trace format tracedoc reads")


def test_export_without_events(tmp_path: Path) -> None:
    empty = tmp_path / "empty-export.sqlite"
    con = sqlite3.connect(empty)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, \"end\" INTEGER, deviceId INTEGER)")
    con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    con.commit()
    con.close()
    _fails_with(empty, "holds no CUDA")


def test_report_without_nsys_says_how_to_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(lzma.decompress((TORCH / "sample.nsys-rep.xz").read_bytes()))
    monkeypatch.setenv("PATH", str(tmp_path))
    _fails_with(rep, f"nsys export --type sqlite --output {tmp_path / 'run.sqlite'} {rep}")


def test_compressed_report_without_nsys_says_to_unpack_it_first(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled sample.nsys-rep.xz without nsys: the command said was nsys export of the .xz file (which nsys
    cannot read), its output in tracedoc's temporary directory."""
    rep = tmp_path / "run.nsys-rep.xz"
    shutil.copyfile(TORCH / "sample.nsys-rep.xz", rep)
    monkeypatch.setenv("PATH", str(tmp_path))
    _fails_with(rep, f"{rep}: reading an .nsys-rep needs Nsight Systems' nsys on PATH; unpack it (unxz -k or "
                     "gunzip -k), export it (nsys export --type sqlite REPORT.nsys-rep) and analyse the .sqlite "
                     "instead")


@pytest.mark.skipif(shutil.which("nsys") is None, reason="needs Nsight Systems' nsys on PATH")
def test_report_is_exported_and_analysed(tmp_path: Path) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(lzma.decompress((TORCH / "sample.nsys-rep.xz").read_bytes()))
    result = CliRunner().invoke(cli, ["analyze", str(rep), "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["inputs"][0]["format"] == "nsys"
    fired = {f["rule"] for f in report["findings"]}
    assert {"pageable-memcpy", "sync-memcpy", "sync-memset", "gpu-gaps"} <= fired
    assert not list(tmp_path.glob("*.sqlite"))  # the export went to the work directory, not beside the report


def test_report_beside_its_export_is_read_once(tmp_path: Path) -> None:
    """`nsys stats` leaves run.sqlite beside run.nsys-rep: a directory holding both is one rank, read from the
    export (no nsys needed)."""
    (tmp_path / "run.nsys-rep").write_bytes(lzma.decompress((TORCH / "sample.nsys-rep.xz").read_bytes()))
    shutil.copyfile(TORCH / "sample.sqlite", tmp_path / "run.sqlite")
    report = analyze([tmp_path], use_cache=False)
    assert [(Path(i.path).name, i.rank) for i in report.inputs] == [("run.sqlite", 0)]


def test_every_analysis_runs_on_nsys_input(tmp_path: Path) -> None:
    """The shared analyses work on an export unchanged: idle, launch, sync, copies and NCCL overlap all measure."""
    from tracedoc.store.modules import all_modules

    store, _ = open_store(discover([TRAIN]), tmp_path)
    with store:
        for module in all_modules():
            store.include(module)
        assert store.scalar("SELECT count(*) FROM gpu_idle_by_device WHERE busy_pct BETWEEN 85 AND 95") == 2
        # every count is of the window: the kernels (and syncs, copies) that start in it, counted from the events
        in_window = """FROM gpu_activity g JOIN trace_wall w USING (source_id)
                       WHERE g.ts_ns >= w.start_ns AND g.ts_ns < w.end_ns AND g.kind = '{}'"""
        kernels = store.scalar("SELECT count(*) " + in_window.format("kernel"))
        assert 3_500 < kernels < 4_010 and store.scalar("SELECT sum(kernel_count) FROM gpu_launch_stats") == kernels
        assert store.scalar("SELECT sum(sync_count) FROM host_sync_by_rank") > 0
        assert store.scalar("SELECT sum(copy_count) FROM host_copies_by_rank") > 0
        assert store.query("SELECT device, overlap_ns FROM comm_overlap_by_device WHERE comm_ns > 0 "
                           "ORDER BY device") == [{"device": 0, "overlap_ns": 0}, {"device": 1, "overlap_ns": 0}]


def test_range_open_when_capture_stopped_runs_to_the_end(tmp_path: Path) -> None:
    """A range the capture stopped inside has no end in the export: it runs to the capture's last event."""
    cut = tmp_path / "open.sqlite"
    shutil.copyfile(TORCH / "sample.sqlite", cut)
    con = sqlite3.connect(cut)
    con.execute("""UPDATE NVTX_EVENTS SET "end" = NULL WHERE text = 'epoch'""")
    assert con.total_changes == 1
    con.commit()
    con.close()
    with Store.create(tmp_path / "store.duckdb") as store:
        nsys.load(store, 0, cut, tmp_path)
        epoch = store.query("SELECT ts_ns + dur_ns AS end_ns, open_end FROM nvtx_ranges WHERE name = 'epoch'")
        last = store.scalar("SELECT max(ts_ns + dur_ns) FROM cpu_activity WHERE kind <> 'annotation'")
        assert epoch == [{"end_ns": last, "open_end": True}]


@pytest.mark.parametrize("export", sorted([*SAMPLES.glob("nsys-*/*.sqlite"), *SAMPLES.glob("nsys-*/*.sqlite.xz")]),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_exports_hold_no_environment(export: Path, tmp_path: Path) -> None:
    """Nsight Systems copies the profiled process's environment into its export, as metadata rows and as
    NUL-separated blocks in StringIds: the bundled exports keep neither, but for the launcher's rank variables."""
    if export.suffix == ".xz":
        plain = tmp_path / export.stem
        plain.write_bytes(lzma.decompress(export.read_bytes()))
        export = plain
    with sqlite3.connect(export) as con:
        strings = [v for (v,) in con.execute("SELECT value FROM StringIds") if v]
        env_rows = con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE'").fetchall()
    # a block may begin with a name without a value (nvFuser's starts with `_PJNL_CPP_TAG`): look anywhere in it
    assert not [s[:40] for s in strings if re.search(r"[A-Za-z_]\w*=[^\x00]*\x00[A-Za-z_]\w*=", s)]
    assert all(v.endswith('"<redacted>"') or re.fullmatch(r'(LOCAL_)?(RANK|WORLD_SIZE)="?[0-9]+"?', v)
               for (v,) in env_rows)


def test_a_call_stored_twice_counts_once(tmp_path: Path) -> None:
    """Some exports store each runtime call twice, as 'cudaMemcpy' and 'cudaMemcpy_v3020' with one correlation id.
    An edited copy of the torch sample with every call so doubled (a new StringIds name, the same rows again):
    every count and time is what it was, the two synchronous copies (2 × 4 MiB) among them."""
    doubled = tmp_path / "doubled.sqlite"
    shutil.copyfile(TORCH / "sample.sqlite", doubled)
    with sqlite3.connect(doubled) as con:
        top = con.execute("SELECT max(id) FROM StringIds").fetchone()[0]
        names = con.execute("SELECT DISTINCT r.nameId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                            "JOIN StringIds s ON s.id = r.nameId").fetchall()
        for n, (name_id, value) in enumerate(names, 1):
            versioned = value if re.search(r"_v[0-9]{4}$", value) else value + "_v3020"
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (top + n, versioned))
            con.execute('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", eventClass, globalTid, correlationId, '
                        'nameId, returnValue, callchainId) SELECT start, "end", eventClass, globalTid, correlationId, '
                        '?, returnValue, callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId = ?',
                        (top + n, name_id))
    before, after = analyze([TORCH / "sample.sqlite"], use_cache=False), analyze([doubled], use_cache=False)
    for metric in ("host_syncs", "copies", "launch"):
        assert after.metrics[metric] == before.metrics[metric], metric
    findings = {f.rule: (f.impact_ms, [(e.name, e.value) for e in f.evidence]) for f in after.findings}
    assert findings == {f.rule: (f.impact_ms, [(e.name, e.value) for e in f.evidence]) for f in before.findings}
    sync = next(f for f in after.findings if f.rule == "sync-memcpy")
    assert {e.name: e.value for e in sync.evidence}["synchronous copies"] == 2


CUPY_NOPOOL = SAMPLES / "nsys-cupy-nopool"
CUPY_POOL = SAMPLES / "nsys-cupy-pool"


@pytest.mark.skipif(not (CUPY_NOPOOL.exists() and CUPY_POOL.exists()),
                    reason="the CuPy samples are recorded apart (workloads/cupy_alloc)")
def test_synchronous_cudafree_without_a_pool_is_named(tmp_path: Path) -> None:
    """nsys-cupy-nopool: a CuPy loop without a memory pool, a cudaMalloc and a cudaFree for every 64 MiB array. The
    GPU idles while the host sits in them: gpu-idle-host-bound names the synchronous frees and allocations with their
    time, and its fix starts with a memory pool. Its twin on CuPy's pool raises no such finding."""
    finding = next(f for f in analyze([CUPY_NOPOOL], cache_dir=tmp_path).findings if f.rule == "gpu-idle-host-bound")
    assert "synchronous cudaFree and cudaMalloc calls" in finding.message
    evidence = {e.name: e.value for e in finding.evidence}
    # in the idle gaps only: the export's 74.2 ms of cudaFree in the 20 steps mostly overlaps the GPU's own work
    assert 0 < evidence["synchronous cudaFree and cudaMalloc in the gaps"] <= 74.25 + 18.33
    assert finding.fix.startswith("Keep allocation out of the loop") and "memory pool" in finding.fix
    assert "MemoryPool" in finding.fix and "torch" not in finding.fix
    assert not [f for f in analyze([CUPY_POOL], cache_dir=tmp_path).findings if f.rule == "gpu-idle-host-bound"]


def test_syncs_on_no_stream_are_named_so(tmp_path: Path) -> None:
    """The 133 event syncs of the FastVideo export carry CUPTI's 'no stream' id (streamId 2³² − 1, an unsigned −1):
    their timeline lane and their Perfetto track say so rather than 'stream 4294967295'."""
    export = SAMPLES / "nsys-fastvideo-train-2gpu" / "mfu_2gpu_before.sqlite"
    with sqlite3.connect(export) as con:
        assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION "
                           "WHERE streamId = 4294967295").fetchone() == (133,)
    store, _ = open_store(discover([export]), tmp_path)
    with store:
        store.include("timeline.lanes")
        labels = [r["label"] for r in store.query("SELECT label FROM timeline_lanes")]
        store.include("export.perfetto")
        tracks = [r["name"] for r in store.query("SELECT args->>'name' AS name FROM export_perfetto_slices "
                                                  "WHERE name = 'thread_name'")]
    assert not any("4294967295" in label for label in labels + tracks)
    assert any(label.endswith("no stream (event and context syncs)") for label in labels)
