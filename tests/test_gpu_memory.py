"""GPU memory: allocator events of real PyTorch traces and allocator snapshots (samples/memory-*, made on an H200
by workloads/memory_leak/run.py; each SOURCE.md and expected.yaml gives the truth it was built with).

The leak keeps every step's 2048 × 4096 float32 output: 32 MiB (33,554,432 bytes) more held per step, allocated at
run.py:48 (forward). The fixed twin keeps a float instead. The OOM run leaks the same way under a memory cap until
Adam asks for 64 MiB (67,108,864 bytes) and fails. The fragment run leaves fifty 4 MiB holes between live buffers.
"""

from __future__ import annotations

import gzip
import pickle
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.api import open_store
from tracedoc.cli import cli
from tracedoc.ingest import discover
from tracedoc.report import Report

LEAK_PER_STEP = 32 << 20
OOM_REQUEST = 64 << 20


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {case: analyze(SAMPLES / f"memory-{case}", use_cache=False) for case in ("leak", "fixed", "oom", "fragment")}


def rules(report: Report) -> list[str]:
    return [f.rule for f in report.findings]


def finding(report: Report, rule: str):
    return next(f for f in report.findings if f.rule == rule)


def test_the_leak_is_found_with_its_rate_and_site(reports: dict[str, Report]) -> None:
    leak = finding(reports["leak"], "memory-leak")
    assert leak.impact_bytes == pytest.approx(LEAK_PER_STEP, rel=0.05)
    evidence = {e.name: e.value for e in leak.evidence}
    assert evidence["growth per step"] == pytest.approx(LEAK_PER_STEP, rel=0.05)
    assert evidence["allocated at"].endswith("run.py:48 (forward)")
    assert evidence["that site's allocations still held per step"] == pytest.approx(LEAK_PER_STEP, rel=0.05)
    # steps to OOM: what is left of the H200's memory over the rate
    left = reports["leak"].memory[0]["capacity_bytes"] - reports["leak"].memory[0]["reserved_peak_bytes"]
    assert evidence["steps until the device's memory is full at this rate"] == pytest.approx(left / LEAK_PER_STEP, 0.01)
    assert "32.0 MiB more after every step" in leak.message


def test_the_fixed_twin_is_quiet(reports: dict[str, Report]) -> None:
    fixed = reports["fixed"]
    assert not {"memory-leak", "oom", "memory-fragmentation", "memory-headroom"} & set(rules(fixed))
    assert fixed.memory[0]["growth_bytes_per_step"] == 0
    assert fixed.memory[0]["growth_sites"] == []


def test_the_oom_is_explained(reports: dict[str, Report]) -> None:
    oom = finding(reports["oom"], "oom")
    assert oom.severity == "critical" and oom.impact_bytes == OOM_REQUEST
    evidence = {e.name: e.value for e in oom.evidence}
    assert evidence["request that failed"] == OOM_REQUEST
    assert evidence["asked for at"].endswith("run.py:59 (train_step)")  # opt.step(), from the snapshot's frames
    assert evidence["free on the device (CUDA)"] > 100 << 30  # the cap, not the card, ran out
    # the leak before it is named too, at the same rate
    assert finding(reports["oom"], "memory-leak").impact_bytes == pytest.approx(LEAK_PER_STEP, rel=0.05)


def test_fragmentation_from_the_snapshot(reports: dict[str, Report]) -> None:
    frag = finding(reports["fragment"], "memory-fragmentation")
    evidence = {e.name: e.value for e in frag.evidence}
    assert evidence["largest such hole"] == 4 << 20
    assert evidence["free inside segments that hold live tensors"] >= 50 * (4 << 20)
    # the buffers left between the holes pin those segments: their line, and the fifty holes beside them
    assert evidence["segments pinned by tensors allocated at"].endswith("run.py:93 (main)")
    assert evidence["free inside the segments that site pins"] == 50 * (4 << 20)
    assert "memory-leak" not in rules(reports["fragment"])
    assert "memory-fragmentation" not in rules(reports["leak"])


def test_memory_findings_rank_after_time_and_save_bytes(reports: dict[str, Report]) -> None:
    report = reports["fragment"]
    kinds = [f.impact_bytes is not None for f in report.findings]
    assert kinds == sorted(kinds)  # time findings first, then memory ones
    for f in report.findings:
        if f.impact_bytes is not None:
            assert f.impact_ms == 0 and f.impact_pct == 0
    wall = report.summary["wall_ms"]
    assert sum(f.impact_ms for f in report.findings if not f.part_of) <= wall


def test_the_snapshot_is_joined_with_its_trace(reports: dict[str, Report]) -> None:
    memory = reports["leak"].memory
    assert len(memory) == 1  # one GPU: the snapshot is tied to the trace, not a second device
    assert memory[0]["rank"] == 0 and memory[0]["fragmentation"]["snapshot_id"] is not None
    assert memory[0]["peak_at"]["step"] == 10


def test_trace_alone_still_finds_the_leak(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "memory-leak" / "trace.json.gz", tmp_path / "trace.json.gz")
    report = analyze(tmp_path, use_cache=False)
    leak = finding(report, "memory-leak")
    assert leak.impact_bytes == pytest.approx(LEAK_PER_STEP, rel=0.05)
    # the profiler names a Python frame by its function's first line (def forward: line 47), the snapshot by the line
    assert {e.name: e.value for e in leak.evidence}["allocated at"] == "run.py:47 (forward)"


def test_json_and_markdown_carry_the_memory_section(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "memory-oom"), "--no-cache", "--format", "json",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = Report.from_json(out.read_text())
    assert data.memory[0]["ooms"][0]["requested_bytes"] == OOM_REQUEST
    assert data.findings[0].impact_bytes == OOM_REQUEST
    md = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "memory-leak"), "--no-cache", "--format", "md"])
    assert "## Memory" in md.stdout and "32.0 MiB/step" in md.stdout
    assert "MiB of memory" in md.stdout  # the saving is bytes


def test_frames_hold_the_memory_tables(reports: dict[str, Report]) -> None:
    steps = reports["leak"].frames["memory_steps"]
    ends = steps.filter(~steps["warmup"])["allocated_end_bytes"].to_list()
    assert {b - a for a, b in zip(ends, ends[1:])} == {LEAK_PER_STEP}


def _snapshot(tmp_path: Path, data: bytes, name: str = "snapshot.pickle") -> list[str]:
    path = tmp_path / name
    path.write_bytes(data)
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    return [str(result.exit_code), result.stderr]


def test_hostile_snapshots_get_one_line_and_exit_2(tmp_path: Path) -> None:
    real = gzip.decompress((SAMPLES / "memory-oom" / "snapshot.pickle.gz").read_bytes())

    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    cases = {
        "truncated": real[: len(real) // 2],
        "global": pickle.dumps({"segments": [Boom()], "device_traces": []}),
        "deep": pickle.dumps({"segments": [], "device_traces": [], "x": _deep(200)}),
        "not a list": pickle.dumps({"segments": {"total_size": 1}, "device_traces": []}),
        "corrupt": real[:40] + bytes(b ^ 0x5A for b in real[40:200]) + real[200:],
    }
    for name, data in cases.items():
        code, err = _snapshot(tmp_path, data)
        assert code == "2", (name, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (name, err)
    # a record of the history or the segments referred to again (200 kB that would be 10 M rows): torch's
    # snapshots never do, and the reader keeps no record it has read
    block = {"address": 1, "size": 2, "state": "inactive"}
    again = pickle.dumps({"segments": [{"device": 0, "address": 1, "total_size": 2, "blocks": [block] * 50}] * 200_000,
                          "device_traces": []})
    code, err = _snapshot(tmp_path, again)
    assert code == "2" and "refers back to a record" in err
    # distinct segments sharing one list of 50 blocks: 2.6 MB that would be 10 M rows, past the budget of values
    blocks = [block] * 50
    shared = pickle.dumps({"segments": [{"device": 0, "address": i, "total_size": 2, "blocks": blocks}
                                        for i in range(200_000)], "device_traces": []})
    code, err = _snapshot(tmp_path, shared)
    assert code == "2" and "values" in err, err
    # a pickle that refuses a class by its opcode names it, whatever the protocol
    for protocol in (2, 5):
        code, err = _snapshot(tmp_path, pickle.dumps({"segments": [], "device_traces": [[Path("x")]]}, protocol))
        assert code == "2" and "pathlib" in err and "nothing in the file was run" in err, err


def test_any_protocol_and_several_devices_read_alike(tmp_path: Path) -> None:
    """The leak's snapshot written again by pickle with protocols 2 to 5 and its history split over two devices:
    every record is read, each under its device, whichever opcodes (BINPUT or MEMOIZE, frames or not) carry it."""
    real = pickle.loads(gzip.decompress((SAMPLES / "memory-leak" / "snapshot.pickle.gz").read_bytes()))
    entries = real["device_traces"][0]
    split = dict(real, device_traces=[entries[:500], entries[500:], []])
    counts = set()
    for protocol in (2, 3, 4, 5):
        path = tmp_path / f"p{protocol}" / "snapshot.pickle"
        path.parent.mkdir()
        path.write_bytes(pickle.dumps(split, protocol))
        store, _ = open_store(discover([path]), None)
        with store:
            per_device = tuple((r["device"], r["n"]) for r in store.query(
                "SELECT device, count(*) AS n FROM memory_actions GROUP BY ALL ORDER BY 1"))
            blocks = store.scalar("SELECT count(*) FROM memory_blocks")
            held = store.scalar("SELECT sum(size) FROM memory_actions WHERE site LIKE '%run.py:48 (forward)' "
                                "AND action = 'alloc'")
        counts.add((per_device, blocks, held))
    forward = sum(e["size"] for e in entries if e["action"] == "alloc"
                  and any(f["filename"].endswith("run.py") and f["line"] == 48 for f in e["frames"]))
    assert forward > 0
    assert counts == {(((0, 500), (1, len(entries) - 500)), sum(len(s["blocks"]) for s in real["segments"]),
                       forward)}


def _deep(n: int) -> list:
    value: list = []
    for _ in range(n):
        value = [value]
    return value


def test_fuzzed_snapshots_never_crash(tmp_path: Path) -> None:
    import random

    real = gzip.decompress((SAMPLES / "memory-leak" / "snapshot.pickle.gz").read_bytes())
    rng = random.Random(7)
    for i in range(12):
        data = bytearray(real)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(2, len(data))] = rng.randrange(256)
        code, err = _snapshot(tmp_path, bytes(data), f"fuzz{i}.pickle")
        assert code in ("0", "2"), err
        assert "Traceback" not in err


def test_headroom_held_from_before_the_trace_is_not_told_to_checkpoint_activations() -> None:
    """tracelens-vllm-graph-capture: vLLM reserves its KV cache up front, 178.5 GiB of a 192 GiB GPU, all of it
    allocated before the trace began. memory-headroom told it to checkpoint activations and shard optimizer state;
    it says where the memory came from, and a training step near its capacity (memory-leak, held to a headroom
    threshold it crosses) keeps the training advice."""
    serving = next(f for f in analyze([SAMPLES / "tracelens-vllm-graph-capture"]).findings
                   if f.rule == "memory-headroom")
    assert "178.5 GiB of it allocated before the trace began" in serving.message
    assert "KV cache" in serving.fix and "checkpointing" not in serving.fix
    training = next(f for f in analyze([SAMPLES / "memory-leak"],
                                       thresholds={"memory-headroom": {"max_peak_pct": 1}}).findings
                    if f.rule == "memory-headroom")
    assert training.fix.startswith("Lower the peak before inputs grow: activation checkpointing")
