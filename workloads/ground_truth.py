"""The figures a sample's ``expected.yaml`` holds as its truth, measured without the profiler.

Every workload that records a ``truth.json`` measures its step the same way: CUDA events around each of
``--bench-steps`` unprofiled steps after warm-up (median, min, max), FlopCounterMode's FLOPs of one step, and, from a
short capture of the GPU's activity alone (no CPU operators, no shapes, so the kernels run as they do unwatched),
the kernel time per step split by kernel name.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode


def event_times(step: Callable[[], None], steps: int) -> list[float]:
    """Each step's time in ms between CUDA events recorded before and after it (no profiler)."""
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def summary(times: list[float]) -> dict[str, float]:
    """Median, min and max of step times, rounded to µs, and how many were timed."""
    return {"median": round(statistics.median(times), 3), "min": round(min(times), 3), "max": round(max(times), 3),
            "steps": len(times)}


def flops(step: Callable[[], None]) -> tuple[int, dict[str, int]]:
    """FLOPs of one call of ``step`` as FlopCounterMode counts them: the total and per aten op."""
    with FlopCounterMode(display=False) as counter:
        step()
    torch.cuda.synchronize()
    by_op = {str(op): n for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return counter.get_total_flops(), by_op


def kernels(step: Callable[[], None], steps: int) -> tuple[dict[str, float], float]:
    """GPU time per step by kernel name (µs) and kernels per step, from CUPTI's kernel records alone: no CPU
    operators are recorded, so the host runs at its own pace and the kernels' durations are what they are without
    the profiler."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per_name: dict[str, float] = {}
    launches = 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA and not event.name.startswith(("Memcpy", "Memset")):
            per_name[event.name] = per_name.get(event.name, 0.0) + event.time_range.elapsed_us() / steps
            launches += 1
    return per_name, launches / steps


def write(path: Path, fields: dict) -> None:
    """Write ``truth.json`` (the GPU, torch version and the measured fields) and print it as RESULT lines."""
    doc = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
           **fields}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    for key, value in fields.items():
        if isinstance(value, int | float | str) or (isinstance(value, dict) and len(value) <= 4):
            print(f"RESULT truth {key}: {json.dumps(value)}")
