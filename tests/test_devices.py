"""Traces without CUDA or HIP activity say why: the GPU side was not recorded, the device's activity is of a kind
tracedoc does not analyse (MTIA, the CUPTI range profiler), or the job ran without a GPU. Each gets advice that can
help it. Checked on real traces from other projects (tests/data, each with its SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT, SAMPLES
from tracedoc.api import analyze
from tracedoc.report import Finding

DATA = ROOT / "tests" / "data"
MTIA = DATA / "mtia-inference" / "mtia_inference_rank_0.json.gz"
RANGE_PROFILER = DATA / "cupti-range-profiler" / "benchmark_result_924719_1679055439_trace.json.gz"
GLOO_CPU = DATA / "kineto-info-after-events" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def only_finding(path: Path, cache: Path) -> Finding:
    findings = analyze(path, cache_dir=cache).findings
    assert len(findings) == 1, [f.rule for f in findings]
    return findings[0]


def test_mtia_device_events_are_named_not_taken_for_a_missing_gpu_side(tmp_path: Path) -> None:
    """MTIA's device activity (mtia_ccp_events on the device's process) was recorded: the trace is not one
    'recorded without ProfilerActivity.CUDA'."""
    finding = only_finding(MTIA, tmp_path)
    assert (finding.rule, finding.severity) == ("unsupported-device-activity", "warning")
    assert "69 device events of a kind tracedoc does not analyse (mtia_ccp_events: 69)" in finding.message
    assert "ProfilerActivity" not in finding.fix and "HTA" in finding.fix


def test_cupti_range_profiler_counters_get_advice_that_can_help(tmp_path: Path) -> None:
    """The range profiler's per-kernel counters replace the kernel timeline: the advice is to record without
    profiler_metrics, not to add the CUDA activity the trace already has."""
    finding = only_finding(RANGE_PROFILER, tmp_path)
    assert finding.rule == "unsupported-device-activity"
    assert "(cuda_profiler_range: 77)" in finding.message
    assert "without profiler_metrics" in finding.fix and "ProfilerActivity" not in finding.fix


def test_a_cpu_only_gloo_rank_is_not_told_to_record_its_gpu(tmp_path: Path) -> None:
    """HTA's CPU-only rank (deviceProperties empty, Gloo, no CUDA call): a run without a GPU, said as information."""
    finding = only_finding(GLOO_CPU, tmp_path)
    assert (finding.rule, finding.severity, finding.scope.rank) == ("cpu-only-trace", "info", 34)
    assert "process groups use gloo" in finding.message
    assert "ProfilerActivity" not in finding.fix


def test_a_gpu_run_recorded_without_its_gpu_side_is_still_told_to_record_it(tmp_path: Path) -> None:
    """decode-cpu-only: an H100 run recorded with ProfilerActivity.CPU only keeps its advice."""
    finding = only_finding(SAMPLES / "decode-cpu-only", tmp_path)
    assert finding.rule == "no-gpu-activity"
    assert "ProfilerActivity.CUDA" in finding.fix
