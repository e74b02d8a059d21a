"""The recorded steps of every workload, under the profiler that ``--profiler`` names.

  torch  torch.profiler with schedule(wait=1, warmup=2, active=N) writes a gzipped Chrome trace (Kineto JSON)
  nsys   for a run under ``nsys profile --capture-range=cudaProfilerApi``: record_function ranges are emitted as
         NVTX ranges, and the N active steps are bracketed by cudaProfilerStart/Stop, so only they are captured
  ncu    the same bracket, for ``ncu --profile-from-start off``: only the active steps' kernels are profiled
  nvtx   for a run under a profiler that records the whole process (``nsys profile -t cuda,nvtx,osrt``, as NVIDIA
         and PyTorch document it, one report per rank or one for the job): no capture range; every training step,
         the timed ones too, is an NVTX range ``train_step`` and its phases are NVTX ranges, as a user marks them
  none   nothing is recorded; the script's unprofiled figure is its result

Every workload runs ``SKIPPED_STEPS + N`` steps and calls ``step()`` after each, whichever profiler it runs under.
``tracedoc workload run`` starts nsys or ncu around the script; run by hand, the script only marks the steps.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

PROFILERS = ("torch", "nsys", "ncu", "nvtx", "none")
SKIPPED_STEPS = 3  # steps before the recorded ones: torch's schedule(wait=1, warmup=2)
STEP_RANGE = "train_step"  # the NVTX range around each training step under --profiler nvtx
_nvtx_marks = False  # set by use_profiler: steps and phases are also NVTX ranges
_record_shapes = False  # set by use_profiler: the torch profiler records input shapes


def sync(device: torch.device) -> None:
    """Block the host until the device has finished everything queued (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stepper(Protocol):
    """What the workloads call after each step (torch.profiler.profile is one)."""

    def step(self) -> None: ...


def add_profiler_option(parser: argparse.ArgumentParser) -> None:
    """The ``--profiler`` option every workload takes."""
    parser.add_argument("--profiler", choices=PROFILERS, default="torch",
                        help="torch: write a Chrome trace; nsys/ncu: mark the recorded steps for Nsight Systems/"
                             "Compute started around this script (tracedoc workload run does); nvtx: mark every "
                             "step and phase as NVTX ranges for a whole-process nsys capture; none: only time")
    parser.add_argument("--torch-activities", choices=("cpu,cuda", "cpu"), default="cpu,cuda",
                        help="what --profiler torch records: host and GPU activity, or the host alone (a trace "
                             "recorded without ProfilerActivity.CUDA, as some users do)")
    parser.add_argument("--record-shapes", action="store_true",
                        help="--profiler torch: record the operators' input shapes (record_shapes=True)")


def use_profiler(profiler: str, record_shapes: bool = False) -> None:
    """Remember the chosen profiler: under ``nvtx`` every step and phase is marked as an NVTX range too; with
    ``record_shapes`` the torch profiler records the operators' input shapes."""
    global _nvtx_marks, _record_shapes
    _nvtx_marks = profiler == "nvtx" and torch.cuda.is_available()
    _record_shapes = record_shapes


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """A named phase of a step: a record_function annotation, and an NVTX range under ``--profiler nvtx``."""
    with record_function(name), (torch.cuda.nvtx.range(name) if _nvtx_marks else contextlib.nullcontext()):
        yield


def training_step() -> contextlib.AbstractContextManager:
    """Around one whole training step: the NVTX range ``train_step`` under ``--profiler nvtx``, else nothing (the
    torch profiler marks its own steps)."""
    return torch.cuda.nvtx.range(STEP_RANGE) if _nvtx_marks else contextlib.nullcontext()


class _ProfilerRange:
    """Brackets the active steps with cudaProfilerStart/Stop, as torch's schedule would record them."""

    def __init__(self, active: int, cuda: bool) -> None:
        self.active, self.cuda = active, cuda
        self.done = 0
        self.running = False

    def step(self) -> None:
        self.done += 1
        if self.done == SKIPPED_STEPS:
            self._set(True)
        elif self.done == SKIPPED_STEPS + self.active:
            self._set(False)

    def close(self) -> None:
        """Stop the range if the steps ended inside it."""
        self._set(False)

    def _set(self, running: bool) -> None:
        if not self.cuda or running == self.running:
            return
        torch.cuda.synchronize()  # the range holds exactly the active steps' GPU work
        (torch.cuda.profiler.start if running else torch.cuda.profiler.stop)()
        self.running = running


@contextlib.contextmanager
def profiled_steps(profiler: str, trace: Path, active: int, cuda: bool, gpu_activity: bool = True) -> Iterator[Stepper]:
    """Record ``active`` steps after ``SKIPPED_STEPS`` unrecorded ones: a Chrome trace at ``trace`` for torch
    (with the GPU's activity unless ``gpu_activity`` is False)."""
    if profiler == "torch":
        trace.parent.mkdir(parents=True, exist_ok=True)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda and gpu_activity else [])
        with profile(activities=activities, schedule=schedule(wait=1, warmup=2, active=active, repeat=1),
                     record_shapes=_record_shapes, on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
            yield prof
        print(f"trace: {trace} ({trace.stat().st_size / 1e3:.0f} kB)")
        return
    marks = _ProfilerRange(active, cuda and profiler in ("nsys", "ncu"))
    nvtx = torch.autograd.profiler.emit_nvtx() if profiler == "nsys" and cuda else contextlib.nullcontext()
    try:
        with nvtx:
            yield marks
    finally:
        marks.close()
