"""NCCL flight-recorder dumps: hang culprits and mismatches on real dumps, compared with torch's fr_trace.

The samples are the automatic dumps of three real 2-rank hangs (torch 2.11, NCCL 2.28.9); each SOURCE.md holds
what ``python -m torch.distributed.flight_recorder.fr_trace`` printed for them. fr_trace blames "the other rank"
on a mismatch and stops when a dump is missing; tracedoc must report both sides and go on.
"""

from __future__ import annotations

import json
import os
import pickle
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
