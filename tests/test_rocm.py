"""ROCm traces: the HIP runtime's syncs, synchronous copies and launches count as their CUDA twins do. Checked on
real ROCm traces from other projects (tests/data, each with its SOURCE.md) and edited copies of them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tracedoc.api import analyze, open_store
from tracedoc.ingest import discover

DATA = ROOT / "tests" / "data"
SGLANG = DATA / "rocm-sglang-decode" / "sglang_Qwen3-8B_decode.json.gz"
MI250 = DATA / "rocm-mi250-train" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def test_a_long_synchronous_hip_copy_is_a_blocking_sync_not_host_work(tmp_path: Path) -> None:
    """SGLang's decode step: aten::copy_ blocks the host 463 ms in hipMemcpyWithStream while the GPU idles. That is
    the host waiting on the GPU (host-sync, first), not the GPU waiting on host work in 'step[DECODE bs=32]'
    (gpu-idle-host-bound, whose advice was CUDA graphs)."""
    report = analyze(SGLANG, cache_dir=tmp_path)
    first = report.findings[0]
    assert (first.rule, first.severity) == ("host-sync", "critical")
    assert first.impact_ms == pytest.approx(463, abs=1)
    assert "'aten::copy_'" in first.message
    assert "gpu-idle-host-bound" not in {f.rule for f in report.findings}
    copies = next(f for f in report.findings if f.rule == "sync-memcpy")
    assert "hipMemcpyWithStream" in copies.message
    host_sync_ms = sum(r["ms"] for r in report.attribution if r["cause"] == "host_sync")
    assert host_sync_ms == pytest.approx(463, abs=1)


HIP_SYNCS = ["hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
             "hipMemcpyWithStream", "hipMemset", "hipCtxSynchronize"]


def _renamed(tmp_path: Path, name: str, trace: Path = MI250) -> Path:
    """A copy of the trace with its first hipMemcpyWithStream called ``name`` (on the MI250: the 60 µs copy of
    aten::copy_; on SGLang: the 463 ms one)."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    call = next(e for e in doc["traceEvents"] if e.get("name") == "hipMemcpyWithStream")
    call["name"] = name
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("name", HIP_SYNCS)
def test_every_hip_sync_call_is_a_sync(tmp_path: Path, name: str) -> None:
    """Each HIP call that blocks the host until the GPU is done is a blocking sync, named after its operator."""
    store, _ = open_store(discover([_renamed(tmp_path, name)]), tmp_path / "cache")
    with store:
        store.include("host.sync")
        calls = store.query("SELECT call, op, dur_ns FROM host_sync_calls ORDER BY ts_ns")
    assert [c["call"] for c in calls] == [name, "hipMemcpyWithStream"]
    assert calls[0]["op"] == "aten::copy_" and calls[0]["dur_ns"] == 60204


@pytest.mark.parametrize(("name", "blocking"), [("hipMemcpy", True), ("hipMemcpyWithStream", True),
                                                ("hipMemcpyDtoH", True), ("hipMemcpyAsync", False)])
def test_synchronous_hip_copies_block_the_host(tmp_path: Path, name: str, blocking: bool) -> None:
    """SGLang's 256-byte device-to-host copy made with other HIP calls: hipMemcpy* without Async
    (hipMemcpyWithStream included) is a synchronous copy (sync-memcpy's measure); hipMemcpyAsync is not."""
    store, _ = open_store(discover([_renamed(tmp_path, name, SGLANG)]), tmp_path / "cache")
    with store:
        store.include("host.blocking")
        calls = store.query("SELECT call, copy_kind, dur_ns FROM host_blocking_calls")
    assert calls == ([{"call": name, "copy_kind": "DtoH", "dur_ns": 463063750}] if blocking else [])


def test_hip_launches_and_graph_replays_are_linked_to_their_kernels(tmp_path: Path) -> None:
    """hipLaunchKernel (MI250) and hipGraphLaunch (SGLang) are the launch calls of their kernels: launch latency is
    measured and graph-replayed kernels are counted as such."""
    for trace, graph_kernels in ((MI250, 0), (SGLANG, 544)):
        store, _ = open_store(discover([trace]), tmp_path / trace.name)
        with store:
            store.include("gpu.launch")
            stats = store.query("SELECT median_launch_latency_ns, graph_kernel_count FROM gpu_launch_stats")[0]
        assert stats["median_launch_latency_ns"] > 0
        assert stats["graph_kernel_count"] == graph_kernels
