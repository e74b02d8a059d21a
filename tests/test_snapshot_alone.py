"""Allocator snapshots given alone, and as PyTorch records them by default (samples/memory-*, made on an H200 by
workloads/memory_leak/run.py; each expected.yaml gives the truth it was built with).

The samples were recorded with ``stacks="python"``. ``_record_memory_history()``'s default (``stacks="all"``) puts
C++ frames in every stack: the unwinder's first, then the allocator's and ATen's C++ (``??`` where a symbol is
missing), with CPython's evaluation frames between the Python ones. ``_default_recorded`` makes such a snapshot by
editing a sample: each stack gets those frames, innermost first, as torch writes them.
"""

from __future__ import annotations

import gzip
import lzma
import pickle
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.pages import memory, overview
from tracedoc.report import Report
from tracedoc.words.findings import summary_text
from tracedoc.words.memory import memory_lines

LEAK_PER_STEP = 32 << 20
OOM_REQUEST = 64 << 20

_UNWINDER = [("??", 0, "torch::unwind::unwind()"), ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
             ("/pytorch/torch/csrc/cuda/memory_snapshot.cpp", 212, "torch::cuda::gather_with_cpp()"),
             ("/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1210, "c10::cuda::CUDACachingAllocator::Native::"
              "DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
             ("/pytorch/aten/src/ATen/native/TensorFactories.h", 131, "at::native::empty_cuda(...)"),
             ("??", 0, "at::_ops::empty_strided::call(...)")]
_CPYTHON = [("/usr/local/src/conda/python-3.12/Python/ceval.c", 4770, "_PyEval_EvalFrameDefault"),
            ("??", 0, "PyObject_Call")]
_START = [("??", 0, "__libc_start_main"), ("??", 0, "_start")]


def _frame(filename: str, line: int, name: str) -> dict:
    return {"filename": filename, "line": line, "name": name}


def _with_cpp(frames: list) -> list:
    """A Python-only stack as torch's default recording writes it: C++ frames first, CPython's between the Python
    frames, the process's start last."""
    out = [_frame(*f) for f in _UNWINDER]
    for f in frames:
        out.append(f)
        out.extend(_frame(*c) for c in _CPYTHON)
    return out + [_frame(*f) for f in _START]


def _default_recorded(case: str, tmp_path: Path) -> Path:
    """The sample's snapshot with every stack edited to carry C++ frames (see the module's docstring)."""
    real = pickle.loads(gzip.decompress((SAMPLES / f"memory-{case}" / "snapshot.pickle.gz").read_bytes()))
    stacks: dict[int, list] = {}

    def edit(frames: list) -> list:
        return stacks.setdefault(id(frames), _with_cpp(frames))

    for segment in real["segments"]:
        for block in segment["blocks"]:
            if block.get("frames"):
                block["frames"] = edit(block["frames"])
    for trace in real["device_traces"]:
        for entry in trace:
            if entry.get("frames"):
                entry["frames"] = edit(entry["frames"])
    path = tmp_path / case / "snapshot.pickle"
    path.parent.mkdir()
    path.write_bytes(pickle.dumps(real, protocol=4))
    return path


def _sites(report: Report) -> list[str]:
    """Every site the report names: findings' evidence, and the memory section's."""
    named = [str(e.value) for f in report.findings for e in f.evidence if "at" in e.name.split() and e.value]
    for entry in report.memory:
        named += [s["site"] for s in entry.get("top_sites") or []]
        named += [s["site"] for s in entry.get("growth_sites") or []]
        named += [o["site"] for o in entry.get("ooms") or [] if o.get("site")]
        named += [(entry.get("peak_at") or {}).get("site") or ""]
        named += [(entry.get("fragmentation") or {}).get("pinning_site") or ""]
    return [s for s in named if s]


def _finding(report: Report, rule: str):
    return next(f for f in report.findings if f.rule == rule)


def _evidence(finding) -> dict:
    return {e.name: e.value for e in finding.evidence}


def test_a_leak_is_found_from_a_snapshot_alone() -> None:
    """The leak sample's snapshot without its trace: growth across the ProfilerStep annotations of its history."""
    report = analyze(SAMPLES / "memory-leak" / "snapshot.pickle.gz", use_cache=False)
    leak = _finding(report, "memory-leak")
    assert abs(leak.impact_bytes - LEAK_PER_STEP) <= 0.05 * LEAK_PER_STEP
    assert _evidence(leak)["allocated at"].endswith("run.py:48 (forward)")
    assert _evidence(leak)["steady steps measured"] >= 8
    entry = report.memory[0]
    assert entry["growth_sites"][0]["site"].endswith("run.py:48 (forward)")
    assert "Rank" not in leak.message  # a snapshot belongs to no rank of its own


def test_the_fixed_twin_alone_is_quiet() -> None:
    report = analyze(SAMPLES / "memory-fixed" / "snapshot.pickle.gz", use_cache=False)
    assert [f.rule for f in report.findings] == []
    assert abs(report.memory[0]["growth_bytes_per_step"]) < 1 << 20


def test_an_oom_alone_gets_its_request_its_site_and_the_leak_before_it() -> None:
    report = analyze(SAMPLES / "memory-oom" / "snapshot.pickle.gz", use_cache=False)
    oom = _finding(report, "oom")
    assert oom.impact_bytes == OOM_REQUEST
    assert _evidence(oom)["asked for at"].endswith("run.py:59 (train_step)")
    assert oom.scope.step == 7  # ProfilerStep#7 of the history, as in the trace
    leak = _finding(report, "memory-leak")
    assert abs(leak.impact_bytes - LEAK_PER_STEP) <= 0.05 * LEAK_PER_STEP


@pytest.mark.parametrize("case", ["leak", "oom", "fragment"])
def test_a_default_recorded_snapshot_names_user_code_at_every_site(case: str, tmp_path: Path) -> None:
    """C++ frames on (an edited copy of the sample): every site is the user's first frame, as with Python frames
    only; the unwinder, CPython, C++ and torch's own files never name one."""
    edited = analyze(_default_recorded(case, tmp_path), use_cache=False)
    python_only = analyze(SAMPLES / f"memory-{case}" / "snapshot.pickle.gz", use_cache=False)
    sites = _sites(edited)
    assert sites and sites == _sites(python_only)
    assert not [s for s in sites if "??" in s or "::" in s or ".cpp" in s or "ceval" in s]
    assert [f.rule for f in edited.findings] == [f.rule for f in python_only.findings]


def test_a_default_recorded_snapshot_names_the_trace_s_leak(tmp_path: Path) -> None:
    """Beside its trace, the edited snapshot still names the leak's allocating line."""
    path = _default_recorded("leak", tmp_path)
    report = analyze([SAMPLES / "memory-leak" / "trace.json.gz", path], use_cache=False)
    assert _evidence(_finding(report, "memory-leak"))["allocated at"].endswith("run.py:48 (forward)")


@pytest.mark.parametrize("inputs", [["snapshot.pickle.gz"], ["trace.json.gz", "snapshot.pickle.gz"],
                                    ["trace.json.gz"]])
def test_an_oom_under_a_cap_names_the_cap(inputs: list[str]) -> None:
    """The OOM sample failed under set_per_process_memory_fraction (expected.yaml's cap_bytes) with the card nearly
    empty: the finding says the cap, not the device, ran out, and bounds it; it asks for a snapshot only where none
    was given."""
    truth = yaml.safe_load((SAMPLES / "memory-oom" / "expected.yaml").read_text())["truth"]
    report = analyze([SAMPLES / "memory-oom" / name for name in inputs], use_cache=False)
    oom = _finding(report, "oom")
    assert "memory cap stopped it" in oom.message
    evidence = _evidence(oom)
    assert evidence["reserved when it failed"] <= truth["cap_bytes"] < evidence["the process's cap lies under"]
    assert ("_dump_snapshot" in oom.fix) == (inputs == ["trace.json.gz"])


WEIGHTS = 3 * 4096 * 4096 * 4  # the workload's 3 Linear(4096, 4096) layers' weights, float32 (SOURCE.md)


def test_the_peak_is_split_by_role() -> None:
    """The leak's snapshot alone peaks in Adam's first step: Adam's two moments (each the size of the weights) are
    optimizer state, the weights' gradients are gradients, the forward outputs (the leaked ones among them)
    activations; the roles add up to the peak."""
    report = analyze(SAMPLES / "memory-leak" / "snapshot.pickle.gz", use_cache=False)
    entry = report.memory[0]
    roles = {r["role"]: r["bytes"] for r in entry["by_role"]}
    assert sum(roles.values()) == entry["peak_bytes"]
    assert roles["optimizer state"] >= 2 * WEIGHTS
    assert WEIGHTS <= roles["gradients"] < 2 * WEIGHTS
    leaked = sum(s["bytes"] for s in entry["top_sites"] if s["site"].endswith("run.py:48 (forward)"))
    assert roles["activations"] >= leaked > 0
    assert "at the peak by role: optimizer state" in "\n".join(line for _, lines in memory_lines(report)
                                                                for line in lines)


def test_the_trace_s_peak_is_split_by_role_too() -> None:
    """With the trace (and without the snapshot): the roles come from the operators and ranges around each
    allocation; the leaked outputs are activations, and what the trace never saw allocated keeps its own row."""
    for inputs in (["trace.json.gz"], ["trace.json.gz", "snapshot.pickle.gz"]):
        report = analyze([SAMPLES / "memory-leak" / name for name in inputs], use_cache=False)
        entry = report.memory[0]
        roles = {r["role"]: r["bytes"] for r in entry["by_role"]}
        assert sum(roles.values()) == entry["peak_bytes"]
        assert roles["activations"] >= 10 * LEAK_PER_STEP  # ten steps' kept outputs at step 10's peak
        assert roles["gradients"] >= WEIGHTS and "(allocated before the trace)" in roles
        assert "At the peak, by role" in [s.title for s in memory.sections(report)]


def test_a_cuda_leak_names_its_range_and_fits_its_program(tmp_path: Path) -> None:
    """Nsight Systems' CUDA memory events (samples/nsys-memory-leak, a PyTorch program marked with NVTX ranges): the
    site is the NVTX range and the advice speaks of the caching allocator's reserve, not of an allocation site. The
    same export edited so that no name says PyTorch (its kernels' at::native/at::cuda renamed), as a CuPy or C++
    program's would read: CUDA's advice (pools, free_all_blocks, references kept), never autograd's."""
    report = analyze(SAMPLES / "nsys-memory-leak" / "sample.sqlite.xz", use_cache=False)
    leak = _finding(report, "memory-leak")
    assert _evidence(leak)["allocated at"] == "optimizer"
    assert "range named above" in leak.fix and "allocation site named above" not in leak.fix
    export = tmp_path / "cupy-like.sqlite"
    export.write_bytes(lzma.decompress((SAMPLES / "nsys-memory-leak" / "sample.sqlite.xz").read_bytes()))
    with closing(sqlite3.connect(export)) as con:
        con.execute("UPDATE StringIds SET value = replace(replace(value, 'at::native', 'app'), 'at::cuda', 'app')")
        con.commit()
    other = _finding(analyze(export, use_cache=False), "memory-leak")
    assert other.impact_bytes == leak.impact_bytes
    assert "free_all_blocks" in other.fix and "cudaMallocAsync" in other.fix
    assert not [w for w in (".detach()", "retain_graph", "allocation site named above") if w in other.fix]


def test_a_snapshot_alone_has_a_headline_and_no_savings_box() -> None:
    """A memory-only input: the headline says what failed and what leaked, and how much; the overview has no
    savings chart, since no finding saves time."""
    report = analyze(SAMPLES / "memory-oom" / "snapshot.pickle.gz", use_cache=False)
    headline = summary_text(report.summary, report.input_count)
    assert "out of memory: a 64.0 MiB request failed in step 7 under a per-process cap" in headline
    assert "32.0 MiB more held after every step" in headline
    assert [s.title for s in overview.sections(report)] == ["Summary", "Findings", "Inputs"]


def test_a_leak_is_found_from_the_allocation_pattern_without_step_markers(tmp_path: Path) -> None:
    """The leak's snapshot with its annotations left out (an edited copy: no ProfilerStep markers, as when the
    history is recorded without the profiler): the steps are read from an allocation repeated at a steady pace."""
    real = pickle.loads(gzip.decompress((SAMPLES / "memory-leak" / "snapshot.pickle.gz").read_bytes()))
    del real["external_annotations"]
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(real, protocol=4))
    report = analyze(path, use_cache=False)
    leak = _finding(report, "memory-leak")
    assert abs(leak.impact_bytes - LEAK_PER_STEP) <= 0.05 * LEAK_PER_STEP
    assert _evidence(leak)["allocated at"].endswith("run.py:48 (forward)")


def _truth(sample: str) -> dict:
    return yaml.safe_load((SAMPLES / sample / "expected.yaml").read_text())["truth"]


def test_a_default_recorded_leak_alone_is_found_at_the_user_s_line() -> None:
    """samples/snapshot-leak-default: a snapshot alone whose history was recorded with _record_memory_history()'s
    defaults (C++ frames in every stack) of a loop keeping each step's 48 MiB output."""
    truth = _truth("snapshot-leak-default")
    report = analyze(SAMPLES / "snapshot-leak-default", use_cache=False)
    leak = _finding(report, "memory-leak")
    assert abs(leak.impact_bytes - truth["leaked_bytes_per_step"]) <= 0.05 * truth["leaked_bytes_per_step"]
    assert _evidence(leak)["allocated at"].endswith(truth["allocated_at"])
    sites = _sites(report)
    assert sites and not [s for s in sites if "??" in s or "::" in s or ".cpp" in s]
    entry = report.memory[0]
    assert sum(r["bytes"] for r in entry["by_role"]) == entry["peak_bytes"]


def test_a_default_recorded_oom_under_a_cap_alone() -> None:
    """samples/snapshot-oom-cap: the OOM under set_per_process_memory_fraction, with C++ frames: the request, the
    user's line that asked, CUDA's free memory, and the cap bounded around the one the workload set."""
    truth = _truth("snapshot-oom-cap")
    report = analyze(SAMPLES / "snapshot-oom-cap", use_cache=False)
    oom = _finding(report, "oom")
    evidence = _evidence(oom)
    assert oom.impact_bytes == truth["failed_request_bytes"]
    assert evidence["asked for at"].endswith(truth["requested_at"])
    assert evidence["free on the device (CUDA)"] == truth["device_free_bytes_at_oom"]
    assert evidence["reserved when it failed"] <= truth["cap_bytes"] < evidence["the process's cap lies under"]
    # the device's memory is at least what CUDA had free and what the process held: the share is an upper bound
    share = evidence["the cap's share of the device (at most)"]
    assert 100 * truth["fraction"] < share < 1.05 * 100 * truth["fraction"]
    assert "memory cap stopped it" in oom.message and "_dump_snapshot" not in oom.fix
    sites = _sites(report)
    assert sites and not [s for s in sites if "??" in s or "::" in s or ".cpp" in s]
    assert "under a per-process cap" in summary_text(report.summary, report.input_count)
    # its peak's operator and site are both 'backward': the memory section says where the peak was once
    assert report.memory[0]["peak_at"] == {"step": 7, "op": "backward", "site": "backward"}
    assert memory_lines(report)[0][1][0].startswith("peak allocated 1.6 GiB (step 7, backward); ")
