"""The GEMM ladder: one matrix product written four ways, each rung's speed against cuBLAS on the same GPU.

Rungs (C = A x B, A and B bf16 row-major, fp32 accumulation; kernels in kernels.cu, compiled by NVRTC via cupy):
  naive   one thread per output element, both operands read from global memory in the inner loop
  tiled   128 x 128 tiles staged in shared memory, an 8 x 8 register block per thread, FMAs on CUDA cores
  wmma    the same tiling on tensor cores through the WMMA API (mma.sync), 64 x 32 per warp
  cublas  torch.matmul, cuBLAS's own kernel (wgmma and TMA on Hopper)

Each rung is first checked against an fp32 cuBLAS product of the same inputs (relative Frobenius error), then
timed with CUDA events; the table gives TFLOP/s and % of cuBLAS per shape, and gemm_ladder.json in --out keeps
it with the SM clock each rung ran at, so that `tracedoc analyze` can put any GEMM kernel of an ncu report beside
the cuBLAS ceiling of its shape. The recorded steps launch each rung once on --profile-shape: under `ncu`
(tracedoc workload run gemm_ladder --profiler ncu) each rung is one profiled kernel, and tracedoc names what
limits it.

Example:
  python workloads/gemm_ladder/run.py --out out/gemm-ladder
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.profiler import record_function

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from profiled_steps import SKIPPED_STEPS, add_profiler_option, profiled_steps  # noqa: E402

VARIANTS = ("all", "naive", "tiled", "wmma", "cublas")
RUNGS = VARIANTS[1:]
MAX_REL_ERR = 1e-2  # bf16 inputs, fp32 accumulation: the hand-written rungs land near 1e-6, cuBLAS's bf16 output 2e-3
BACKLOG_SHARE = 0.1  # a timing is of the GPU when this share of its GPU time was still queued after the last launch
RESULTS_FILE = "gemm_ladder.json"
RESULTS_FORMAT = "tracedoc-gemm-ladder"  # the tag tracedoc's reader (tracedoc/ingest/ncu/gemm_ladder.py) looks for
Shape = tuple[int, int, int]


def parse_shape(text: str) -> Shape:
    """'4096' (square) or 'MxNxK'; M and N multiples of 128 and K of 32, as the hand-written kernels assume."""
    dims = [int(d) for d in text.lower().split("x")]
    m, n, k = dims * 3 if len(dims) == 1 else dims
    if len(dims) not in (1, 3) or m % 128 or n % 128 or k % 32 or min(m, n, k) <= 0:
        raise argparse.ArgumentTypeError(f"{text}: M and N must be multiples of 128 and K of 32")
    return m, n, k


class HandKernels:
    """The CUDA C++ rungs, compiled once for this GPU, launched on torch's current stream."""

    def __init__(self) -> None:
        import cupy
        from torch.utils.cpp_extension import CUDA_HOME

        self.cupy = cupy
        include = Path(CUDA_HOME or "/usr/local/cuda") / "include"  # cuda_bf16.h and mma.h
        options = ("--std=c++17",) + ((f"-I{include}",) if include.is_dir() else ())
        cupy.cuda.Device(torch.cuda.current_device()).use()
        module = cupy.RawModule(code=(Path(__file__).parent / "kernels.cu").read_text(), options=options)
        self.kernels = {r: module.get_function(f"gemm_{r}") for r in ("naive", "tiled", "wmma")}

    def __call__(self, rung: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        (m, k), n = a.shape, b.shape[1]
        grid, block = ((n // 32, m // 8), (32, 8)) if rung == "naive" else ((n // 128, m // 128), (256,))
        args = (np.uint64(a.data_ptr()), np.uint64(b.data_ptr()), np.uint64(c.data_ptr()),
                np.int32(m), np.int32(n), np.int32(k))
        with self.cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            self.kernels[rung](grid, block, args)


class Problem:
    """One shape's operands, its fp32 reference, and a launcher per rung writing into its own output."""

    def __init__(self, shape: Shape, hand: HandKernels) -> None:
        m, n, k = shape
        gen = torch.Generator(device="cuda").manual_seed(0)
        self.a = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        self.b = torch.randn(k, n, device="cuda", generator=gen).to(torch.bfloat16)
        self.c = torch.empty(m, n, device="cuda")
        self.c_bf16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        self.flop = 2.0 * m * n * k
        self.hand = hand

    def launcher(self, rung: str) -> Callable[[], None]:
        """A call that computes C once with this rung."""
        def run() -> None:
            if rung == "cublas":
                torch.matmul(self.a, self.b, out=self.c_bf16)
            else:
                self.hand(rung, self.a, self.b, self.c)

        return run

    def rel_error(self, rung: str) -> float:
        """Relative Frobenius error of the rung's C against cuBLAS in fp32 (unwritten elements make it NaN)."""
        out = self.c_bf16 if rung == "cublas" else self.c
        out.fill_(float("nan"))
        self.launcher(rung)()
        ref = torch.matmul(self.a.float(), self.b.float())
        return (torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref)).item()


def sm_clock_mhz() -> int | None:
    """The current SM clock of torch's current GPU in MHz (NVML), None where NVML cannot tell."""
    try:
        return torch.cuda.clock_rate()
    except Exception:  # no nvidia-ml-py, or NVML unsupported: the clock is then unknown, not an error
        return None


@dataclass
class Timing:
    """One rung's timing: mean ms per call, the median SM clock while it ran (MHz, None when unknown), and whether
    the GPU was still busy when the CPU had queued every call (False: the host was the limit, e.g. a profiler's
    launch overhead, and the time is no measure of the kernel)."""

    ms: float
    sm_clock_mhz: int | None
    gpu_bound: bool


def time_ms(fn: Callable[[], None], min_ms: float) -> Timing:
    """Time one call (CUDA events) over enough back-to-back calls to last about ``min_ms``, sampling the SM clock
    while the GPU runs them."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    fn()
    end.record()
    end.synchronize()
    repeats = max(3, min(200, math.ceil(min_ms / max(start.elapsed_time(end), 1e-3))))
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    queued = time.perf_counter()
    clocks = []
    while not end.query():  # the calls are queued: sample the clock while the GPU works through them
        clocks.append(sm_clock_mhz())
        time.sleep(0.001)
    backlog_ms = (time.perf_counter() - queued) * 1e3
    end.synchronize()
    total_ms = start.elapsed_time(end)
    known = [c for c in clocks if c]
    # GPU-bound when the CPU finished queuing well before the GPU finished (launches at least ~10 % faster than
    # the calls run): the GPU never waited for a launch
    return Timing(total_ms / repeats, round(statistics.median(known)) if known else None,
                  backlog_ms >= BACKLOG_SHARE * total_ms)


def benchmark(shape: Shape, rungs: list[str], hand: HandKernels, min_ms: float) -> list[dict]:
    """Check, time and print every rung on one shape; one result row per rung (``ms`` None when it was wrong)."""
    problem = Problem(shape, hand)
    name = "x".join(map(str, shape))
    rows = []
    for rung in rungs:
        err = problem.rel_error(rung)
        timing = time_ms(problem.launcher(rung), min_ms) if err <= MAX_REL_ERR else None
        ms = timing.ms if timing else None
        rows.append({"m": shape[0], "n": shape[1], "k": shape[2], "rung": rung,
                     "kernel": None if rung == "cublas" else f"gemm_{rung}", "rel_error": err, "ms": ms,
                     "tflop_per_s": problem.flop / ms / 1e9 if ms else None,
                     "sm_clock_mhz": timing.sm_clock_mhz if timing else None,
                     "gpu_bound": timing.gpu_bound if timing else None})
    cublas_ms = next((r["ms"] for r in rows if r["rung"] == "cublas" and r["gpu_bound"]), None)  # host-bound: none
    print(f"\n{name}: {'rung':<7} {'rel. error':>10} {'ms':>9} {'TFLOP/s':>8} {'% of cuBLAS':>11} {'SM MHz':>7}")
    for r in rows:
        if r["ms"] is None:
            print(f"{'':{len(name)}}  {r['rung']:<7} {r['rel_error']:>10.1e}   WRONG: relative error above "
                  f"{MAX_REL_ERR:g}, not timed")
            continue
        pct = f"{100 * cublas_ms / r['ms']:.1f}" if cublas_ms else "n/a"
        host = "" if r["gpu_bound"] else "  host-bound: the GPU waited for the CPU's launches"
        print(f"{'':{len(name)}}  {r['rung']:<7} {r['rel_error']:>10.1e} {r['ms']:>9.3f} {r['tflop_per_s']:>8.1f} "
              f"{pct:>11} {r['sm_clock_mhz'] or '?':>7}{host}")
    for r in rows:
        if r["ms"] is not None:
            pct = f" ({100 * cublas_ms / r['ms']:.1f}% of cuBLAS)" if cublas_ms and r["rung"] != "cublas" else ""
            print(f"RESULT gemm {name} {r['rung']}: {r['tflop_per_s']:.1f} TFLOP/s{pct}")
    return rows


def write_results(path: Path, rows: list[dict], hand: HandKernels, profiler: str) -> None:
    """The measurements as JSON: what tracedoc reads as the cuBLAS ceiling of each shape on this GPU."""
    props = torch.cuda.get_device_properties(0)
    doc = {"format": RESULTS_FORMAT, "version": 1, "gpu": props.name, "sm_count": props.multi_processor_count,
           "compute_capability": f"{props.major}.{props.minor}", "torch": torch.__version__,
           "cuda": torch.version.cuda, "cupy": hand.cupy.__version__, "profiler": profiler, "dtype": "bf16",
           "accumulate": "fp32",
           "timing": "CUDA events, mean over back-to-back calls", "results": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nmeasurements: {path}")


def main() -> None:
    """Compile the kernels, check and time every rung on every shape, then record one launch of each."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="all", help="the rungs to run (cuBLAS always runs)")
    parser.add_argument("--out", type=Path, required=True, help=f"folder for trace.json.gz and {RESULTS_FILE}")
    parser.add_argument("--shapes", type=lambda s: [parse_shape(x) for x in s.split(",")],
                        default=[parse_shape(x) for x in ("2048", "4096", "8192")],
                        help="comma-separated sizes N (square) or MxNxK (default 2048,4096,8192)")
    parser.add_argument("--profile-shape", type=parse_shape, default=parse_shape("4096"),
                        help="the shape of the recorded launches (default 4096)")
    parser.add_argument("--steps", type=int, default=1, help="recorded steps: one launch of each rung per step")
    parser.add_argument("--min-ms", type=float, default=200.0, help="GPU time to time each rung for")
    parser.add_argument("--phase", choices=("all", "time", "record"), default="all",
                        help="time: check and time every rung (writes gemm_ladder.json); record: only the recorded "
                             "launches (what a profiler wrapping the script should see); all: both")
    add_profiler_option(parser)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("the GEMM ladder needs a CUDA GPU")

    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference is a true fp32 product
    hand = HandKernels()
    rungs = list(RUNGS) if args.variant == "all" else list(dict.fromkeys([args.variant, "cublas"]))
    props = torch.cuda.get_device_properties(0)
    print(f"GPU {props.name} ({props.multi_processor_count} SMs), torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}, cupy {hand.cupy.__version__}; rungs: {', '.join(rungs)}")
    ok = True
    if args.phase in ("all", "time"):
        rows = [row for shape in args.shapes for row in benchmark(shape, rungs, hand, args.min_ms)]
        write_results(args.out / RESULTS_FILE, rows, hand, args.profiler)
        ok = all(r["ms"] is not None for r in rows)
        if args.phase == "time":
            sys.exit(0 if ok else 1)

    recorded = [r for r in rungs if args.variant in ("all", r)]
    problem = Problem(args.profile_shape, hand)
    launchers = {r: problem.launcher(r) for r in recorded}
    print(f"\nrecording {SKIPPED_STEPS} + {args.steps} steps of {', '.join(recorded)} on "
          f"{'x'.join(map(str, args.profile_shape))} (profiler: {args.profiler})")
    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, cuda=True) as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            for rung, launch in launchers.items():
                with record_function(f"gemm_{rung}"):
                    launch()
            prof.step()
    torch.cuda.synchronize()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
