"""Nsight Systems captures of distributed jobs: the steady state found in a whole-process capture, one rank per
process (a report per rank, or one report of the whole job), ranks on one clock and lined up on their collectives,
and the same answer as the PyTorch profiler gives on the same program.

The samples are real 2×H200 runs of workloads/ddp_step (variant larger_batch: rank 1 gets twice the batch) and
workloads/fsdp_step, recorded with nsys the documented way (see each sample's SOURCE.md) and with the PyTorch
profiler (ddp-larger-batch, fsdp-prefetch, fsdp-no-prefetch).
"""

from __future__ import annotations

import lzma
import os
import shutil
import sqlite3
import stat
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.api import input_files, open_store
from tracedoc.causes import outside_rows, window_rows
from tracedoc.cli import cli
from tracedoc.report import Report

RANKS = SAMPLES / "nsys-ddp-larger-batch-ranks"
JOB = SAMPLES / "nsys-ddp-larger-batch-job"
TORCH_TWIN = SAMPLES / "ddp-larger-batch"
FSDP = {"prefetch": (SAMPLES / "nsys-fsdp-prefetch-ranks", SAMPLES / "fsdp-prefetch"),
        "no-prefetch": (SAMPLES / "nsys-fsdp-no-prefetch-ranks", SAMPLES / "fsdp-no-prefetch")}


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {"ranks": analyze([RANKS]), "job": analyze([JOB]), "torch": analyze([TORCH_TWIN])}


def _unpacked(tmp_path: Path, export: Path, name: str | None = None) -> Path:
    """A sample's xz-compressed export, unpacked (under ``name``) into tmp_path."""
    target = tmp_path / (name or export.name.removesuffix(".xz"))
    target.write_bytes(lzma.decompress(export.read_bytes()))
    return target


def _straggler(report: Report) -> Any:
    [finding] = [f for f in report.findings if f.rule == "straggler-rank"]
    return finding


def _wait_per_step(report: Report, rank: int) -> float:
    """The rank's exposed wait in collectives for later ranks, ms per step (mean over its steady steps)."""
    return statistics.mean(r["exposed_wait_ms"] for r in report.metrics["rank_steps"] if r["rank"] == rank)


def _overlap(report: Report) -> dict[int, float]:
    return {r["rank"]: r["overlap_pct"] for r in report.metrics["comm_overlap"]}


@pytest.mark.parametrize("capture", ["ranks", "job"])
def test_nsys_names_the_straggler_the_torch_trace_names(capture: str, reports: dict[str, Report]) -> None:
    """On the same program, the nsys reports (one per rank, or one for the job) name the straggler the PyTorch
    traces name, with the same cause, the same wait per step within 15 % and the same overlap within 5 points."""
    nsys, torch = reports[capture], reports["torch"]
    for report in (nsys, torch):
        finding = _straggler(report)
        assert finding.scope.rank == 1 and finding.severity == "critical"
        assert "Likely cause: larger inputs" in finding.message
    assert _wait_per_step(nsys, 0) == pytest.approx(_wait_per_step(torch, 0), rel=0.15)
    assert 17 < _wait_per_step(torch, 0) < 22
    for rank, pct in _overlap(torch).items():
        assert abs(_overlap(nsys)[rank] - pct) <= 5, rank
    assert nsys.summary["waiting_for_rank"] == torch.summary["waiting_for_rank"] == 1


@pytest.mark.parametrize("variant", sorted(FSDP))
def test_nsys_fsdp_overlap_matches_the_torch_traces(variant: str) -> None:
    """FSDP2 with and without prefetch: the per-rank nsys reports give each rank's overlap of communication with
    compute within 5 points of the PyTorch traces of the program, and the same verdict on it."""
    nsys, torch = (analyze([path]) for path in FSDP[variant])
    for rank, pct in _overlap(torch).items():
        assert abs(_overlap(nsys)[rank] - pct) <= 5, (variant, rank)
    fired = {r: {f.rule for f in report.findings} for r, report in (("nsys", nsys), ("torch", torch))}
    assert ("low-comm-overlap" in fired["nsys"]) == ("low-comm-overlap" in fired["torch"]) == (variant != "prefetch")


def test_start_up_is_start_up_and_never_judged(reports: dict[str, Report]) -> None:
    """The whole process is recorded: interpreter start, imports, CUDA and NCCL initialisation, the model build.
    The findings judge the 28 steady train_step ranges after one warm-up step; what lies before is start-up,
    named with what it holds, attributed apart, and no finding calls it host-bound idle (on the whole process
    tracedoc said 'GPU idle while the host works, 79 %' and 'the GPU stops for 967 ms')."""
    report = reports["ranks"]
    window = report.window
    assert (window["kind"], window["steps"], window["step_count"], window["warmup_steps"]) == (
        "steps", "the host range 'train_step'", 28, 1)
    assert {f.rule for f in report.findings} == {"straggler-rank"}
    assert report.summary["gpu_busy_pct"] > 95 and report.summary["wall_ms"] < 2_000
    outside = outside_rows(report.attribution)
    startup = {r["detail"] for r in outside if r["cause"] == "startup" and r["rank"] == 0}
    assert "NCCL initialisation" in startup
    by_cause = {c: sum(r["ms"] for r in outside if r["cause"] == c and r["rank"] == 0) for c in ("startup", "warmup")}
    assert by_cause["startup"] > 5_000 and by_cause["warmup"] > 1_000  # seconds of start-up, a 2.3 s first step
    for rank in (0, 1):  # the window's causes sum to the window
        ms = sum(r["ms"] for r in window_rows(report.attribution) if r["rank"] == rank)
        wall = next(r["wall_ms"] for r in report.metrics["gpu_idle"] if r["rank"] == rank)
        assert ms == pytest.approx(wall, abs=0.01)
    text = CliRunner().invoke(cli, ["analyze", str(RANKS), "--no-cache"]).output
    assert "Judged: 28 steps (found by the host range 'train_step'), after 1 warm-up step." in " ".join(text.split())


def test_one_report_of_the_job_is_a_rank_per_process(reports: dict[str, Report]) -> None:
    """`nsys profile torchrun …` records torchrun and both workers in one report: each worker (a process with
    GPU work) is a rank, numbered by the GPU it ran on; the launcher is none."""
    job = reports["job"]
    assert [(i.rank, Path(i.path).name) for i in job.inputs] == [(0, "job.sqlite.xz"), (1, "job.sqlite.xz")]
    assert job.summary["ranks"] == 2 and job.input_count == 1
    assert {(r["rank"], r["device"]) for r in job.metrics["gpu_idle"]} == {(0, 0), (1, 1)}


def test_reports_of_several_processes_share_one_clock(tmp_path: Path) -> None:
    """Each nsys report counts time from its own session start; tracedoc moves them onto UTC, so the two ranks'
    reports line up to the collectives' precision: every matched collective ends on both ranks within a few µs
    once the residual offset (median over the collectives) is taken out, and that offset is under 1 ms."""
    store, _ = open_store(input_files([RANKS]), None)
    with store:
        store.include("ranks.collectives")
        quality = store.query("SELECT rank, channel, offset_ns, end_spread_ns, matched FROM ranks_alignment_quality "
                              "ORDER BY channel, rank")
        firsts = [r["ts"] for r in store.query("SELECT min(ts_ns) AS ts FROM gpu_activity GROUP BY source_id")]
    # two NCCL streams a rank, numbered in the order each rank first used them: DDP's broadcasts, its all-reduces
    assert [(q["channel"], q["rank"]) for q in quality] == [(f"communication stream {c}", r) for c in (1, 2)
                                                           for r in (0, 1)]
    assert all(abs(q["offset_ns"]) < 1_000_000 and q["end_spread_ns"] < 20_000 for q in quality)
    assert quality[1]["matched"] > 250  # the all-reduces of 29 steps
    assert abs(firsts[0] - firsts[1]) < 1_000_000_000  # both started within a second, on one clock


def test_rank_from_the_launchers_rank_variable(tmp_path: Path) -> None:
    """Reports named without a rank (-o report_%p) take it from the RANK variable torchrun gave the profiled
    process: the only variable of the environment read (edited copies of the per-rank exports, renamed)."""
    folder = tmp_path / "reports"
    folder.mkdir()
    _unpacked(folder, RANKS / "rank1.sqlite.xz", "report_1234.sqlite")
    _unpacked(folder, RANKS / "rank0.sqlite.xz", "report_5678.sqlite")
    report = analyze([folder], use_cache=False)
    assert {(Path(i.path).name, i.rank) for i in report.inputs} == {("report_1234.sqlite", 1),
                                                                   ("report_5678.sqlite", 0)}
    assert _straggler(report).scope.rank == 1


def test_step_range_names_the_steps(tmp_path: Path) -> None:
    """--step-range picks the range that marks a step; one no input has is refused in one line, naming the
    repeated ranges there are."""
    export = _unpacked(tmp_path, RANKS / "rank0.sqlite.xz")
    forward = analyze([export], use_cache=False, step_range="forward")
    assert (forward.window["steps"], forward.window["step_count"] + forward.window["warmup_steps"]) == (
        "the host range 'forward'", 29)
    result = CliRunner().invoke(cli, ["analyze", str(export), "--no-cache", "--step-range", "no_such_range"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "--step-range 'no_such_range': no host range of that name" in \
        result.stderr and "'train_step'" in result.stderr


def test_steps_from_the_repeating_kernel_without_annotations(tmp_path: Path) -> None:
    """Edited copies of the per-rank exports with every NVTX range deleted (a capture with -t cuda,osrt): the steps
    come from the kernel that repeats evenly on the GPU, and the straggler is still found."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for name in ("rank0.sqlite.xz", "rank1.sqlite.xz"):
        with sqlite3.connect(_unpacked(folder, RANKS / name)) as con:
            con.execute("DELETE FROM NVTX_EVENTS")
    report = analyze([folder], use_cache=False)
    assert report.window["steps"].startswith("the repeating kernel ")
    assert 20 <= report.window["step_count"] <= 29
    assert _straggler(report).scope.rank == 1 and report.summary["gpu_busy_pct"] > 90


def test_reports_are_exported_in_parallel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two .nsys-rep (no export beside them) are exported by two nsys processes at once: a stand-in nsys on PATH
    logs when each export starts and ends, and copies the export the real one made of that report."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for rank in (0, 1):
        export = _unpacked(tmp_path, RANKS / f"rank{rank}.sqlite.xz")
        (folder / f"rank{rank}.nsys-rep").write_text(str(export))
    log = tmp_path / "exports.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "nsys"
    stand_in.write_text(f"""#!{sys.executable}
import shutil, sys, time
args = sys.argv[1:]
out, report = args[args.index("--output") + 1], args[-1]
with open({str(log)!r}, "a") as f:
    f.write(f"start {{time.time()}}\\n")
time.sleep(0.5)
shutil.copyfile(open(report).read().strip(), out)
with open({str(log)!r}, "a") as f:
    f.write(f"end {{time.time()}}\\n")
""")
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    report = analyze([folder], use_cache=False)
    assert sorted(i.rank for i in report.inputs) == [0, 1] and _straggler(report).scope.rank == 1
    events = [line.split() for line in log.read_text().splitlines()]
    starts = sorted(float(t) for kind, t in events if kind == "start")
    ends = sorted(float(t) for kind, t in events if kind == "end")
    assert len(starts) == len(ends) == 2 and starts[1] < ends[0]  # the second started before the first ended
    shutil.rmtree(bin_dir)


def test_a_profiler_range_bounds_the_window_without_steps(tmp_path: Path) -> None:
    """An edited copy of samples/nsys-torch-h100 with its NVTX ranges deleted (no steps to find) and a
    cudaProfilerStart/cudaProfilerStop pair added on the host around the fourth to the sixth second of its work:
    the window is that range, and what lies around it is start-up and teardown."""
    export = tmp_path / "range.sqlite"
    shutil.copyfile(SAMPLES / "nsys-torch-h100" / "sample.sqlite", export)
    with sqlite3.connect(export) as con:
        con.execute("DELETE FROM NVTX_EVENTS")
        first, last = con.execute('SELECT min(start), max("end") FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()
        gtid = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()[0]
        top = con.execute("SELECT max(id) FROM StringIds").fetchone()[0]
        last_call = con.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        start, stop = first + (last - first) // 3, first + 2 * (last - first) // 3
        for n, (name, at) in enumerate((("cudaProfilerStart", start), ("cudaProfilerStop", stop)), 1):
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (top + n, name))
            con.execute('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", eventClass, globalTid, correlationId, '
                        "nameId, returnValue, callchainId) VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
                        (at, at + 1000, gtid, last_call + n, top + n))  # each call its own id, as CUPTI gives
        session = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    report = analyze([export], use_cache=False)
    window = report.window
    assert (window["kind"], window["steps"]) == ("capture_range", "the cudaProfilerStart/Stop range (no steps found)")
    assert (window["start_ns"], window["end_ns"]) == (session + start + 1000, session + stop)
    causes = {r["cause"] for r in outside_rows(report.attribution)}
    assert causes == {"startup", "teardown"}
