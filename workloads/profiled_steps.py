"""The recorded steps of every workload, under the profiler that ``--profiler`` names.

  torch  torch.profiler with schedule(wait=1, warmup=2, active=N) writes a gzipped Chrome trace (Kineto JSON);
         with ``--cycles R`` the schedule repeats R times and each cycle is written as the PyTorch tutorial's
         handler writes it (tensorboard_trace_handler: ``{host}_{pid}.{ns}.pt.trace.json.gz``), or, with
         ``--cycle-names step``, as the profiler recipe's own handler does (``trace_{step_num}.json.gz``)
  nsys   for a run under ``nsys profile --capture-range=cudaProfilerApi``: record_function ranges are emitted as
         NVTX ranges, and the N active steps are bracketed by cudaProfilerStart/Stop, so only they are captured
  ncu    the same bracket, for ``ncu --profile-from-start off``: only the active steps' kernels are profiled
  nvtx   for a run under a profiler that records the whole process (``nsys profile -t cuda,nvtx,osrt``, as NVIDIA
         and PyTorch document it, one report per rank or one for the job): no capture range; every training step,
         the timed ones too, is an NVTX range ``train_step`` and its phases are NVTX ranges, as a user marks them
  none   nothing is recorded; the script's unprofiled figure is its result

Every workload runs ``steps_to_run(N)`` steps (``SKIPPED_STEPS + N`` per cycle) and calls ``step()`` after each,
whichever profiler it runs under.
``tracedoc workload run`` starts nsys or ncu around the script; run by hand, the script only marks the steps.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

PROFILERS = ("torch", "nsys", "ncu", "nvtx", "none")
SKIPPED_STEPS = 3  # steps before the recorded ones: torch's schedule(wait=1, warmup=2)
STEP_RANGE = "train_step"  # the NVTX range around each training step under --profiler nvtx
_nvtx_marks = False  # set by use_profiler: steps and phases are also NVTX ranges
_record_shapes = False  # set by use_profiler: the torch profiler records input shapes
_cycles = 1  # set by use_profiler: how many times the torch profiler's schedule repeats
_cycle_names = "handler"  # set by use_profiler: how each cycle's trace is named


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
    parser.add_argument("--cycles", type=int, default=1,
                        help="--profiler torch: repeat the schedule this many times, one trace per cycle in --out")
    parser.add_argument("--cycle-names", choices=("handler", "step"), default="handler",
                        help="--cycles: name each cycle's trace as tensorboard_trace_handler does "
                             "({host}_{pid}.{ns}.pt.trace.json.gz) or by its last step (trace_{step_num}.json.gz)")


def use_profiler(profiler: str, record_shapes: bool = False, cycles: int = 1, cycle_names: str = "handler") -> None:
    """Remember the chosen profiler: under ``nvtx`` every step and phase is marked as an NVTX range too; with
    ``record_shapes`` the torch profiler records the operators' input shapes; ``cycles`` repeats its schedule."""
    global _nvtx_marks, _record_shapes, _cycles, _cycle_names
    _nvtx_marks = profiler == "nvtx" and torch.cuda.is_available()
    _record_shapes = record_shapes
    _cycles, _cycle_names = max(1, cycles), cycle_names


def steps_to_run(active: int) -> int:
    """How many steps a workload runs: the skipped and the ``active`` steps of every cycle of the schedule."""
    return _cycles * (SKIPPED_STEPS + active)


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
        if _cycles == 1:
            ready = lambda p: p.export_chrome_trace(str(trace))  # noqa: E731
        elif _cycle_names == "handler":
            ready = tensorboard_trace_handler(str(trace.parent), use_gzip=True)
        else:
            ready = lambda p: p.export_chrome_trace(str(trace.parent / f"trace_{p.step_num}.json.gz"))  # noqa: E731
        with profile(activities=activities, schedule=schedule(wait=1, warmup=2, active=active, repeat=_cycles),
                     record_shapes=_record_shapes, on_trace_ready=ready) as prof:
            yield prof
        written = [trace] if _cycles == 1 else sorted(trace.parent.glob("*.json.gz"))
        for path in written:
            print(f"trace: {path} ({path.stat().st_size / 1e3:.0f} kB)")
        return
    marks = _ProfilerRange(active, cuda and profiler in ("nsys", "ncu"))
    nvtx = torch.autograd.profiler.emit_nvtx() if profiler == "nsys" and cuda else contextlib.nullcontext()
    try:
        with nvtx:
            yield marks
    finally:
        marks.close()
