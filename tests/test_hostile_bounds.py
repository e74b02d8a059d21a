"""Hostile inputs that once escaped the contract or ran unbounded: each is built here from a real sample (the
builders say what was changed), run through the command line in a child process as a user would, and held to
the outcome: exit code 0 or 2, one line on stderr when 2, no raw control characters out, and work bounded by the
child's CPU time (never wall time, which a loaded machine stretches) or by counts.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.hostile_fr import many_rank_dumps
from tests.hostile_memory import TRACE, many_ooms_snapshot, many_ooms_trace
from tests.hostile_ncu import many_kernels_csv
from tests.hostile_ranks import many_rank_traces
from tests.hostile_report import hostile_report
from tests.hostile_rules import alias_bomb, deep_extends, with_field
from tests.hostile_snapshot import edited_snapshot, plain_dicts_snapshot

_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    cpu_s: float  # user + system CPU time of the child


def tracedoc(*args: str, cpu_limit_s: int = 120) -> Outcome:
    """``python -m tracedoc ARGS`` in a child process (stopped by RLIMIT_CPU past ``cpu_limit_s``)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))

    env = {**os.environ, "TRACEDOC_MEMORY_LIMIT": os.environ.get("TRACEDOC_MEMORY_LIMIT", "2G")}
    env.pop("TRACEDOC_DEBUG", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "tracedoc", *args], capture_output=True, cwd=ROOT, env=env,
                          preexec_fn=limit, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Outcome(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"),
                   cpu)


def assert_refused(outcome: Outcome, *needles: str) -> None:
    """Exit code 2 and exactly one line on stderr, without a traceback, holding every needle."""
    assert outcome.code == 2, (outcome.code, outcome.err[-2000:])
    assert outcome.err.count("\n") == 1 and outcome.err.endswith("\n"), outcome.err[-2000:]
    assert "Traceback" not in outcome.err and not _RAW_CONTROL.search(outcome.err)
    for needle in needles:
        assert needle in outcome.err, (needle, outcome.err)


# 1. A saved report is as untrusted as a trace.

@pytest.mark.parametrize("fmt", ["text", "md", "json", "html"])
def test_saved_report_with_escapes_in_every_string_rerendered(tmp_path: Path, fmt: str) -> None:
    """reports/ddp-straggler.json with ESC sequences, an OSC 8 hyperlink, BEL, a bidi override, a C1 CSI and
    "\\r\\n# injected heading" appended to every string: re-rendered in every format, nothing raw gets out, no
    heading is injected, and the report's words are still there."""
    saved = hostile_report(tmp_path / "report.json")
    outcome = tracedoc("analyze", str(saved), "--format", fmt)
    assert outcome.code == 0, outcome.err
    assert not _RAW_CONTROL.search(outcome.out), _RAW_CONTROL.search(outcome.out)
    assert not re.search(r"^#+ injected", outcome.out, re.MULTILINE)  # a Markdown heading of its own
    assert "straggler-rank" in outcome.out
    assert "\\x1b[2J" in outcome.out or "\\\\x1b[2J" in outcome.out  # shown, not acted on


def test_saved_reports_with_escapes_diffed(tmp_path: Path) -> None:
    """Two copies of the poisoned report given to `tracedoc diff`: the diff's text carries no raw control
    character either."""
    saved = hostile_report(tmp_path / "report.json")
    outcome = tracedoc("diff", str(saved), str(saved), "--format", "text")
    assert outcome.code == 0, outcome.err
    assert not _RAW_CONTROL.search(outcome.out)


# 2. Rule files are untrusted: expressions, not statements; no file access; bounded YAML and bases.

KINETO = ROOT / "samples" / "decode-compile" / "trace.json.gz"


def test_rule_field_of_several_statements_is_refused_at_load(tmp_path: Path) -> None:
    """A rule whose `when` is `true; COPY (SELECT 42) TO '<file>'; SELECT 1`: refused as the rules load, before
    any statement runs, so the file is never written."""
    target = tmp_path / "file.csv"
    rules = with_field(tmp_path / "rules", "copy-when", "when", f"\"true; COPY (SELECT 42) TO '{target}'; SELECT 1\"")
    outcome = tracedoc("analyze", "--no-cache", str(KINETO), "--rules", str(rules))
    assert_refused(outcome, "copy-when.yaml", "when must be one SQL expression")
    assert not target.exists()


@pytest.mark.parametrize("key", ["impact_ms", "view"])
def test_other_rule_sql_of_several_statements_is_refused(tmp_path: Path, key: str) -> None:
    """The same in impact_ms and in the view a rule reads; a ';' inside a string or a comment is no statement
    end, and such a rule loads."""
    rules = with_field(tmp_path / "rules", "two-statements", key, "\"gpu_launch_overhead; SELECT 1\"")
    assert_refused(tracedoc("rules", "--rules", str(rules)), f"{key} must be one SQL expression")
    rules = with_field(tmp_path / "quoted", "quoted-semicolon", "when", "\"rank::VARCHAR <> 'a;b' -- ;\"")
    outcome = tracedoc("analyze", "--no-cache", str(KINETO), "--rules", str(rules), "--format", "json")
    assert outcome.code == 0, outcome.err


def test_rule_sql_cannot_read_files_after_ingest(tmp_path: Path) -> None:
    """A rule whose `when` reads a file (read_text of a file holding a marker): the analysis connection is
    locked after ingest (no external access), so the rule fails as a one-line rule error and the marker never
    reaches the report; from a cached store (opened read-only), too."""
    secret = tmp_path / "secret.txt"
    secret.write_text("MARKER-1234")
    rules = with_field(tmp_path / "rules", "read-file", "when",
                       f"\"(SELECT content FROM read_text('{secret}')) LIKE 'MARKER%'\"")
    cache = tmp_path / "cache"
    for _ in range(2):  # ingested into the cache, then read from it
        outcome = tracedoc("analyze", "--cache-dir", str(cache), str(KINETO), "--rules", str(rules))
        assert_refused(outcome, "rule read-file", "disabled")
        assert "MARKER" not in outcome.out + outcome.err
    assert list(cache.glob("*.duckdb"))


def test_locked_store_still_spills_under_its_memory_limit() -> None:
    """A store under a 64 MiB memory cap, locked as after ingest: sorting more than the cap still completes
    (DuckDB spills to the temp directory set at connection)."""
    from tracedoc.limits import Limits
    from tracedoc.store import Store

    with Store.create(None, Limits(memory_bytes=64 << 20)) as store:
        store.lock()
        store.lock()  # twice: once locked, nothing to change
        store.con.execute("CREATE TEMP TABLE wide AS SELECT i, md5(i::VARCHAR) || md5((i + 1)::VARCHAR) AS s "
                          "FROM range(2000000) r(i)")
        assert store.scalar("SELECT count(*) FROM (SELECT s FROM wide ORDER BY s DESC OFFSET 5)") == 1_999_995
        assert store.scalar("SELECT current_setting('enable_external_access')") is False


def test_yaml_alias_bomb_in_a_rule_file_is_refused_fast(tmp_path: Path) -> None:
    """A rule file of a few hundred bytes whose references expand to 10**9 strings through nested aliases:
    refused as it is read, in little CPU time."""
    outcome = tracedoc("analyze", "--no-cache", str(KINETO), "--rules", str(alias_bomb(tmp_path / "rules")),
                       cpu_limit_s=60)
    assert_refused(outcome, "bomb-rule.yaml", "more than 100,000 values")
    assert outcome.cpu_s < 15, outcome.cpu_s


def test_extends_chain_1000_deep_is_refused(tmp_path: Path) -> None:
    """A rule extending a base that extends another, 1,000 deep: one line, exit 2, bounded."""
    outcome = tracedoc("rules", "--rules", str(deep_extends(tmp_path / "rules")), cpu_limit_s=60)
    assert_refused(outcome, "deep-rule.yaml", "deeper than 32 bases")
    assert outcome.cpu_s < 15, outcome.cpu_s


# 3, 4. Allocator snapshots: numbers out of range, and structure that is not a snapshot's.

def test_snapshot_segment_on_device_2_to_the_40(tmp_path: Path) -> None:
    """samples/memory-oom's snapshot whose first segment is on device 2**40 (too large for the device column):
    one line and exit 2, not an internal error."""
    def far_device(snapshot: dict[str, Any]) -> None:
        snapshot["segments"][0]["device"] = 2**40

    outcome = tracedoc("analyze", "--no-cache", str(edited_snapshot(tmp_path / "snapshot.pickle", far_device)))
    assert_refused(outcome, "device id 1099511627776 is out of range")


def test_snapshot_edited_within_range_still_reads(tmp_path: Path) -> None:
    """The same snapshot with its first segment on device 3: read, and the segment counted."""
    def device_3(snapshot: dict[str, Any]) -> None:
        snapshot["segments"][0]["device"] = 3

    outcome = tracedoc("analyze", "--no-cache", str(edited_snapshot(tmp_path / "snapshot.pickle", device_3)),
                       "--format", "json")
    assert outcome.code == 0, outcome.err
    assert json.loads(outcome.out)["inputs"][0]["format"] == "memory_snapshot"


def test_snapshot_history_of_10m_plain_dicts_is_refused_by_structure(tmp_path: Path) -> None:
    """A snapshot whose device 0 history is 10,000,000 empty dicts (20 MB): refused once the first 1,000 hold no
    action, in little CPU time, where every dict used to be read."""
    snapshot = plain_dicts_snapshot(tmp_path / "snapshot.pickle", 10_000_000, "history")
    outcome = tracedoc("analyze", "--no-cache", str(snapshot), cpu_limit_s=60)
    assert_refused(outcome, "not an allocator snapshot", "first 1,000 history entries of device 0")
    assert outcome.cpu_s < 10, outcome.cpu_s


def test_snapshot_of_10m_plain_dicts_under_an_unread_key_is_bounded(tmp_path: Path) -> None:
    """A snapshot of no segments and no history but 10,000,000 empty dicts under a key tracedoc does not read:
    they are counted, never held, and refused at the reader's budget of values (2,000,000 for a small file)."""
    snapshot = plain_dicts_snapshot(tmp_path / "snapshot.pickle", 10_000_000, "external_annotations")
    outcome = tracedoc("analyze", "--no-cache", str(snapshot), cpu_limit_s=90)
    assert_refused(outcome, "over 2,000,000 values")
    assert outcome.cpu_s < 30, outcome.cpu_s


# 5. Many out-of-memory failures: the work bounded by what is reported, the first ten and a count.

def _oom_findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["rule"] == "oom"]


def test_50000_out_of_memory_events_in_a_trace(tmp_path: Path) -> None:
    """samples/memory-oom's trace with its '[OutOfMemory]' event 50,000 times: ten failures are judged, the
    others counted, in bounded CPU time."""
    trace = many_ooms_trace(tmp_path / "trace.json.gz", 50_000)
    outcome = tracedoc("analyze", "--no-cache", str(trace), "--format", "json")
    assert outcome.code == 0, outcome.err
    ooms = _oom_findings(json.loads(outcome.out))
    assert len(ooms) == 10
    assert "49,990 more failures" in ooms[0]["message"]
    assert outcome.cpu_s < 30, outcome.cpu_s


def test_200000_out_of_memory_records_in_a_snapshot_directory(tmp_path: Path) -> None:
    """A directory of samples/memory-oom's trace and its snapshot whose history's 'oom' entry is repeated
    200,000 times: ten failures judged, the rest counted."""
    folder = tmp_path / "run"
    folder.mkdir()
    many_ooms_snapshot(folder / "snapshot.pickle", 200_000)
    (folder / "trace.json.gz").write_bytes(TRACE.read_bytes())
    outcome = tracedoc("analyze", "--no-cache", str(folder), "--format", "json")
    assert outcome.code == 0, outcome.err
    ooms = _oom_findings(json.loads(outcome.out))
    assert 1 <= len(ooms) <= 11  # the trace's own failure, and the snapshot's first ten
    assert any("199,990 more failures" in f["message"] for f in ooms)
    assert outcome.cpu_s < 40, outcome.cpu_s


def test_5000_out_of_memory_events_on_5000_devices(tmp_path: Path) -> None:
    """The trace's '[OutOfMemory]' event 5,000 times, each on a device id of its own: ten failures judged, the
    memory section holds the first 64 devices and the summary counts the 4,936 left out."""
    trace = many_ooms_trace(tmp_path / "trace.json.gz", 5_000, devices=5_000)
    outcome = tracedoc("analyze", "--no-cache", str(trace), "--format", "json")
    assert outcome.code == 0, outcome.err
    report = json.loads(outcome.out)
    assert len(_oom_findings(report)) == 10
    assert len(report["memory"]) == 64
    assert report["summary"]["memory_devices_left_out"] == 5_000 - 64
    assert outcome.cpu_s < 30, outcome.cpu_s


# Many profiled launches: the Nsight Compute analyses cut the metrics they read before pivoting them.

@pytest.mark.slow  # a 156 MB export ingested: about a minute of CPU
def test_ncu_csv_of_10000_kernel_launches(tmp_path: Path) -> None:
    """samples/ncu-h200-torch-csv's eight launches tiled to 10,000 (156 MB of CSV, 22 million metric values):
    every launch read and judged, the four kernels each with 2,500 launches. The analyses after ingest, timed in
    this process by CPU: they took 47.5 s when the metric pivot aggregated every one of a launch's 2,213
    metrics, and 19.8 s now that it reads the fifty it pivots (3,000 launches: 12.6 → 5.2 s)."""
    from tracedoc.options import AnalysisOptions
    from tracedoc.pipeline import build_report, input_files, open_store

    export = many_kernels_csv(tmp_path / "tiled.raw.base-units.csv", 10_000)
    store, _ = open_store(input_files([export]), None)
    with store:
        started = time.process_time()
        report = build_report(store, AnalysisOptions())
        spent = time.process_time() - started
    assert report.metrics["ncu_coverage"][0]["launches"] == 10_000
    assert sorted(k["launches"] for k in report.metrics["ncu_kernels"]) == [2_500] * 4
    assert {f.rule for f in report.findings} >= {"compute-bound", "latency-bound", "small-grid"}
    assert spent < 30, spent


# 6. A flight-recorder dump's claims are checked as soon as they are read.

def test_flight_recorder_json_of_a_million_process_groups_and_no_ranks(tmp_path: Path) -> None:
    """samples/hang-ondemand-healthy's JSON dump of rank 1 (no records) with 1,000,000 process groups of no
    ranks: refused as soon as the dump is parsed, before any group is read."""
    source = ROOT / "samples" / "hang-ondemand-healthy" / "ondemand_dump_fr_trace_json.json.rank1"
    dump = json.loads(source.read_text())
    dump["pg_config"] = {str(i): {"name": str(i), "desc": "undefined", "ranks": "[]"} for i in range(1_000_000)}
    path = tmp_path / "fr_trace_json.json.rank1"
    path.write_text(json.dumps(dump))
    del dump
    outcome = tracedoc("analyze", "--no-cache", str(path), cpu_limit_s=60)
    assert_refused(outcome, "1,000,000 process groups in its pg_config", "TRACEDOC_MAX_FR_GROUPS")
    assert outcome.cpu_s < 15, outcome.cpu_s


# 7. Many ranks: the work of drawing savings and projecting fixes grows with the ranks, not with their square.

def test_300_small_ranks_draw_savings_per_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 copies of samples/ddp-straggler's rank 1 cut to 400 events, ranks 0 to 299 of one job: each finding
    (one per rank) is matched against its own rank's attribution pools, and the what-if projections read the
    attribution only for findings they can project. Counted, not timed: the matches stay within twice the pools
    (every finding used to be matched against every rank's pools, 300 × 1,800), and the attribution is walked a
    few times at most."""
    from tracedoc import causes
    from tracedoc.api import analyze
    from tracedoc.judge import savings

    calls = {"matches": 0, "rows": 0}
    matches, in_window = savings.Claim.matches, causes.in_window

    def counted_matches(self: savings.Claim, *args: Any) -> bool:
        calls["matches"] += 1
        return matches(self, *args)

    def counted_in_window(cause: str) -> bool:
        calls["rows"] += 1
        return in_window(cause)

    monkeypatch.setattr(savings.Claim, "matches", counted_matches)
    monkeypatch.setattr(causes, "in_window", counted_in_window)
    report = analyze([many_rank_traces(tmp_path / "job", 300)], use_cache=False)
    assert report.summary["ranks"] == 300 and len(report.inputs) == 300
    pools = len(report.attribution)
    assert pools >= 300 and len(report.findings) >= 300
    assert calls["matches"] <= 2 * pools, (calls, pools)
    assert calls["rows"] <= 10 * pools, (calls, pools)


def test_flight_recorder_dumps_of_1000_ranks(tmp_path: Path) -> None:
    """samples/hang-4rank-stuck's dumps given to a job of 1,000 ranks (tests/hostile_fr.py): rank 2 never issued
    collective #3 and the 999 others wait in it. The culprit and its victims are found, the victims said as
    ranges, not 999 numbers (the finding's message ran to 10,145 characters), and the work grows with the
    ranks: about 6.5 s of CPU for 300 ranks, 17 for 900 and 18 for 1,000."""
    outcome = tracedoc("analyze", "--no-cache", str(many_rank_dumps(tmp_path / "job", 1_000)), "--format", "json",
                       cpu_limit_s=150)
    assert outcome.code == 0, outcome.err[-2000:]
    report = json.loads(outcome.out)
    assert report["summary"]["ranks"] == 1_000
    hang = next(f for f in report["findings"] if f["rule"] == "collective-hang")
    assert hang["scope"] == {"rank": 2, "pg": "0", "seq": 3}
    assert "ranks 0, 1, 3–999 issued it and wait for rank 2" in hang["message"]
    assert hang["message"].endswith("Rank 2 is the culprit; ranks 0, 1, 3–999 are its victims.")
    assert len(hang["message"]) < 1_000
    assert outcome.cpu_s < 45, outcome.cpu_s


# What a profiler wrote beside the files tracedoc reads is named from its first MiB by patterns linear in it.

NCU_PAGES = ROOT / "tests" / "data" / "ncu-pages"


@pytest.mark.parametrize("case", ["report-path-of-spaces", "host-of-at-signs"])
def test_a_long_line_in_what_ncu_printed_is_named_in_bounded_time(tmp_path: Path, case: str) -> None:
    """Edited copies of ncu's printed text: the H200 run's log whose report path is padded by 1 MiB of spaces
    (14.5 s of CPU when a pattern backtracked over them), and the A40 details page as text whose first process
    line's host is 100,000 '@' and a space (59 s): both refused in one line, in little CPU time."""
    if case == "report-path-of-spaces":
        log = (NCU_PAGES / "h200_torch_gemm_softmax_full.ncu_stdout.txt").read_text()
        text, says = log.replace("==PROF== Report: ", "==PROF== Report: a" + " " * (1 << 20), 1), "ncu's log"
    else:
        page = gzip.decompress((NCU_PAGES / "a40_julia_indexspaces.details.txt.gz").read_bytes()).decode()
        assert "[4597] julia@127.0.0.1\n" in page
        text, says = page.replace("@127.0.0.1", "@" * 100_000 + " x", 1), "ncu's details page as printed text"
    path = tmp_path / f"{case}.txt"
    path.write_text(text)
    outcome = tracedoc("analyze", "--no-cache", str(path), cpu_limit_s=60)
    assert_refused(outcome, says)
    assert outcome.cpu_s < 10, outcome.cpu_s
