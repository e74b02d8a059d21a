"""A matrix transpose written two ways under one kernel name, for a before/after pair under Nsight Compute.

Both variants are `transpose` (fp32, N x N, block 32 x 8, each thread moves 4 elements, grid N/32 x N/32), so
`tracedoc diff` matches the two ncu reports kernel by kernel, as ncu's baselines would:
  naive   reads a row of the input (coalesced) and writes a column of the output: every warp's store touches 32
          different rows, 32 sectors where 4 would do (uncoalesced-access)
  tiled   stages a 32 x 33 tile in shared memory (the extra column avoids bank conflicts), so that reads and writes
          both walk consecutive addresses

The script checks the result against torch, times each variant with CUDA events (effective bandwidth: 2 N^2 x 4
bytes per call) and then launches the chosen variant once per recorded step.

Example:
  python workloads/transpose/run.py --variant naive --profiler none --out out/transpose-naive
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from profiled_steps import SKIPPED_STEPS, add_profiler_option, profiled_steps  # noqa: E402

VARIANTS = ("naive", "tiled")
TILE, ROWS = 32, 8  # a 32 x 32 tile per block of 32 x 8 threads: each thread moves TILE / ROWS elements

SOURCES = {
    "naive": r"""
extern "C" __global__ void transpose(const float* in, float* out, int n) {
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[x * n + (y + j)] = in[(y + j) * n + x];
}
""",
    "tiled": r"""
extern "C" __global__ void transpose(const float* in, float* out, int n) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}
""",
}


def main() -> None:
    """Check, time, then record the chosen variant."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="naive", help="the kernel to time and record")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz (--profiler torch)")
    parser.add_argument("--n", type=int, default=8192, help="matrix size N (a multiple of 32)")
    parser.add_argument("--steps", type=int, default=1, help="recorded steps: one launch per step")
    parser.add_argument("--min-ms", type=float, default=100.0, help="GPU time to time the kernel for")
    add_profiler_option(parser)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("the transpose needs a CUDA GPU")
    if args.n % TILE:
        parser.error("--n must be a multiple of 32")
    import cupy

    kernel = cupy.RawModule(code=SOURCES[args.variant]).get_function("transpose")
    n = args.n
    src = torch.rand(n, n, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    grid, block = (n // TILE, n // TILE), (TILE, ROWS)
    call_args = (np.uint64(src.data_ptr()), np.uint64(dst.data_ptr()), np.int32(n))

    def launch() -> None:
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel(grid, block, call_args)

    launch()
    torch.cuda.synchronize()
    if not torch.equal(dst, src.t()):
        sys.exit(f"{args.variant}: the result is not the transpose")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls = 1
    while True:
        start.record()
        for _ in range(calls):
            launch()
        stop.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(stop)
        if ms >= args.min_ms:
            break
        calls *= 2
    per_call = ms / calls
    print(f"RESULT transpose {args.variant}: {per_call:.4f} ms per call of {n}x{n} fp32, "
          f"{2 * n * n * 4 / per_call / 1e6:.0f} GB/s ({calls} calls on {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, cupy {cupy.__version__})")

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, cuda=True) as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            launch()
            prof.step()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
