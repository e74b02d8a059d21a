"""The advice fits the evidence: it names only the APIs the trace shows, and leads with what the trace points at."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze

DATA = ROOT / "tests" / "data"
PYTORCH_TERMS = ("torch", "PyTorch", ".item()", "DataLoader", "non_blocking", "DDP", "FSDP")


def _fixes(path: Path, cache: Path) -> dict[str, list[str]]:
    fixes: dict[str, list[str]] = {}
    for finding in analyze(path, cache_dir=cache).findings:
        fixes.setdefault(finding.rule, []).append(finding.fix)
    return fixes


@pytest.mark.parametrize("trace", ["nsys-saxpy", "nsys-cloverleaf"])
def test_a_program_without_pytorch_gets_advice_in_cuda_terms(trace: str, tmp_path: Path) -> None:
    """pipit's MPI saxpy and CloverLeaf (CUDA, no PyTorch) under Nsight Systems: their host-sync, pageable-memcpy
    and sync-memcpy findings told them to remove .item() and use DataLoader(pin_memory=True)."""
    fixes = _fixes(DATA / trace, tmp_path)
    assert {"host-sync", "pageable-memcpy", "sync-memcpy"} <= set(fixes)
    for rule, texts in fixes.items():
        for text in texts:
            assert not [t for t in PYTORCH_TERMS if t in text], (rule, text)
    assert "cudaMallocHost" in fixes["pageable-memcpy"][0]
    assert "cudaEventRecord" in fixes["host-sync"][0]


def test_a_pytorch_program_keeps_pytorch_advice(tmp_path: Path) -> None:
    fixes = _fixes(SAMPLES / "input-slow", tmp_path)
    assert ".item()" in fixes["host-sync"][0] and "pin_memory=True" in fixes["pageable-memcpy"][0]


def test_many_small_collectives_lead_with_coalescing_and_no_ddp_advice_without_ddp(tmp_path: Path) -> None:
    """HTA's df_index_resolver rank: 404 all-reduces a step of 11 µs each, and no DDP in the trace. The advice was
    DDP's bucket_cap_mb and no_sync()."""
    (fix,) = _fixes(DATA / "hta-many-small-allreduces", tmp_path)["low-comm-overlap"]
    assert fix.startswith("Send fewer, larger messages: 404 collectives a step of 11 µs each (median)")
    assert "DDP" not in fix and "no_sync" not in fix


def test_ddp_advice_where_the_trace_shows_ddp(tmp_path: Path) -> None:
    fixes = _fixes(SAMPLES / "ddp-no-overlap", tmp_path)["low-comm-overlap"]
    assert all(f.startswith("Overlap gradient all-reduce with backward: let DDP all-reduce buckets") for f in fixes)


def test_fsdp_advice_only_where_the_trace_shows_fsdp(tmp_path: Path) -> None:
    """The same FSDP job under the PyTorch profiler (FSDP's annotations) and under Nsight Systems (no FSDP name in
    the trace): FSDP's settings for the first, what to do for the second."""
    torch = _fixes(SAMPLES / "fsdp-no-prefetch", tmp_path / "a")["low-comm-overlap"]
    nsys = _fixes(SAMPLES / "nsys-fsdp-no-prefetch-ranks", tmp_path / "b")["low-comm-overlap"]
    assert all(f.startswith("Let FSDP prefetch") for f in torch)
    assert nsys and all(f.startswith("Prefetch: start the all-gather") and "FSDP" not in f for f in nsys)


def test_straggler_advice_is_for_its_cause(tmp_path: Path) -> None:
    """Rank 1 of the nsys DDP job is slow from a larger batch, rank 1 of ddp-straggler from extra kernels: each
    gets the advice for its cause, not the list of every cause's advice."""
    (larger,) = _fixes(SAMPLES / "nsys-ddp-larger-batch-ranks", tmp_path / "a")["straggler-rank"]
    (extra,) = _fixes(SAMPLES / "ddp-straggler", tmp_path / "b")["straggler-rank"]
    assert "balance the data across ranks" in larger
    assert "DataLoader" not in larger and "work only it does" not in larger
    assert "work only it does" in extra and "balance the data" not in extra


@pytest.mark.parametrize("trace", [SAMPLES / "input-slow", DATA / "nsys-saxpy"])
def test_pageable_copies_and_the_syncs_they_make_are_one_diagnosis(trace: Path, tmp_path: Path) -> None:
    """A copy from unpinned memory blocks the host until the GPU has drained (torch's copy_ syncs its stream; CUDA's
    cudaMemcpy is synchronous): where most of a rank's blocking syncs are such copies, host-sync and pageable-memcpy
    are one diagnosis, with pinning first in its fix and one saving: the GPU idle the syncs cost plus half the
    copies' time (pinned copies run at about twice the bandwidth), drawn from different causes."""
    findings = analyze(trace, cache_dir=tmp_path).findings
    number = {f.rule: n for n, f in enumerate(findings, 1)}
    sync, pageable = findings[number["host-sync"] - 1], findings[number["pageable-memcpy"] - 1]
    assert pageable.part_of == number["host-sync"] and pageable.impact_ms == 0
    assert "pageable" in sync.message and sync.fix.lower().startswith(("pin the host memory", "copy from pinned"))
    evidence = {e.name: e.value for e in sync.evidence + pageable.evidence}
    assert evidence["syncs that wait for pageable copies"] * 2 >= evidence["blocking sync calls"]
    idle_ms, copies_ms = evidence["GPU idle while or after the host was blocked"], evidence["time in pageable copies"]
    assert idle_ms + copies_ms / 2 == pytest.approx(sync.impact_ms, rel=0.01)


def test_pageable_copies_stay_apart_where_the_syncs_have_other_causes(tmp_path: Path) -> None:
    """CloverLeaf's syncs are mostly cudaDeviceSynchronize between its kernels, not its pageable copies."""
    findings = {f.rule: f for f in analyze(DATA / "nsys-cloverleaf", cache_dir=tmp_path).findings}
    assert findings["pageable-memcpy"].part_of is None and findings["pageable-memcpy"].impact_ms > 0
    assert not findings["host-sync"].fix.lower().startswith(("pin", "copy from pinned"))
