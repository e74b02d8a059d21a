"""NCCL flight-recorder dumps: hang culprits and mismatches on real dumps, compared with torch's fr_trace.

The samples are the automatic dumps of three real 2-rank hangs (torch 2.11, NCCL 2.28.9); each SOURCE.md holds
what ``python -m torch.distributed.flight_recorder.fr_trace`` printed for them. fr_trace blames "the other rank"
on a mismatch and stops when a dump is missing; tracedoc must report both sides and go on.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.report import Finding, Report

SLOW = SAMPLES / "hang-slow-rank"
TYPE = SAMPLES / "hang-type-mismatch"
SIZE = SAMPLES / "hang-size-mismatch"
HEALTHY = SAMPLES / "hang-ondemand-healthy"
FOUR = SAMPLES / "hang-4rank-stuck"

# What fr_trace concluded (verbatim lines from the samples' SOURCE.md).
FR_TRACE = {
    "slow": "missing ranks: {1}",
    "type": "error msg: Culprit rank 0; Error type: COLLECTIVE_TYPE_MISMATCH",
    "size": "error msg: Culprit rank 0; Error type: SIZE_OR_SYNTAX_MISMATCH",
    "four": "missing ranks: {2}",
}


UNMEASURED = "waited at least (unmeasured: the group's timeout, or from the enqueue to the dump where longer)"
BUSY = SAMPLES / "hang-2rank-gpu-busy"
BUSY_UNTIMED = SAMPLES / "hang-2rank-gpu-busy-notiming"


def _findings(report: Report, rule: str) -> list[Finding]:
    return [f for f in report.findings if f.rule == rule]


def _evidence(finding: Finding) -> dict[str, Any]:
    return {e.name: e.value for e in finding.evidence}


def _run_cli(*args: str) -> Any:
    return CliRunner().invoke(cli, ["analyze", *args, "--no-cache"])


def _copy(tmp_path: Path, *files: Path) -> Path:
    folder = tmp_path / "dumps"
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, folder / f.name)
    return folder


def _load_sample_dump(path: Path) -> dict[str, Any]:
    """A bundled sample dump, read to derive variants of it (our own trusted file)."""
    with path.open("rb") as f:
        return pickle.load(f)


def _write_dump(path: Path, dump: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(dump, protocol=2))
    return path


def test_references_are_documented() -> None:
    """The fr_trace verdicts the tests compare with are the ones recorded beside the samples."""
    assert FR_TRACE["slow"] in (SLOW / "SOURCE.md").read_text()
    assert FR_TRACE["type"] in (TYPE / "SOURCE.md").read_text()
    assert FR_TRACE["size"] in (SIZE / "SOURCE.md").read_text()
    assert FR_TRACE["four"] in (FOUR / "SOURCE.md").read_text()


def test_slow_rank_is_the_culprit_and_rank_0_its_victim() -> None:
    """Agrees with fr_trace (rank 1 missing from #3) and adds what rank 1 last did, where, and how long ago."""
    report = analyze([SLOW])
    [hang] = _findings(report, "collective-hang")
    assert hang.severity == "critical"
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    ev = _evidence(hang)
    assert ev["waiting in the collective"] == "rank 0"
    assert ev["the collective"] == "#3 all_reduce [[3, 4]] Float"
    assert ev["culprit's last collective on this group"] == "#2 all_reduce [[3, 4]] Float (completed)"
    assert ev["culprit's last call site"] == "fr_job.py:13 (<module>)"
    assert ev["culprit's stack at that call (innermost first)"].endswith("<module> (fr_job.py:13)")
    assert 10_000 < ev["waited at least"] < 12_000  # the group timeout is 10 s
    assert 16_000 < ev["culprit silent on this group for at least"] < 17_000
    assert hang.impact_ms == pytest.approx(ev["waited at least"])
    assert "Rank 1 is the culprit; rank 0 is its victim." in hang.message
    assert not _findings(report, "collective-mismatch")


def test_collectives_metric_shows_each_rank_progress() -> None:
    rows = {r["rank"]: r for r in analyze([SLOW]).metrics["collectives"]}
    assert (rows[0]["last_enqueued_seq"], rows[0]["last_completed_seq"], rows[0]["pending_seq"]) == (3, 2, 3)
    assert (rows[1]["last_enqueued_seq"], rows[1]["last_completed_seq"], rows[1]["pending_seq"]) == (2, 2, None)
    assert rows[0]["last_state"] == "started" and rows[1]["last_state"] == "completed"


def test_type_mismatch_reports_both_sides_and_blames_no_one() -> None:
    """fr_trace says 'Culprit rank 0'; both ranks issued #3, so tracedoc shows both calls and names no culprit."""
    report = analyze([TYPE])
    [mismatch] = _findings(report, "collective-mismatch")
    assert mismatch.scope.to_dict() == {"pg": "0", "seq": 3}
    ev = _evidence(mismatch)
    assert ev["what differs"] == "operation"
    sides = ev["each side"]
    assert "rank 0 issued all_reduce [[3, 4]] Float → [[3, 4]] (started) at fr_job.py:31 (<module>)" in sides
    assert "rank 1 issued broadcast [[3, 4]] Float → [[3, 4]] (started) at fr_job.py:33 (<module>)" in sides
    assert ev["waiting in it"] == "ranks 0, 1"
    assert ev["arrived last"].startswith("rank 1, 458")
    assert "odd one out" not in ev  # two ranks: neither side is the odd one
    assert not _findings(report, "collective-hang")
    assert all(f.scope.rank is None for f in report.findings), "no finding may blame one rank"


def test_size_mismatch_reports_both_shapes() -> None:
    """fr_trace says 'Culprit rank 0'; rank 0's smaller all_reduce completed while rank 1 waits for the rest."""
    report = analyze([SIZE])
    [mismatch] = _findings(report, "collective-mismatch")
    assert mismatch.scope.to_dict() == {"pg": "0", "seq": 3}
    ev = _evidence(mismatch)
    assert ev["what differs"] == "input sizes, output sizes"
    assert "rank 0 issued all_reduce [[3, 4]] Float → [[3, 4]] (completed)" in ev["each side"]
    assert "rank 1 issued all_reduce [[5, 4]] Float → [[5, 4]] (started)" in ev["each side"]
    assert ev["waiting in it"] == "rank 1"
    assert 10_000 < mismatch.impact_ms < 12_000
    assert not _findings(report, "collective-hang")
    assert all(f.scope.rank is None for f in report.findings)


def test_missing_rank_is_named_and_the_analysis_goes_on(tmp_path: Path) -> None:
    """Only rank 0's dump: fr_trace stops ('missing rank files'); tracedoc names rank 1 as the unconfirmed suspect."""
    folder = _copy(tmp_path, SLOW / "trace_rank_0")
    result = _run_cli(str(folder), "--format", "json")
    assert result.exit_code == 0, result.output
    report = Report.from_json(result.output)
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    assert "left no flight-recorder dump" in hang.message and "unconfirmed" in hang.message
    assert _evidence(hang)["members without a dump"] == "1"
    assert {r["rank"]: r["has_dump"] for r in report.metrics["collectives"]} == {0: True, 1: False}


def test_automatic_dump_is_chosen_among_several_per_rank(tmp_path: Path) -> None:
    """Automatic, on-demand (pickle and JSON) and empty generic dumps side by side: one dump per rank is read."""
    folder = _copy(tmp_path, *SLOW.glob("trace_rank_*"), *(p for p in HEALTHY.iterdir() if "rank" in p.name))
    report = analyze([folder])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    dumps = {Path(d["path"]).name: d for d in report.metrics["flight_recorder_dumps"]}
    assert {name for name, d in dumps.items() if d["used"]} == {"trace_rank_0", "trace_rank_1"}
    assert dumps["ondemand_dump_nccl_trace.pickle.rank1"]["note"] == "not used: rank 1 is read from trace_rank_1"
    assert "holds no records" in dumps["ondemand_dump_fr_trace.pickle.rank0"]["note"]


def test_json_and_pickle_dumps_agree(tmp_path: Path) -> None:
    """The on-demand JSON dumps (string pg_status, lists for tuples, no stacks) say what the pickles say."""
    def progress(encoding: str, pattern: str) -> list[dict[str, Any]]:
        rows = analyze([_copy(tmp_path / encoding, *HEALTHY.glob(pattern))]).metrics["collectives"]
        return [{k: v for k, v in r.items() if k != "last_call_site"} for r in rows]

    from_json = progress("json", "ondemand_dump_nccl_trace_json.json.rank*")
    from_pickle = progress("pickle", "ondemand_dump_nccl_trace.pickle.rank*")
    assert from_json == from_pickle
    assert [(r["rank"], r["last_completed_seq"], r["pending_seq"]) for r in from_json] == [(0, 2, None), (1, 2, None)]


def test_oldest_schema_without_status_or_timeout(tmp_path: Path) -> None:
    """torch 2.4 dumps (schema '2.1'): no pg_status, no timeout_ms, no thread fields, no library version."""
    for rank in (0, 1):
        dump = _load_sample_dump(SLOW / f"trace_rank_{rank}")
        dump = {"version": "2.1", "pg_config": dump["pg_config"], "entries": dump["entries"]}
        for entry in dump["entries"]:
            for key in ("timeout_ms", "thread_id", "thread_name"):
                entry.pop(key)
        _write_dump(tmp_path / "v21" / f"nccl_trace_rank_{rank}", dump)
    [hang] = _findings(analyze([tmp_path / "v21"]), "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    assert "group timeout" not in _evidence(hang)
    # Without a known timeout, a wait under min_wait_ms is a collective still in flight, not a hang.
    relaxed = analyze([tmp_path / "v21"], thresholds={"collective-hang": {"min_wait_ms": 20_000}})
    assert not _findings(relaxed, "collective-hang")
    # With the group's 10 s timeout in the dump, waiting past it is a hang whatever min_wait_ms says.
    assert _findings(analyze([SLOW], thresholds={"collective-hang": {"min_wait_ms": 20_000}}), "collective-hang")


def test_gloo_records_complete_when_retired(tmp_path: Path) -> None:
    """Gloo records carry no GPU events: they stay 'scheduled', and retired means completed."""
    for rank in (0, 1):
        dump = _load_sample_dump(SLOW / f"trace_rank_{rank}")
        for entry in dump["entries"]:
            entry["profiling_name"] = entry["profiling_name"].replace("nccl:", "gloo:")
            entry["state"] = "scheduled"
            entry["time_discovered_started_ns"] = entry["time_discovered_completed_ns"] = None
        _write_dump(tmp_path / "gloo" / f"trace_rank_{rank}", dump)
    report = analyze([tmp_path / "gloo"])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    assert "waited at least" not in _evidence(hang)  # no discovery times: the wait is not measured
    rows = {r["rank"]: r for r in report.metrics["collectives"]}
    assert rows[0]["backend"] == "gloo" and (rows[0]["last_completed_seq"], rows[0]["pending_seq"]) == (2, 3)


def test_coalesced_group_completes_with_its_coalesced_record(tmp_path: Path) -> None:
    """Members of a coalesced group are recorded without GPU events: only the 'coalesced' record completes."""
    for rank in (0, 1):
        dump = _load_sample_dump(SLOW / f"trace_rank_{rank}")
        second = dump["entries"][1]
        member = {**second, "state": "scheduled", "retired": False, "time_discovered_started_ns": None,
                  "time_discovered_completed_ns": None, "duration_ms": None}
        second["profiling_name"], second["input_sizes"], second["output_sizes"] = "nccl:coalesced", [], []
        dump["entries"].insert(1, member)
        _write_dump(tmp_path / "coalesced" / f"trace_rank_{rank}", dump)
    report = analyze([tmp_path / "coalesced"])
    rows = {r["rank"]: r for r in report.metrics["collectives"]}
    assert (rows[1]["last_completed_seq"], rows[1]["pending_seq"]) == (2, None)
    assert rows[1]["last_described"].startswith("all_reduce+coalesced")
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    assert not _findings(report, "collective-mismatch")


def _four_ranks(tmp_path: Path, sample: Path, odd_rank: int) -> Path:
    """Four ranks from a two-rank sample: ranks 0, 2 and 3 copy rank 0's dump, rank 1 keeps its own."""
    folder = tmp_path / sample.name
    for rank in range(4):
        dump = _load_sample_dump(sample / f"trace_rank_{0 if rank != odd_rank else 1}")
        dump["pg_config"]["0"]["ranks"] = "[0, 1, 2, 3]"
        _write_dump(folder / f"trace_rank_{rank}", dump)
    return folder


def test_four_ranks_name_every_victim_and_the_odd_one_out(tmp_path: Path) -> None:
    """With more members, the culprit is still the one that never issued #3; a lone variant is the odd one out."""
    [hang] = _findings(analyze([_four_ranks(tmp_path, SLOW, 1)]), "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    assert "ranks 0, 2, 3 issued it and wait" in hang.message
    [mismatch] = _findings(analyze([_four_ranks(tmp_path, TYPE, 1)]), "collective-mismatch")
    ev = _evidence(mismatch)
    assert ev["odd one out"] == "1" and "Rank 1 differs from all the others." in mismatch.message
    assert "rank 1 issued broadcast" in ev["each side"] and "ranks 0, 2, 3 issued all_reduce" in ev["each side"]


def test_real_four_rank_hang_names_rank_2_and_its_three_victims() -> None:
    """4×H200: rank 2 slept before #3. Agrees with fr_trace ('missing ranks: {2}') and adds rank 2's side."""
    seqs = {r: max(e["collective_seq_id"] for e in _load_sample_dump(FOUR / f"trace_rank_{r}")["entries"])
            for r in range(4)}
    assert seqs == {0: 3, 1: 3, 2: 2, 3: 3}  # what the dumps themselves say
    report = analyze([FOUR])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 2, "pg": "0", "seq": 3}
    ev = _evidence(hang)
    assert ev["waiting in the collective"] == "ranks 0, 1, 3"
    assert ev["the collective"] == "#3 all_reduce [[3, 4]] Float"
    assert ev["culprit's last collective on this group"] == "#2 all_reduce [[3, 4]] Float (completed)"
    assert ev["culprit's last call site"].endswith("workloads/hang/run.py:67 (main)")
    waits = {r["rank"]: r["waited_ms"] for r in report.metrics["collectives"]}
    assert waits[2] is None and all(10_000 < waits[r] < 15_000 for r in (0, 1, 3))  # the group timeout is 10 s
    assert ev["waited at least"] == max(waits[r] for r in (0, 1, 3)) == hang.impact_ms
    assert "ranks 0, 1, 3 issued it and wait for rank 2" in hang.message
    assert "Rank 2 is the culprit; ranks 0, 1, 3 are its victims." in hang.message
    assert not _findings(report, "collective-mismatch")


@pytest.mark.parametrize("protocol", [2, 4])
def test_hostile_pickle_is_refused_and_nothing_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return os.system, (f"touch {marker}",)

    dump = tmp_path / "trace_rank_0"
    dump.write_bytes(pickle.dumps({"version": "2.10", "pg_config": {}, "entries": [Payload()]}, protocol=protocol))
    result = _run_cli(str(dump))
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "refused" in result.output and "system" in result.output
    assert "Traceback" not in result.output
    assert not marker.exists(), "the pickle's payload ran"


@pytest.mark.parametrize("case", ["truncated", "empty file", "empty dump", "not a dump", "truncated json"])
def test_bad_dumps_exit_2_with_one_line(tmp_path: Path, case: str) -> None:
    raw = (SLOW / "trace_rank_0").read_bytes()
    content = {
        "truncated": raw[: len(raw) // 2],
        "empty file": b"",
        "empty dump": (HEALTHY / "ondemand_dump_fr_trace.pickle.rank0").read_bytes(),
        "not a dump": pickle.dumps(["version", "pg_config"], protocol=2),
        "truncated json": (HEALTHY / "ondemand_dump_nccl_trace_json.json.rank0").read_bytes()[:600],
    }[case]
    path = tmp_path / "trace_rank_0"
    path.write_bytes(content)
    result = _run_cli(str(path))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    expected = {"truncated": "truncated or corrupt", "empty file": "empty file", "empty dump": "nothing to analyse",
                "not a dump": "not a flight-recorder dump", "truncated json": "truncated or malformed"}[case]
    assert expected in result.output


def test_healthy_ondemand_dumps_report_no_hang() -> None:
    """Two completed collectives on both ranks: nothing is stuck; empty generic dumps in the folder are set aside."""
    result = _run_cli(str(HEALTHY), "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["findings"] == []
    used = [d for d in report["metrics"]["flight_recorder_dumps"] if d["used"]]
    assert sorted((d["rank"], d["encoding"]) for d in used) == [(0, "pickle"), (1, "pickle")]


# --- Dumps written without TORCH_NCCL_ENABLE_TIMING (the default) ---------------------------------------------------

UNTIMED_2 = SAMPLES / "hang-2rank-stuck-notiming"
UNTIMED_4 = SAMPLES / "hang-4rank-stuck-notiming"
GLOO = SAMPLES / "hang-gloo-2rank-stuck-notiming"


def _untimed(dump: dict[str, Any]) -> dict[str, Any]:
    """What torch writes for the same records with timing off (see hang-2rank-stuck-notiming/SOURCE.md): no start
    event, so no start time, no GPU duration, no 'started' state, and pg_status never counts a start."""
    for e in dump["entries"]:
        e.pop("duration_ms", None)
        e["time_discovered_started_ns"] = None
        if e["time_discovered_completed_ns"] is None:
            e["state"] = "scheduled"
    for s in (dump.get("pg_status") or {}).values():
        s["last_started_collective"] = -1
    return dump


def _untimed_copy(tmp_path: Path, sample: Path, pattern: str = "trace_rank_*") -> Path:
    folder = tmp_path / f"{sample.name}-untimed"
    for path in sample.glob(pattern):
        _write_dump(folder / path.name, _untimed(_load_sample_dump(path)))
    return folder


@pytest.mark.parametrize(("copy", "original"), [(UNTIMED_2, SLOW), (UNTIMED_4, FOUR)])
def test_untimed_samples_are_the_edits_their_source_describes(copy: Path, original: Path) -> None:
    """The no-timing samples hold exactly the real dumps with the edits SOURCE.md lists, nothing else."""
    files = sorted(p.name for p in original.glob("trace_rank_*"))
    assert files == sorted(p.name for p in copy.glob("trace_rank_*"))
    for name in files:
        assert _load_sample_dump(copy / name) == _untimed(_load_sample_dump(original / name))


def test_untimed_four_rank_hang_is_reported_with_its_lower_bound() -> None:
    """4×H200 hang (rank 2 stuck in host code) as dumped without timing: the waiting ranks' #3 stays 'scheduled' and
    the latest time in their dumps is #2's completion discovered 10-32 ms after #3 was enqueued. That is a lower bound
    of the wait, not a measured 32 ms wait: the hang is reported, as unmeasured, with what would measure it."""
    report = analyze([UNTIMED_4])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 2, "pg": "0", "seq": 3}
    ev = _evidence(hang)
    assert ev["waiting in the collective"] == "ranks 0, 1, 3"
    assert ev["culprit's last collective on this group"] == "#2 all_reduce [[3, 4]] Float (completed)"
    assert "waited at least" not in ev  # nothing measured
    # rank 1's dump bounds the wait by 31.7 ms only; the watchdog dumped on the 10 s timeout, so the wait reached it
    assert ev[UNMEASURED] == 10_000
    assert "The wait is not measured: the dumps were written without TORCH_NCCL_ENABLE_TIMING=1" in hang.message
    assert "dumps written on the watchdog's timeout mean it had waited the group's timeout, 10.0 s" in hang.message
    assert "31.7 ms" not in hang.message
    assert "Set TORCH_NCCL_ENABLE_TIMING=1" in hang.message
    assert hang.impact_ms == 10_000  # the group's timeout: the watchdog fired
    rows = {r["rank"]: r for r in report.metrics["collectives"]}
    assert all(rows[r]["waited_ms"] is None and rows[r]["last_state"] == "scheduled" for r in (0, 1, 3))
    assert not _findings(report, "collective-mismatch")


def test_untimed_two_rank_hang_without_any_bound() -> None:
    """Rank 0's #3 enqueue is the latest time in its dump, so the dump's own times bound the wait by nothing; the
    dump written on the watchdog's timeout means the wait reached the group's timeout, and the finding says so."""
    report = analyze([UNTIMED_2])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    ev = _evidence(hang)
    assert "waited at least" not in ev and ev[UNMEASURED] == 10_000
    assert "it had waited the group's timeout, 10.0 s" in hang.message and "TORCH_NCCL_ENABLE_TIMING=1" in hang.message
    assert "issued nothing more on this group for at least 5.4 s" in hang.message
    assert not _findings(report, "collective-mismatch")


def test_measured_short_wait_is_quiet_and_the_same_wait_unmeasured_is_not(tmp_path: Path) -> None:
    """hang-slow-rank edited so that rank 0's dump saw #3 start 5 ms after enqueueing it: with timing that is a
    measured 5 ms wait, a collective in flight; the same records without timing say nothing about how short the
    wait was, so rank 1, which never issued #3, is reported."""
    for rank in (0, 1):
        dump = _load_sample_dump(SLOW / f"trace_rank_{rank}")
        for e in dump["entries"]:
            if e["collective_seq_id"] == 3:
                e["time_discovered_started_ns"] = e["time_created_ns"] + 5_000_000
        _write_dump(tmp_path / "timed" / f"trace_rank_{rank}", dump)
        _write_dump(tmp_path / "untimed" / f"trace_rank_{rank}", _untimed(dump))
    timed = analyze([tmp_path / "timed"])
    assert not timed.findings
    assert [r["waited_ms"] for r in timed.metrics["collectives"]] == [5.0, None]
    [hang] = _findings(analyze([tmp_path / "untimed"]), "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}


def test_untimed_ondemand_dumps_of_a_healthy_job_stay_quiet(tmp_path: Path) -> None:
    """hang-ondemand-healthy's pickles with the no-timing edits: completed collectives count as done, nothing waits."""
    report = analyze([_untimed_copy(tmp_path, HEALTHY, "ondemand_dump_nccl_trace.pickle.rank*")])
    assert report.findings == []
    assert [(r["last_completed_seq"], r["pending_seq"]) for r in report.metrics["collectives"]] == [(2, None)] * 2


@pytest.mark.parametrize(("sample", "side"), [
    (TYPE, "rank 1 issued broadcast [[3, 4]] Float → [[3, 4]] (scheduled) at fr_job.py:33 (<module>)"),
    (SIZE, "rank 1 issued all_reduce [[5, 4]] Float → [[5, 4]] (scheduled) at fr_job.py:43 (<module>)"),
])
def test_mismatch_on_untimed_dumps(tmp_path: Path, sample: Path, side: str) -> None:
    """The mismatch samples with the no-timing edits: the mismatch is found the same way, its wait is unmeasured
    (no lower bound either: #3 is the latest time in the dumps), and the estimate is the group's timeout."""
    report = analyze([_untimed_copy(tmp_path, sample)])
    [mismatch] = _findings(report, "collective-mismatch")
    assert mismatch.scope.to_dict() == {"pg": "0", "seq": 3}
    assert side in _evidence(mismatch)["each side"]
    assert "waited at least" not in _evidence(mismatch)
    assert "The wait is not measured" in mismatch.message
    assert mismatch.impact_ms == 10_000
    assert not _findings(report, "collective-hang")


def test_real_gloo_hang_dumped_without_timing() -> None:
    """Real Gloo dumps (torch 2.13, CPU), taken while rank 0 waited in #3 and rank 1 slept before it: Gloo records stay
    'scheduled' with enqueue times only, and their pg_config names the group '' where the records say '0'."""
    report = analyze([GLOO])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    ev = _evidence(hang)
    assert ev["culprit's last call site"] == "samples/hang-gloo-2rank-stuck-notiming/gloo_hang.py:37 (main)"
    assert ev["culprit's last collective on this group"] == "#2 all_reduce [[3, 4]] Float (completed)"
    assert "Gloo records hold no start times" in hang.message and "TORCH_NCCL_ENABLE_TIMING" not in hang.message
    rows = report.metrics["collectives"]
    assert [(r["backend"], r["pg"], r["rank"], r["pending_seq"]) for r in rows] == [
        ("gloo", "0", 0, 3), ("gloo", "0", 1, None)]  # no member rows for the nameless pg_config group
    assert not _findings(report, "collective-mismatch")


# --- Hostile dumps: work bounded by the data --------------------------------------------------------------------


def _bomb(tmp_path: Path, case: str) -> Path:
    """Edited copies of hang-slow-rank's rank-0 dump that cost little to write and much to read."""
    dump = _load_sample_dump(SLOW / "trace_rank_0")
    entry = dump["entries"][0]
    if case == "references":  # 2,000,000 references to one record: 2 bytes each in the pickle
        dump["entries"] = [entry] * 2_000_000
    elif case == "dimensions":  # one tensor shape of 300,000 dimensions (a quadratic product of big ints)
        entry["input_sizes"] = [[2**40] * 300_000]
    elif case == "shapes":  # three records sharing one list of 1,000,000 references to a 64-dimension shape
        entry["input_sizes"] = [[3] * 64] * 1_000_000
        dump["entries"] = [entry, dict(entry), dict(entry)]
    raw = pickle.dumps(dump, protocol=2)
    if case == "nesting":  # a list nested 100,000 levels deep, in a field the reader does not use
        n = 100_000  # pushed as opcodes (Python's pickler recurses): n + 1 empty lists, each appended to the one below
        raw = raw[:-1] + b"X\x05\x00\x00\x00extra" + b"]" * (n + 1) + b"a" * n + b"s."
    path = tmp_path / "trace_rank_0"
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize(("case", "expected"), [
    ("references", "2,000,000 flight-recorder records, over the limit of 50,000 (set TRACEDOC_MAX_FR_ENTRIES"),
    ("dimensions", "a tensor shape of 300,000 dimensions in a flight-recorder record (at most 64)"),
    ("shapes", "over 10,000,000 values (a value shared by many records counts once per record; set "
               "TRACEDOC_MAX_FR_VALUES"),
    ("nesting", "nested more than 64 levels deep"),
])
def test_pickle_bombs_are_refused_quickly(tmp_path: Path, case: str, expected: str) -> None:
    """Each took from seconds to minutes and gigabytes of memory before the reader bounded its work: bounded by the
    CPU time this process spends on it (all threads), which a loaded machine does not inflate as it does the
    wall clock."""
    path = _bomb(tmp_path, case)
    started = _cpu_seconds()
    result = _run_cli(str(path))
    spent = _cpu_seconds() - started
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    assert expected in result.output
    assert spent < 20, f"{case}: {spent:.1f} s of CPU"


def test_limits_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRACEDOC_MAX_FR_ENTRIES / TRACEDOC_MAX_FR_VALUES raise or lower the limits; a bad value is one line."""
    monkeypatch.setenv("TRACEDOC_MAX_FR_ENTRIES", "2")
    result = _run_cli(str(SLOW))
    assert result.exit_code == 2 and "3 flight-recorder records, over the limit of 2" in result.output
    monkeypatch.setenv("TRACEDOC_MAX_FR_ENTRIES", "3")
    monkeypatch.setenv("TRACEDOC_MAX_FR_VALUES", "40")
    result = _run_cli(str(SLOW))
    assert result.exit_code == 2 and "over 40 values" in result.output
    monkeypatch.setenv("TRACEDOC_MAX_FR_VALUES", "10_000")
    assert _run_cli(str(SLOW)).exit_code == 0
    monkeypatch.setenv("TRACEDOC_MAX_FR_VALUES", "lots")
    result = _run_cli(str(SLOW))
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "TRACEDOC_MAX_FR_VALUES" in result.output


def _edited_json_dump(tmp_path: Path, groups: dict[str, Any]) -> Path:
    """An edited copy of hang-ondemand-healthy's JSON dump of rank 0 with ``groups`` added to its pg_config."""
    source = HEALTHY / "ondemand_dump_nccl_trace_json.json.rank0"
    dump = json.loads(source.read_text())
    dump["pg_config"].update(groups)
    path = tmp_path / "dumps" / source.name
    path.parent.mkdir()
    path.write_text(json.dumps(dump))
    return path


def _cpu_seconds() -> float:
    """CPU time this process has used (all its threads, DuckDB's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def test_a_dump_declaring_two_million_ranks_is_refused_after_reading_it(tmp_path: Path) -> None:
    """The real JSON dump with a group of 2,000,000 ranks (14 MB): the hang analyses and the report hold a row
    per member, which took 30 s and 2.9 GB. Past TRACEDOC_MAX_FR_RANKS it is one line and exit 2, at the cost of
    reading the dump alone."""
    ranks = "[" + ",".join(map(str, range(2_000_000))) + "]"
    path = _edited_json_dump(tmp_path, {"1": {"desc": "huge", "name": "1", "ranks": ranks}})
    started = _cpu_seconds()
    result = _run_cli(str(path))
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "process groups declare over 262,144 member ranks (set TRACEDOC_MAX_FR_RANKS" in result.output
    assert _cpu_seconds() - started < 10


def test_process_groups_are_inserted_in_bulk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real JSON dump with 200,000 more process groups of ranks [0, 1] (14 MB): inserted row by row they took
    80 s; as Arrow tables, one statement a table, reading the dump is most of the work. Their 400,000 members are
    over the default TRACEDOC_MAX_FR_RANKS (one line, exit 2) and read once it is raised."""
    from tracedoc.ingest.hang import flight_recorder
    from tracedoc.store import Store

    groups = {str(i): {"desc": "undefined", "name": str(i), "ranks": "[0, 1]"} for i in range(1, 200_001)}
    path = _edited_json_dump(tmp_path, groups)
    result = _run_cli(str(path))
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "TRACEDOC_MAX_FR_RANKS" in result.output
    monkeypatch.setenv("TRACEDOC_MAX_FR_RANKS", "1000000")
    with Store.create(None) as store:
        started = _cpu_seconds()
        flight_recorder.load(store, 0, path, tmp_path)
        assert _cpu_seconds() - started < 10
        assert store.scalar("SELECT count(*) FROM fr_process_groups") == 200_001
        assert store.scalar("SELECT count(*) FROM fr_pg_status") == 1
        assert store.scalar("SELECT ranks FROM fr_process_groups WHERE pg_name = '200000'") == [0, 1]


def test_deeply_nested_json_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fr.json.rank0"
    path.write_text('{"version": "2.10", "pg_config": {}, "entries": ' + "[" * 100_000 + "]" * 100_000 + "}")
    result = _run_cli(str(path))
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "truncated or malformed flight-recorder JSON (maximum recursion depth exceeded" in result.output


# --- Strings from dumps are valid Unicode in the store -----------------------------------------------------------


@pytest.mark.parametrize("encoding", ["pickle", "json"])
def test_lone_surrogates_and_control_characters_are_cleaned(tmp_path: Path, encoding: str) -> None:
    """hang-slow-rank edited so that the thread name, the frames' function names and the group's name and
    description carry lone surrogates and C0/C1 controls (a pickle carries them raw, JSON as \\ud800 escapes): the
    store holds U+FFFD instead and no control character, and the report prints."""
    folder = tmp_path / encoding
    for rank in (0, 1):
        dump = _load_sample_dump(SLOW / f"trace_rank_{rank}")
        dump["pg_config"] = {"0\udfff": {"name": "0\udfff", "desc": "default\x85pg", "ranks": "[0, 1]"}}
        for e in dump["entries"]:
            e["thread_name"] = "py\ud800thon\x1b[31m"
            e["process_group"] = ("0\udfff", "default\x85pg")
            e["frames"] = [{**f, "name": f["name"] + "\ud800\x07"} for f in e["frames"]]
        if encoding == "pickle":
            _write_dump(folder / f"trace_rank_{rank}", dump)
        else:
            for e in dump["entries"]:
                e.pop("frames")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"fr.json.rank{rank}").write_text(json.dumps(dump))  # ensure_ascii: \ud800 escapes
    result = _run_cli(str(folder))
    assert result.exit_code == 0, result.output
    assert "Process group 0\ufffd (defaultpg) hangs in collective #3" in " ".join(result.output.split())
    report = analyze([folder])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0\ufffd", "seq": 3}
    if encoding == "pickle":
        assert _evidence(hang)["culprit's last call site"] == "fr_job.py:13 (<module>\ufffd)"
    text = json.dumps(report.to_dict(), ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate left anywhere
    assert not any(ch in text for ch in "\x07\x1b\x85")


def test_a_limit_that_is_not_ascii_digits_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """'²' passes str.isdigit but not int(): the limit's variable is refused in one line, not an internal error."""
    monkeypatch.setenv("TRACEDOC_MAX_FR_ENTRIES", "²")
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "hang-slow-rank"), "--no-cache"])
    assert result.exit_code == 2 and "TRACEDOC_MAX_FR_ENTRIES" in result.stderr


def test_a_gpu_that_never_started_the_collective_is_the_culprit() -> None:
    """2×H200 hang with timing: both ranks issued all_reduce #3, rank 1's GPU was still spinning in an earlier kernel,
    so its record stays 'scheduled' while rank 0's is 'started'. Rank 1 is the culprit (torch's fr_trace, 2.13,
    names rank 0), and the advice points at the GPU work queued before the collective."""
    report = analyze([BUSY])
    [hang] = _findings(report, "collective-hang")
    assert hang.scope.to_dict() == {"rank": 1, "pg": "0", "seq": 3}
    assert "rank 0 issued it and waits for rank 1, which issued it, but its GPU never started it" in hang.message
    assert "Rank 1 is the culprit; rank 0 is its victim." in hang.message
    assert _evidence(hang)["waiting in the collective"] == "rank 0"
    assert 14_000 < _evidence(hang)["waited at least"] < 15_000  # rank 0's #3, started, as of its dump
    assert hang.fix.startswith("Find why the GPU of rank 1 never reached collective #3")
    assert "Culprit rank 0" in (BUSY / "SOURCE.md").read_text()
    assert not _findings(report, "collective-incomplete") and not _findings(report, "collective-mismatch")


def test_a_collective_every_rank_issued_and_none_completed_is_reported_without_a_culprit() -> None:
    """The same hang dumped without TORCH_NCCL_ENABLE_TIMING (the default): both records of #3 stay 'scheduled',
    so no rank can be named. tracedoc reports the incomplete collective, says why the dumps cannot name the rank,
    how to find it, and that the watchdog's dump means the 10 s timeout was reached (fr_trace reports nothing)."""
    report = analyze([BUSY_UNTIMED])
    assert not _findings(report, "collective-hang") and not _findings(report, "collective-mismatch")
    [stuck] = _findings(report, "collective-incomplete")
    assert stuck.severity == "critical" and stuck.scope.to_dict() == {"pg": "0", "seq": 3}
    assert "every member (ranks 0, 1) issued it and none completed it" in stuck.message
    assert "cannot tell a GPU that never started it" in stuck.message
    assert stuck.fix.startswith("Run again with TORCH_NCCL_ENABLE_TIMING=1")
    assert _evidence(stuck)[UNMEASURED] == 10_000 and stuck.impact_ms == 10_000
