"""Triton's Proton profiler traces (tracedoc/ingest/chrome/proton.py) on the real sample samples/proton-compiled-mlp:
told apart from PyTorch's Chrome traces, kernels stored as one device's, and steps made from the scopes' windows in
time, which the CUDA-event step time measured without the profiler (expected.yaml's truth) checks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests import fuzz
from tests.conftest import ROOT, SAMPLES
from tests.test_formats import SAMPLES_OF
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.formats import BY_NAME, FORMATS
from tracedoc.ingest import discover
from tracedoc.ingest.chrome import chrome_trace, proton
from tracedoc.options import Peaks
from tracedoc.pipeline import open_store

SAMPLE = SAMPLES / "proton-compiled-mlp"
TRACE = SAMPLE / "compiled-mlp.chrome_trace.gz"


def _events() -> list[dict]:
    return json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]


def test_a_proton_trace_is_told_apart_from_a_pytorch_one(tmp_path: Path) -> None:
    """By the scopes its events name (``call_stack`` from ROOT), or by Proton's file name without Kineto's header;
    a PyTorch trace, even named like Proton's, stays PyTorch's."""
    plain = tmp_path / "run.json"
    plain.write_bytes(gzip.decompress(TRACE.read_bytes()))
    kineto = tmp_path / "renamed.chrome_trace"
    kineto.write_bytes(gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes()))
    empty = tmp_path / "empty.chrome_trace"
    empty.write_bytes(b'{"displayTimeUnit":"us","traceEvents":[]}')
    assert [i.format for i in discover([TRACE, plain, kineto, empty])] == ["proton", "proton", "torch", "proton"]


def test_kernels_are_one_device_and_stream_without_launches() -> None:
    """Every kernel event is one row of gpu_activity, on device 0 and the lane Proton wrote (tid 7), with its time
    in ns; no host activity, shapes or memory events, since the trace has none."""
    events = _events()
    store = open_store(discover([SAMPLE]), None)[0]
    try:
        rows = store.query("""SELECT device, stream, count(*) AS n, sum(dur_ns) AS ns, bool_and(correlation_id IS NULL)
                              AS unlinked FROM gpu_activity GROUP BY ALL""")
        assert rows == [{"device": 0, "stream": 7, "n": len(events),
                         "ns": sum(round(e["dur"] * 1000) for e in events), "unlinked": True}]
        for table in ("cpu_activity", "op_shapes", "memory_events", "devices"):
            assert store.scalar(f"SELECT count(*) FROM {table}") == 0, table
        assert store.query("SELECT format, rank, world_size, event_count FROM sources") == [
            {"format": "proton", "rank": 0, "world_size": None, "event_count": len(events)}]
    finally:
        store.close()


def test_steps_are_the_scopes_windows_in_time_and_hold_every_kernel() -> None:
    """Proton's scopes are per thread, so the backward thread's kernels keep the stale label step_0 (309 kernels);
    the windows from each step scope's first kernel to the next give every step the same 85 kernels, and the
    first, which waited 43.7 ms before its second kernel, is warm-up."""
    labels = [e["args"]["call_stack"][1] for e in _events()]
    assert labels.count("step_0") == 309 and {labels.count(f"step_{i}") for i in range(1, 5)} == {29}
    store = open_store(discover([SAMPLE]), None)[0]
    try:
        store.include("trace.window")
        steps = store.query("""SELECT t.step, t.name, t.warmup, t.dur_ns, count(w.step) AS kernels
                               FROM trace_steps t LEFT JOIN trace_step_work w USING (source_id, step)
                               GROUP BY ALL ORDER BY t.step""")
        assert [(s["step"], s["name"], s["warmup"], s["kernels"]) for s in steps] == \
            [(0, "step_0", True, 85)] + [(n, f"step_{n}", False, 85) for n in range(1, 5)]
        assert store.scalar("SELECT count(*) FROM trace_step_work WHERE step IS NULL") == 0
        method = store.query("SELECT method, detail, steps, warmup_steps FROM trace_step_method")
        assert method == [{"method": "profiler", "detail": "step_N", "steps": 4, "warmup_steps": 1}]
    finally:
        store.close()


def test_the_step_time_against_the_unprofiled_truth() -> None:
    """The traced steps run back to back, the GPU never waiting on the host (98 % busy): 11.04-11.06 ms, below
    every one of the 30 unprofiled steps (11.71-12.40 ms, each started after a synchronize, so each also pays for
    the host's first launches) and within 10 % of their median."""
    truth = yaml.safe_load((SAMPLE / "expected.yaml").read_text())["truth"]["step_ms_unprofiled"]
    report = analyze([SAMPLE], use_cache=False)
    steps = [r["step_ms"] for r in report.metrics["step_times"] if not r["warmup"]]
    assert len(steps) == 4
    assert all(11.0 < ms < truth["min"] for ms in steps), steps
    median = sorted(steps)[len(steps) // 2]
    assert 0.9 * truth["median"] < median < truth["median"]
    assert report.summary["gpu_busy_pct"] > 97
    assert report.window["steps"] == "the profiler's steps 'step_N'"


def test_mfu_from_the_given_flops_per_step_over_the_windows() -> None:
    """The trace names no GPU and no operator shapes: given FlopCounterMode's FLOPs per step (the truth) and the
    H200 SXM's bf16 dense peak (989.5 TFLOP/s, efficiency.peaks), MFU is measured over each step's window: the
    truth's FLOPs over the traced step, about 60 % (54 % over the unprofiled median)."""
    truth = yaml.safe_load((SAMPLE / "expected.yaml").read_text())["truth"]
    report = analyze([SAMPLE], use_cache=False,
                     peaks=Peaks(flops_per_step=truth["flops_per_step"], peak_tflops=989.5))
    rank = next(r for r in report.efficiency if r["step"] is None)
    assert rank["steps"] == 4
    expected = truth["flops_per_step"] / (rank["step_ms"] / 1e3) / 1e12 / 989.5 * 100
    assert rank["mfu_pct"] == pytest.approx(expected, rel=1e-3)
    assert 59 < rank["mfu_pct"] < 61
    assert len([r for r in report.efficiency if r["step"] is not None]) == 4


@pytest.mark.parametrize("cut", ["plain", "gzip"])
def test_a_truncated_trace_is_one_line_exit_2(tmp_path: Path, cut: str) -> None:
    """The sample cut in half (an edited copy: a recording that stopped while writing): one line, exit 2."""
    text = gzip.decompress(TRACE.read_bytes())
    if cut == "plain":
        path = tmp_path / "cut.chrome_trace"
        path.write_bytes(text[: len(text) // 2])
    else:
        path = tmp_path / "cut.chrome_trace.gz"
        path.write_bytes(gzip.compress(text)[: len(TRACE.read_bytes()) // 2])
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and "cut.chrome_trace" in result.stderr, result.stderr



def test_the_format_is_its_reader_one_format_line_a_sample_and_a_fuzz_seed() -> None:
    """docs/ARCHITECTURE.md's steps for a Chrome-trace JSON format, as Proton took them: a reader module on the
    shared reader, one Format line before torch's (whose files it would otherwise be read as), a sample named for
    the format's tests and a fuzz seed; no other module of tracedoc names the format."""
    declared = BY_NAME["proton"]
    assert declared.module == proton.__name__ and isinstance(proton.PROTON, chrome_trace.EventFormat)
    names = [f.name for f in FORMATS]
    assert names.index("proton") < names.index("torch")
    assert SAMPLES_OF["proton"] == (SAMPLE.name,) and (SAMPLE / "expected.yaml").is_file()
    assert [b.name for spec in fuzz.FORMATS.values() if spec.reads == "proton" for b in spec.bases] == [SAMPLE.name]
    naming = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tracedoc").rglob("*")
                    if path.suffix in (".py", ".sql") and any(quoted in path.read_text() for quoted in
                                                               ('"proton"', "'proton'")))
    assert naming == ["tracedoc/formats.py", "tracedoc/ingest/chrome/proton.py"]
