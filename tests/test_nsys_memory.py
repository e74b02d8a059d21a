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
from tracedoc.judge import load_rules
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
    rules = load_rules(())
    diff = build_diff(load_side(export(LEAK, tmp_path), rules), load_side(fixed, rules))
    (gpu,) = diff.memory
    before, after = gpu.pair("growth_bytes_per_step")
    assert before == pytest.approx(33_554_432, rel=0.05) and after == 0


def test_export_without_memory_events_has_no_memory_section() -> None:
    report = analyze([SAMPLES / "nsys-torch-h100" / "sample.sqlite"], use_cache=False)
    assert report.memory == [] and not [f for f in report.findings if f.rule.startswith("memory")]
