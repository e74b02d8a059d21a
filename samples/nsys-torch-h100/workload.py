"""A small PyTorch program with NVTX ranges and known problems, made to be profiled by Nsight Systems.

Problems it has on purpose (what tracedoc and `nsys analyze` should find):
  - host-to-device copies from pageable memory (plain CPU tensors .to("cuda")) and pageable .cpu() results;
  - a blocking read of the loss every step (.item(): a DtoH copy and a stream synchronization);
  - synchronous cudaMemcpy and cudaMemset calls (through CuPy's runtime bindings), one memset on managed memory;
  - many tiny element-wise kernels in 'optimizer' (launch-bound);
  - torch.cuda.synchronize() (cudaDeviceSynchronize) at the end of each step;
  - a 0.6 s host pause ('checkpoint') with the GPU idle: a gap nsys's gpu_gaps rule (≥ 500 ms) reports.

NVTX: push/pop ranges 'step', 'data', 'forward', 'loss', 'optimizer', 'checkpoint' (nested inside 'step'), and one
start/end range 'epoch' around all steps.

Run (on a GPU machine):
  nsys profile -t cuda,nvtx,osrt -o x python3 workload.py            # the sample
  python3 workload.py --tiny-kernels 500000                           # a large report for benchmarks
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch.cuda import nvtx


def sync_copies(nbytes: int) -> None:
    """Synchronous cudaMemcpy (DtoH and HtoD into pageable NumPy memory) and cudaMemset, via CuPy's runtime."""
    import cupy
    from cupy.cuda import runtime

    dev = cupy.empty(nbytes, dtype=cupy.uint8)
    host = np.ones(nbytes, dtype=np.uint8)
    runtime.memcpy(dev.data.ptr, host.ctypes.data, nbytes, runtime.memcpyHostToDevice)
    runtime.memcpy(host.ctypes.data, dev.data.ptr, nbytes, runtime.memcpyDeviceToHost)
    runtime.memset(dev.data.ptr, 0, nbytes)
    managed = runtime.mallocManaged(1 << 20)
    try:
        runtime.memset(managed, 0, 1 << 20)
        runtime.deviceSynchronize()
    finally:
        runtime.free(managed)


def train(steps: int, tiny: int) -> None:
    """The profiled loop: pageable input copies, matmuls, a blocking loss read, tiny optimizer kernels."""
    dev = torch.device("cuda")
    w = torch.randn(2048, 2048, device=dev) / 45
    params = [torch.zeros(64, device=dev) for _ in range(tiny)]
    epoch = nvtx.range_start("epoch")
    for step in range(steps):
        nvtx.range_push(f"step {step}")
        nvtx.range_push("data")
        x = torch.randn(4096, 2048).to(dev)  # pageable host memory: staged, blocking copy
        nvtx.range_pop()
        nvtx.range_push("forward")
        for _ in range(8):
            x = torch.tanh(x @ w)
        nvtx.range_pop()
        nvtx.range_push("loss")
        loss = x.square().mean().item()  # DtoH copy + synchronization every step
        _ = x[:256].cpu()  # pageable DtoH result
        nvtx.range_pop()
        nvtx.range_push("optimizer")
        for p in params:
            p.add_(loss * 1e-3)
        nvtx.range_pop()
        if step == steps // 2:
            nvtx.range_push("checkpoint")
            sync_copies(4 << 20)
            time.sleep(0.6)
            nvtx.range_pop()
        torch.cuda.synchronize()
        nvtx.range_pop()
    nvtx.range_end(epoch)


def many_kernels(n: int) -> None:
    """n tiny kernels back to back: a report with about n kernel rows and n runtime rows."""
    t = torch.zeros(16, device="cuda")
    nvtx.range_push("tiny kernels")
    for _ in range(n):
        t.add_(1)
    torch.cuda.synchronize()
    nvtx.range_pop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--tiny", type=int, default=200, help="tiny optimizer kernels per step")
    parser.add_argument("--tiny-kernels", type=int, default=0, help="instead: launch this many tiny kernels")
    args = parser.parse_args()
    torch.ones(1, device="cuda")  # create the context outside the ranges
    if args.tiny_kernels:
        many_kernels(args.tiny_kernels)
    else:
        train(args.steps, args.tiny)


if __name__ == "__main__":
    main()
