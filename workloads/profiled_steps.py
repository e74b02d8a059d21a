"""The recorded steps of every workload, under the profiler that ``--profiler`` names.

  torch  torch.profiler with schedule(wait=1, warmup=2, active=N) writes a gzipped Chrome trace (Kineto JSON)
  nsys   for a run under ``nsys profile --capture-range=cudaProfilerApi``: record_function ranges are emitted as
         NVTX ranges, and the N active steps are bracketed by cudaProfilerStart/Stop, so only they are captured
  ncu    the same bracket, for ``ncu --profile-from-start off``: only the active steps' kernels are profiled
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
from torch.profiler import ProfilerActivity, profile, schedule

PROFILERS = ("torch", "nsys", "ncu", "none")
SKIPPED_STEPS = 3  # steps before the recorded ones: torch's schedule(wait=1, warmup=2)


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
                             "Compute started around this script (tracedoc workload run does); none: only time")
    parser.add_argument("--torch-activities", choices=("cpu,cuda", "cpu"), default="cpu,cuda",
                        help="what --profiler torch records: host and GPU activity, or the host alone (a trace "
                             "recorded without ProfilerActivity.CUDA, as some users do)")


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
                     on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
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
