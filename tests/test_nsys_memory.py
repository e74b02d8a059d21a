"""Nsight Systems' CUDA memory events (`nsys profile --cuda-memory-usage=true`) on the memory_leak workload's leak
and its fixed twin (samples/nsys-memory-*, H200): what CUDA gave the process is read into the same memory model as
the PyTorch profiler's allocator events. The figures are recomputed here from the export's own
CUDA_GPU_MEMORY_USAGE_EVENTS with sqlite3, and the growth checked against what the workload printed."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.api import analyze
from tracedoc.cli import cli
from tracedoc.diff import build_diff, load_side
from tracedoc.report import Report

LEAK, FIXED = SAMPLES / "nsys-memory-leak", SAMPLES / "nsys-memory-fixed"


def export(sample: Path, tmp: Path) -> Path:
    """The sample's export, unpacked."""
    out = tmp / f"{sample.name}.sqlite"
    if not out.exists():
        with lzma.open(sample / "sample.sqlite.xz") as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def device_memory(path: Path) -> list[tuple[int, int]]:
    """(time, signed bytes) of every allocation and free of device memory (device, array, static), in order."""
    with sqlite3.connect(path) as con:
        return con.execute("""
            SELECT start, CASE memoryOperationType WHEN 1 THEN -bytes ELSE bytes END
            FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind IN (2, 3, 5) ORDER BY start""").fetchall()


@pytest.fixture(scope="module")
def leak(tmp_path_factory: pytest.TempPathFactory) -> Report:
    return analyze([export(LEAK, tmp_path_factory.mktemp("nsys-memory"))], use_cache=False)


def test_the_curve_is_what_cuda_gave(leak: Report, tmp_path: Path) -> None:
    (gpu,) = leak.memory
    events = device_memory(export(LEAK, tmp_path))
    running = 0
    totals = []
    for _, delta in events:
        running += delta
        totals.append(running)
    assert gpu["basis"] == "cuda"
    assert gpu["peak_bytes"] == max(totals) == 2_150_073_570
    assert (gpu["allocated_start_bytes"], gpu["allocated_end_bytes"]) == (totals[0], totals[-1])
    assert gpu["capacity_bytes"] == 150_109_880_320  # TARGET_INFO_GPU.totalMemory


def test_leak_named_with_its_amount_and_range(leak: Report) -> None:
    truth = yaml.safe_load((LEAK / "expected.yaml").read_text())["truth"]
    (finding,) = [f for f in leak.findings if f.rule == "memory-leak"]
    assert finding.impact_bytes == pytest.approx(truth["taken_from_cuda_per_step"], rel=0.05)
    assert "from CUDA (cudaMalloc) inside the range optimizer" in finding.message
    assert "tensors that stay alive" not in finding.message  # CUDA sees the allocator's segments, never tensors


def test_text_report_says_what_the_figures_count(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["analyze", str(export(LEAK, tmp_path)), "--no-cache", "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "peak taken from CUDA 2.0 GiB" in result.output
    assert "reserved but unallocated" not in result.output  # both totals are CUDA's: no such figure


def test_fixed_twin_is_quiet_and_the_diff_shows_the_growth_gone(tmp_path: Path) -> None:
    fixed = export(FIXED, tmp_path)
    with sqlite3.connect(fixed) as con:
        (first_step,) = con.execute("SELECT min(start) FROM NVTX_EVENTS WHERE text = 'train_step'").fetchone()
    assert not [d for t, d in device_memory(fixed) if t > first_step]  # nothing taken in the steps
    diff = build_diff(load_side(export(LEAK, tmp_path)), load_side(fixed))
    (gpu,) = diff.memory
    before, after = gpu.pair("growth_bytes_per_step")
    assert before == pytest.approx(33_554_432, rel=0.05) and after == 0


def test_export_without_memory_events_has_no_memory_section() -> None:
    report = analyze([SAMPLES / "nsys-torch-h100" / "sample.sqlite"], use_cache=False)
    assert report.memory == [] and not [f for f in report.findings if f.rule.startswith("memory")]


def edited_copy(tmp: Path, name: str, rows: list[tuple[int, int, int, int]]) -> Path:
    """An edited copy of the leak's export with extra CUDA memory events: (start, address, bytes, operation)."""
    path = tmp / f"{name}.sqlite"
    shutil.copyfile(export(LEAK, tmp), path)
    with sqlite3.connect(path) as con:
        (gpid, context) = con.execute("SELECT globalPid, contextId FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
                                      "WHERE memKind = 2 LIMIT 1").fetchone()
        con.executemany("""
            INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes,
                                                      memKind, memoryOperationType, correlationId)
            VALUES (?, ?, 0, ?, ?, 0, ?, 2, ?, 0)""",
                        [(start, gpid, context, address, size, op) for start, address, size, op in rows])
    return path


def test_frees_bring_the_total_down_and_the_leak_goes(tmp_path: Path) -> None:
    """An edited copy of the leak's export in which every allocation made in the steps is freed 1 µs later: what
    CUDA gave the process no longer grows, and the peak is the total before the steps plus the largest segment."""
    with sqlite3.connect(export(LEAK, tmp_path)) as con:
        (first_step,) = con.execute("SELECT min(start) FROM NVTX_EVENTS WHERE text = 'train_step'").fetchone()
        in_steps = con.execute("SELECT start, address, bytes FROM CUDA_GPU_MEMORY_USAGE_EVENTS "
                               "WHERE memKind = 2 AND start > ?", [first_step]).fetchall()
    assert len(in_steps) == 10  # one 64 MiB segment every second step
    before = sum(d for t, d in device_memory(export(LEAK, tmp_path)) if t <= first_step)
    path = edited_copy(tmp_path, "freed", [(start + 1000, address, size, 1) for start, address, size in in_steps])
    report = analyze([path], use_cache=False)
    (gpu,) = report.memory
    assert gpu["growth_bytes_per_step"] == 0 and not [f for f in report.findings if f.rule == "memory-leak"]
    assert gpu["peak_bytes"] == before + 64 * 1024 * 1024
    assert gpu["allocated_end_bytes"] == before


def test_a_free_of_memory_taken_before_the_capture_keeps_the_total_above_zero(tmp_path: Path) -> None:
    """An edited copy with a free of 1 GiB, never allocated in the capture, before its first event (a capture that
    started mid-run): the process held at least that much then, so the curve starts at 0 and then follows the
    export's own allocations, never below zero."""
    events = device_memory(export(LEAK, tmp_path))
    path = edited_copy(tmp_path, "early-free", [(events[0][0] - 1000, 0x7000_0000_0000, 1 << 30, 1)])
    report = analyze([path], use_cache=False)
    (gpu,) = report.memory
    totals = []
    for _, delta in events:
        totals.append((totals[-1] if totals else 0) + delta)
    assert gpu["allocated_start_bytes"] == 0
    assert (gpu["peak_bytes"], gpu["allocated_end_bytes"]) == (max(totals), totals[-1])
    assert min(r["allocated_bytes"] for r in report.metrics["memory_curve"]) >= 0


def test_a_diff_does_not_compare_tensors_with_what_cuda_gave(tmp_path: Path) -> None:
    """samples/memory-leak (the PyTorch profiler's allocator events) against nsys-memory-leak (CUDA's): the same
    leak counted two ways, so the diff warns and compares no GPU memory rather than call the reserve growth."""
    diff = build_diff(load_side(SAMPLES / "memory-leak"), load_side(export(LEAK, tmp_path)))
    assert diff.memory == [] and diff.growth_sites == []
    assert any("GPU memory is not compared" in w for w in diff.warnings)
