"""Measured numbers on real samples, checked against independent computations from the raw trace events."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tracedoc.api import open_store
from tracedoc.ingest import discover
from tracedoc.options import AnalysisOptions
from tracedoc.store import Store, modules


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def ns(us: float) -> int:
    """Microseconds to integer ns, rounding half away from zero as the store does."""
    return int(us * 1000 + 0.5)


def kernels(path: Path) -> list[dict]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [{"name": e["name"], "ts": ns(e["ts"]), "end": ns(e["ts"]) + ns(e["dur"])}
            for e in events if e.get("cat") == "kernel"]


def ingest(tmp_path: Path, path: Path) -> Store:
    return open_store(discover([path]), tmp_path)[0]


@pytest.mark.parametrize("sample", ["ddp-overlap", "ddp-no-overlap"])
def test_comm_overlap_matches_an_independent_sweep(sample: str, tmp_path: Path) -> None:
    """overlap % = |comm ∩ compute| / |comm|, from NCCL and other kernels of the same rank, both clipped to the
    window the analyses judge (the profiled steps' work, without what earlier steps left queued)."""
    for trace in sorted((SAMPLES / sample).glob("*.json.gz")):
        with ingest(tmp_path / trace.name, trace) as store:
            store.include("comm.overlap")
            row = store.query("SELECT comm_ns, compute_ns, overlap_ns, overlap_pct FROM comm_overlap_by_device")[0]
            window = store.query("SELECT start_ns, end_ns FROM trace_wall")[0]
        ks = [(max(k["ts"], window["start_ns"]), min(k["end"], window["end_ns"]), k["name"]) for k in kernels(trace)]
        comm = [(a, b) for a, b, name in ks if "nccl" in name.lower() and b > a]
        comp = [(a, b) for a, b, name in ks if "nccl" not in name.lower() and b > a]
        both = union_ns(comm) + union_ns(comp) - union_ns(comm + comp)
        assert row["comm_ns"] == pytest.approx(union_ns(comm), rel=0.001)
        assert row["overlap_ns"] == pytest.approx(both, rel=0.001, abs=1_000)
    low = sample == "ddp-no-overlap"
    assert (row["overlap_pct"] < 10) if low else (row["overlap_pct"] > 80)


def test_busy_time_is_the_union_of_gpu_work(tmp_path: Path) -> None:
    trace = SAMPLES / "decode-eager" / "trace.json.gz"
    with ingest(tmp_path, trace) as store:
        store.include("gpu.idle")
        busy = store.scalar("SELECT sum(end_ns - ts_ns) FROM gpu_busy_intervals")
        idle = store.query("SELECT * FROM gpu_idle_by_device")[0]
        window = store.query("SELECT * FROM trace_wall")[0]
        raw = [(k["ts"], k["end"]) for k in kernels(trace)]
        inside = [(a, b) for a, b in raw if b > window["start_ns"] and a < window["end_ns"]]
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    copies = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
              if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    copies = [(a, b) for a, b in copies if b > window["start_ns"] and a < window["end_ns"]]
    assert busy == union_ns(inside + copies)
    # busy + every idle gap = the window
    assert idle["idle_ns"] + busy == pytest.approx(window["wall_ns"], abs=1000)
    assert idle["host_wait_ns"] + idle["kernel_wait_ns"] + idle["other_ns"] == idle["idle_ns"]


def test_idle_causes_separate_launch_gaps_from_host_work(tmp_path: Path) -> None:
    """Eager decode idles in short launch gaps; the slow input pipeline idles in long host gaps inside 'data'."""
    with ingest(tmp_path / "a", SAMPLES / "decode-eager" / "trace.json.gz") as store:
        store.include("gpu.idle")
        eager = store.query("SELECT * FROM gpu_idle_by_device")[0]
    with ingest(tmp_path / "b", SAMPLES / "input-slow" / "trace.json.gz") as store:
        store.include("gpu.idle")
        slow = store.query("SELECT * FROM gpu_idle_by_device")[0]
        busiest = store.scalar("SELECT arg_max(name, overlap_ns) FROM gpu_idle_host_activity")
    assert eager["host_wait_short_pct"] > 80 and eager["host_wait_long_pct"] < 10
    assert slow["host_wait_long_pct"] > 60 and busiest == "data"


def test_a_view_kept_for_exploring_stays_a_view_on_a_small_store(tmp_path: Path) -> None:
    """On a small store the analyses' views are made tables, computed once; gpu_idle_host_activity, which no rule
    or report reads, is marked to stay a view: not computed on every run, and still right when queried."""
    with ingest(tmp_path, SAMPLES / "input-slow" / "trace.json.gz") as store:
        store.fit_threads()
        store.include("gpu.idle")
        kinds = dict(store.con.execute("SELECT table_name, table_type FROM information_schema.tables "
                                       "WHERE table_name IN ('gpu_idle_gaps', 'gpu_idle_host_activity')").fetchall())
        busiest = store.scalar("SELECT arg_max(name, overlap_ns) FROM gpu_idle_host_activity")
    assert store.views_as_tables
    assert kinds == {"gpu_idle_gaps": "LOCAL TEMPORARY", "gpu_idle_host_activity": "VIEW"}
    assert busiest == "data"


def test_the_summaries_several_views_read_are_tables_where_views_stay_views(tmp_path: Path) -> None:
    """On a large store the views stay views, worked out again by each statement that reads them; the summaries of a
    row per source, device or rank that several rules, report tables or views read (what ran the program, what was
    recorded, the idle per device, the syncs, blocking calls and copies per rank) are tables there too, computed
    once, while a rule's own view stays a view."""
    summaries = {"trace_framework", "trace_recording", "gpu_idle_by_device", "host_sync_by_rank",
                 "host_blocking_by_rank", "host_copies_by_rank"}
    with ingest(tmp_path, SAMPLES / "decode-eager" / "trace.json.gz") as store:
        for module in ("attribution.host", "gpu.launch", "gpu.utilization", "host.blocking", "host.memcpy",
                       "device.kinds"):
            store.include(module)
        kinds = dict(store.con.execute(
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_name IN "
            "(SELECT unnest($names))", {"names": [*summaries, "gpu_launch_overhead"]}).fetchall())
        framework = store.query("SELECT * FROM trace_framework")
        devices = store.query("SELECT device, busy_pct FROM gpu_idle_by_device")
        launch = store.query("SELECT device, busy_pct FROM gpu_launch_overhead")
    assert not store.views_as_tables
    assert kinds == {**dict.fromkeys(summaries, "LOCAL TEMPORARY"), "gpu_launch_overhead": "VIEW"}
    assert [row["pytorch"] for row in framework] == [True]
    assert len(devices) == 1 and launch == devices and 0 < devices[0]["busy_pct"] < 100


@pytest.mark.parametrize("sample", ["decode-eager", "nsys-fsdp-prefetch-ranks"])
def test_the_steps_work_names_its_row_in_the_store_instead_of_copying_its_text(sample: str, tmp_path: Path) -> None:
    """trace_step_work, a row per kernel, copy and memset kept to the end of the run, carries the work's row in
    gpu_activity (work_row) rather than a copy of its name, grid and block; on one rank and on several (a store of
    many sources), each row it names is that work's own."""
    with ingest(tmp_path, SAMPLES / sample) as store:
        store.include("trace.steps")
        columns = {row["column_name"] for row in store.query(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = 'trace_step_work'")}
        check = store.query("""
            SELECT count(*) AS work, count(g.rowid) AS found, count(DISTINCT w.source_id) AS sources,
                   count(*) FILTER (WHERE g.source_id <> w.source_id OR g.device <> w.device OR g.kind <> w.kind
                                       OR g.ts_ns <> w.ts_ns OR g.dur_ns <> w.dur_ns) AS not_its_own
            FROM trace_step_work w LEFT JOIN gpu_activity g ON g.rowid = w.work_row""")[0]
        sources = store.scalar("SELECT count(DISTINCT source_id) FROM gpu_activity")
    assert "work_row" in columns and not {"name", "grid", "block"} & columns
    assert check["work"] > 1000 and check["found"] == check["work"] and check["not_its_own"] == 0
    assert check["sources"] == sources and sources >= (2 if sample.endswith("-ranks") else 1)


def test_the_attributions_segments_keep_a_mask_and_read_their_causes_from_it(tmp_path: Path) -> None:
    """The attribution's segments, millions on a long trace and kept to the end of the run, are held as numbers
    (attribution_segment_masks); their cause, detail and class are read from the mask (attribution_segment_causes),
    and every segment has one cause of the attribution's."""
    with ingest(tmp_path, SAMPLES / "input-slow" / "trace.json.gz") as store:
        store.include("attribution.time")
        types = {row["data_type"] for row in store.query(
            "SELECT data_type FROM duckdb_columns() WHERE table_name = 'attribution_segment_masks'")}
        causes = {row["cause"]: row["n"] for row in store.query(
            "SELECT cause, count(*) AS n FROM attribution_segment_causes GROUP BY cause")}
        segments = store.scalar("SELECT count(*) FROM attribution_segment_masks")
    assert types <= {"BIGINT", "INTEGER"}
    assert sum(causes.values()) == segments > 100
    assert {"gpu_compute", "data_loading"} <= causes.keys() <= {
        "gpu_compute", "wait_for_peer", "comm_transfer", "dependency_wait", "launch_overhead", "host_sync",
        "data_loading", "phase", "host_work", "uninstrumented_host"}


def test_every_module_is_rewritten_for_small_stores_and_cursors_as_its_statements_say() -> None:
    """Each module's facts stand in its leading comment lines (where ``facts`` reads them), and its text made for a
    small store on cursors (``module_sql``) keeps a view only under ``-- stays a view`` and no TEMP object at all,
    every CREATE of the file rewritten (the rewrite looks for the words, then checks they start a word)."""
    fact_line = re.compile(r"^--\s*((include|uses|reads|scope|hands back|client only):|views stay views\s*$)", re.M)
    create_temp = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?TEMP(ORARY)?\s", re.I)
    for module in modules.all_modules():
        text = modules.module_text(module)
        assert not fact_line.search(text[len(modules.module_header(text)):]), module
        rewritten = modules.module_sql(module, views_as_tables=not modules.facts(module).views_stay, shared=True)
        assert not create_temp.search(rewritten), module
        assert rewritten.count("\nCREATE ") + rewritten.startswith("CREATE ") == len(
            re.findall(r"^CREATE ", text, re.M)), module
        views = len(re.findall(r"\bCREATE\s+OR\s+REPLACE\s+VIEW\b", rewritten, re.I))
        kept = len(re.findall(r"^--\s*stays a view\s*\n(?i:CREATE\s+OR\s+REPLACE\s+TEMP\s+VIEW)", text, re.M))
        created = len(re.findall(r"\bCREATE\s+OR\s+REPLACE\s+TEMP\s+VIEW\b", text, re.I))
        assert views == (created if modules.facts(module).views_stay else kept), module
    assert modules.module_sql("gpu.idle", views_as_tables=True).count("TEMP VIEW gpu_idle_host_activity") == 1


def test_the_communication_kind_is_the_one_with_most_time(tmp_path: Path) -> None:
    """moe-balanced's ranks spend their communication in all_to_allv (36 SendRecv kernels each, 3.7-4.2 ms); one
    untagged SendRecv of 0.3 ms is rank 1's longest single kernel. The kind named, and advised on, is all-to-all."""
    kinds = {}
    for trace in sorted((SAMPLES / "moe-balanced").glob("*.json.gz")):
        with ingest(tmp_path / trace.name, trace) as store:
            store.include("comm.exposed")
            kinds[trace.name] = store.scalar("SELECT comm_kind FROM comm_exposed_by_device")
    assert len(kinds) == 2 and set(kinds.values()) == {"all_to_all"}, kinds

def test_sync_cost_is_bounded_by_blocked_time(tmp_path: Path) -> None:
    """A sync can save at most the time the host sat blocked in it, whatever idle followed."""
    with ingest(tmp_path, SAMPLES / "input-slow" / "trace.json.gz") as store:
        store.include("host.sync")
        row = store.query("SELECT * FROM host_sync_by_rank")[0]
    assert row["sync_count"] == 9 and row["syncs_per_step"] == 3
    assert 0 < row["gpu_idle_ns"] <= row["blocked_ns"]


def test_a_per_step_item_behind_a_slow_input_pipeline_is_named(tmp_path: Path) -> None:
    """input-slow's loss.item() after every step (3 cudaStreamSynchronize of 9.2 to 10.6 ms under `log`, SOURCE.md)
    sits among six syncs of pageable copies, which make most of the calls: host-sync names the value reads apart,
    with their operator, count per step and blocked time, and the pageable copies' syncs are not among them."""
    from tracedoc import analyze
    with ingest(tmp_path, SAMPLES / "input-slow" / "trace.json.gz") as store:
        store.include("host.sync")
        row = store.query("SELECT * FROM host_sync_by_rank")[0]
        reads = store.query("SELECT op, dur_ns FROM host_sync_calls WHERE value_read")
    assert {r["op"] for r in reads} == {"aten::_local_scalar_dense"} and len(reads) == 3
    assert all(9.0e6 < r["dur_ns"] < 11.0e6 for r in reads)
    assert row["value_read_count"] == 3 and row["value_reads_per_step"] == 1
    assert row["value_read_origin"] == "aten::item" and row["top_origin"] == "aten::copy_"
    assert 0 < row["value_read_idle_ns"] <= row["value_read_blocked_ns"] == sum(r["dur_ns"] for r in reads)
    finding = next(f for f in analyze([SAMPLES / "input-slow"], cache_dir=tmp_path / "cache").findings
                   if f.rule == "host-sync")
    assert "3 of them read a value back to the host (from 'aten::item'" in finding.message
    assert "1.0 per step" in finding.message


def test_a_tie_for_the_top_sync_origin_goes_to_the_first_made(tmp_path: Path) -> None:
    """input-slow's 9 syncs come from aten::copy_ (6) and aten::_local_scalar_dense (3). Edited: copy_'s last
    three dropped, so the two tie; the name reported is the first made (copy_), however the rows are stored."""
    with ingest(tmp_path, SAMPLES / "input-slow" / "trace.json.gz") as store:
        store.include("host.sync")
        store.con.execute("""
            DELETE FROM host_sync_calls WHERE ts_ns IN (
                SELECT ts_ns FROM host_sync_calls WHERE op = 'aten::copy_' ORDER BY ts_ns DESC LIMIT 3)""")
        origins = set()
        for order in ("ASC", "DESC"):
            store.con.execute(f"CREATE OR REPLACE TEMP TABLE host_sync_calls AS "
                              f"SELECT * FROM host_sync_calls ORDER BY ts_ns {order}")
            origins.add(store.scalar("SELECT top_origin FROM host_sync_by_rank"))
    assert origins == {"aten::copy_"}


def test_of_gaps_as_long_the_first_is_the_longest(tmp_path: Path) -> None:
    """host-stall-sleep's GPU stops for its sleeps. Edited: its two longest gaps made equally long; the longest gap
    reported is then the earlier one, however the rows are stored."""
    with ingest(tmp_path, SAMPLES / "host-stall-sleep" / "trace.json.gz") as store:
        store.include("gpu.gaps")
        first, second = store.query("SELECT ts_ns, dur_ns FROM gpu_gaps_all ORDER BY dur_ns DESC LIMIT 2")
        store.con.execute("UPDATE gpu_gaps_all SET dur_ns = ?, end_ns = ts_ns + ? WHERE ts_ns = ?",
                          [first["dur_ns"], first["dur_ns"], second["ts_ns"]])
        earlier = min(first["ts_ns"], second["ts_ns"])
        found = set()
        for order in ("ASC", "DESC"):
            store.con.execute(f"CREATE OR REPLACE TEMP TABLE gpu_gaps_all AS "
                              f"SELECT * FROM gpu_gaps_all ORDER BY ts_ns {order}")
            row = store.query("SELECT g.longest_gap_at_ns + w.start_ns AS ts_ns, g.longest_gap_ns "
                              "FROM gpu_gaps_long(0) g JOIN trace_windows w USING (source_id)")[0]
            found.add((row["ts_ns"], row["longest_gap_ns"]))
    assert found == {(earlier, first["dur_ns"])}


@pytest.mark.parametrize(("sample", "communication", "nvtx"), [
    ("decode-eager", False, False), ("ddp-straggler", True, False), ("nsys-torch-h100", False, True)])
def test_the_matching_of_collectives_and_the_nvtx_projection_run_only_where_they_can_find_something(
        sample: str, communication: bool, nvtx: bool) -> None:
    """ranks.collectives runs only on a store with communication kernels and nvtx.projection only on one with NVTX
    ranges (``-- reads:``); elsewhere their readers get empty tables (ranks.matched, nvtx.idle) and still say what
    they measure: a rank × step table and each GPU's compute beside no communication, the NVTX range of the most
    idle time only where there are ranges."""
    from tracedoc.api import build_report

    store, _ = open_store(discover([SAMPLES / sample]), None)
    try:
        report = build_report(store, AnalysisOptions())
        assert ("ranks.collectives" in store._included) == communication
        assert ("nvtx.projection" in store._included) == nvtx
        assert {"ranks.matched", "nvtx.idle"} <= store._included
        steps = report.metrics["rank_steps"]
        assert steps and all(r["compute_ms"] > 0 for r in steps)
        assert any(r["collectives"] > 0 for r in steps) == communication
        assert any(r["comm_ms"] > 0 for r in report.metrics["comm_overlap"]) == communication
        assert all(r["compute_ms"] > 0 for r in report.metrics["comm_overlap"])
        ranges = {e.value for f in report.findings for e in f.evidence
                  if e.name == "NVTX range with the most idle GPU time" and e.value is not None}
        assert ranges == ({"checkpoint"} if nvtx else set())
        assert ("straggler-rank" in {f.rule for f in report.findings}) == communication
    finally:
        store.close()


@pytest.mark.parametrize(("sample", "ranks"), [("decode-eager", 1), ("moe-hot-expert", 2)])
def test_rank_comparisons_run_only_with_several_ranks(sample: str, ranks: int) -> None:
    """Straggler and all-to-all balance compare ranks: on one rank's trace neither they nor their rules run (nothing
    to find there), on two they do and expert-imbalance finds moe-hot-expert's hot expert."""
    from tracedoc.api import build_report

    store, _ = open_store(discover([SAMPLES / sample]), None)
    try:
        report = build_report(store, AnalysisOptions())
        assert store.ranks() == ranks
        ran = {"ranks.stragglers", "ranks.alltoall"} & store._included
        assert ran == (set() if ranks == 1 else {"ranks.stragglers", "ranks.alltoall"})
        assert ("expert-imbalance" in {f.rule for f in report.findings}) == (ranks == 2)
    finally:
        store.close()
