"""A CuPy loop whose every array is a cudaMalloc and a cudaFree, or the same loop on CuPy's memory pool.

Variants:
  nopool  ``cupy.cuda.set_allocator(None)``: no memory pool, so each array the loop makes is a cudaMalloc and each
          one it drops a cudaFree, which waits for the GPU to finish its work first: the host stalls inside
          cudaFree every step, and the GPU waits for the host's next launches
  pool    the same loop on CuPy's default memory pool: after the first step every array reuses a freed block

Each step makes a random ``--size``² float32 matrix (``load``), multiplies it by its transpose and applies an
elementwise chain (``compute``: each op a new array, each dropped one freed), and reads one scalar back
(``reduce``). Under ``--profiler nvtx`` every step is the NVTX range ``train_step`` with its phases as NVTX
ranges inside, for a run under ``nsys profile -t cuda,nvtx,osrt`` (the whole process). Before the recorded steps,
``--bench-steps`` unrecorded ones are timed (host clock around each, after warm-up; and CUDA events): their
median, min and max go into ``truth.json`` and the ``RESULT`` line.

Example:
  nsys profile -t cuda,nvtx,osrt -o out/nsys-cupy-nopool/sample python workloads/cupy_alloc/run.py \\
      --variant nopool --profiler nvtx --out out/nsys-cupy-nopool
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import cupy
from cupyx.profiler import time_range

VARIANTS = ("nopool", "pool")
_marks = False  # --profiler nvtx: steps and phases are NVTX ranges


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """A named NVTX range under --profiler nvtx, else nothing."""
    if not _marks:
        yield
        return
    with time_range(name):
        yield


def step(rng: cupy.random.Generator, size: int) -> float:
    """One step; every temporary array is dropped as soon as it is used."""
    with phase("train_step"):
        with phase("load"):
            x = rng.standard_normal((size, size), dtype=cupy.float32)
        with phase("compute"):
            y = x @ x.T
            z = cupy.tanh(y * (1.0 / size)) * 0.5 + x
            del x, y
            z = z - z.mean(axis=0)
        with phase("reduce"):
            value = float(cupy.abs(z).sum())
    return value


def timed(rng: cupy.random.Generator, size: int, steps: int) -> tuple[list[float], list[float]]:
    """Host-clock and CUDA-event time of each of ``steps`` steps (ms)."""
    wall, events = [], []
    for _ in range(steps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        started = time.perf_counter()
        start.record()
        step(rng, size)
        end.record()
        end.synchronize()
        wall.append(1e3 * (time.perf_counter() - started))
        events.append(cupy.cuda.get_elapsed_time(start, end))
    return wall, events


def summary(times: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(times), 3), "min": round(min(times), 3), "max": round(max(times), 3),
            "steps": len(times)}


def main() -> None:
    global _marks
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="nopool")
    parser.add_argument("--out", type=Path, required=True, help="folder for truth.json")
    parser.add_argument("--steps", type=int, default=20, help="recorded steps (after the timed ones)")
    parser.add_argument("--bench-steps", type=int, default=30, help="unrecorded steps timed after warm-up")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--profiler", choices=("nvtx", "none"), default="nvtx",
                        help="nvtx: mark the recorded steps and their phases as NVTX ranges; none: only time")
    args = parser.parse_args()
    if args.variant == "nopool":
        cupy.cuda.set_allocator(None)
    print(f"variant={args.variant} size={args.size} cupy={cupy.__version__} "
          f"device={cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    rng = cupy.random.default_rng(0)
    for _ in range(3):  # warm-up: cuBLAS handle, kernels compiled and loaded
        step(rng, args.size)
    cupy.cuda.Device().synchronize()
    wall, events = timed(rng, args.size, args.bench_steps)
    truth = {"workload": "cupy_alloc", "variant": args.variant, "size": args.size, "cupy": cupy.__version__,
             "step_ms_unprofiled_host": summary(wall), "step_ms_unprofiled_cuda_events": summary(events),
             "step_ms_all_host": wall}
    print(f"RESULT cupy_alloc {args.variant}: {truth['step_ms_unprofiled_host']['median']:.3f} ms/step (host clock, "
          f"median of {len(wall)}, no profiler; min {min(wall):.3f}, max {max(wall):.3f}), "
          f"{statistics.median(events):.3f} ms between CUDA events")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "truth.json").write_text(json.dumps(truth, indent=1))
    _marks = args.profiler == "nvtx"
    for _ in range(args.steps):
        step(rng, args.size)
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
