"""low-gpu-utilization's numbers come from one window, and launch-bound needs a stream of launches. Checked on real
traces from other projects (tests/data, each with its SOURCE.md) and on bundled samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tracedoc.api import analyze, open_store
from tracedoc.ingest import discover

DATA = ROOT / "tests" / "data"
ONE_BURST = DATA / "kineto-backward-thread" / "backward_thread.json"
ONE_KERNEL = DATA / "kineto-one-kernel" / "before_fix_trace.json"
SIXTY_KERNELS = DATA / "kineto-device-properties-after-events" / "gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.parametrize("trace", [ONE_BURST, SIXTY_KERNELS, SAMPLES / "decode-eager" / "trace.json.gz"],
                         ids=["one-burst", "bert-small", "decode-eager"])
def test_the_chunks_cut_the_window_the_busy_share_is_of(tmp_path: Path, trace: Path) -> None:
    """The chunks tile the analysed window, and their busy time is the device's busy time in it."""
    store, _ = open_store(discover([trace]), tmp_path)
    with store:
        store.include("gpu.utilization")
        window = store.query("SELECT start_ns, wall_ns FROM trace_wall")[0]
        chunks = store.query("SELECT ts_ns, dur_ns, busy_pct FROM gpu_utilization_chunks(30) ORDER BY ts_ns")
        busy = store.query("SELECT busy_pct FROM gpu_idle_by_device")[0]["busy_pct"]
    assert chunks[0]["ts_ns"] == window["start_ns"]
    assert sum(c["dur_ns"] for c in chunks) == pytest.approx(window["wall_ns"], abs=30)
    chunk_busy_ns = sum(c["busy_pct"] * c["dur_ns"] for c in chunks) / 100
    assert chunk_busy_ns == pytest.approx(busy / 100 * window["wall_ns"], rel=1e-6, abs=30)


def test_low_utilization_says_one_window(tmp_path: Path) -> None:
    """HTA's backward_thread: one 45 µs kernel in a 413 ms step. Busy 0.0 % of the step, and so every chunk of the
    step is under half busy (it said "0 of 30 ... (the least 100.0%)", the chunks cutting the kernel's own span)."""
    finding = next(f for f in analyze(ONE_BURST, cache_dir=tmp_path).findings if f.rule == "low-gpu-utilization")
    assert finding.message.startswith("GPU 0 of rank 0 is busy only 0.0% of the analysed window (413 ms: its one "
                                      "step and the GPU work it queued); 30 of its 30 equal time chunks "
                                      "are under 50% busy (the least 0.0%).")


def test_launch_bound_needs_a_stream_of_launches(tmp_path: Path) -> None:
    """Kineto's one-kernel documentation trace is not launch-bound; BERT-small's 60 tiny kernels with the GPU idle
    between them are."""
    assert "launch-bound" not in {f.rule for f in analyze(ONE_KERNEL, cache_dir=tmp_path / "one").findings}
    sixty = next(f for f in analyze(SIXTY_KERNELS, cache_dir=tmp_path / "sixty").findings if f.rule == "launch-bound")
    assert "60 kernels" in sixty.message
