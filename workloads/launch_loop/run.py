"""A launch-bound training step: a deep, narrow MLP whose every op is a kernel of a few microseconds.

Variants:
  eager  48 blocks of Linear(256, 256) + LayerNorm + GELU on a batch of 64, forward, backward and Adam with
         ``foreach=False`` (one small kernel per parameter and update op): well over 1,000 kernels per step, each a
         few µs, so the host's launches, not the GPU, set the step's length; the profiler's per-operator cost
         (record_shapes=True) lengthens it further

Besides the trace the script writes ``truth.json`` (ground_truth.py): the step time between CUDA events around
``--bench-steps`` unprofiled steps (median, min, max), FlopCounterMode's FLOPs of one step, and the GPU's kernel time
per step (CUPTI's kernel records alone, no CPU operators recorded) with the number of kernels per step. Under a
profiler started around the script (``--profiler nvtx``/``nsys``/``ncu``: CUPTI is that profiler's) the kernel
capture is left out, and the CUDA-event step times are those of the steps it watches.

Example:
  python workloads/launch_loop/run.py --variant eager --record-shapes --out out/launch-loop
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
import ground_truth  # noqa: E402
from profiled_steps import (  # noqa: E402
    SKIPPED_STEPS,
    add_profiler_option,
    phase,
    profiled_steps,
    sync,
    training_step,
    use_profiler,
)

VARIANTS = ("eager",)


def make_model(width: int, blocks: int) -> nn.Module:
    """``blocks`` × (Linear, LayerNorm, GELU), then a Linear to one output."""
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 1))


class Trainer:
    def __init__(self, device: torch.device, width: int, blocks: int, batch: int) -> None:
        self.model = make_model(width, blocks).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, foreach=False)
        gen = torch.Generator(device=device).manual_seed(1)
        self.inputs = torch.randn(batch, width, device=device, generator=gen)
        self.targets = torch.randn(batch, 1, device=device, generator=gen)

    def step(self) -> None:
        with training_step():
            with phase("forward"):
                loss = F.mse_loss(self.model(self.inputs), self.targets)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="eager")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz and truth.json")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=30, help="unprofiled steps timed with CUDA events")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=48)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", default="cuda", help="'cpu' checks the logic (no truth, no GPU events)")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, args.record_shapes)
    device = torch.device(args.device)
    torch.manual_seed(0)
    trainer = Trainer(device, args.width, args.blocks, args.batch)
    params = sum(p.numel() for p in trainer.model.parameters())
    print(f"variant={args.variant} params={params / 1e6:.2f}M blocks={args.blocks} width={args.width} "
          f"batch={args.batch} torch={torch.__version__}")
    for _ in range(5):
        trainer.step()
    sync(device)
    if device.type == "cuda":
        total, by_op = ground_truth.flops(trainer.step)
        times = ground_truth.event_times(trainer.step, args.bench_steps)
        stats = ground_truth.summary(times)
        external = args.profiler in ("nvtx", "nsys", "ncu")  # CUPTI belongs to the profiler around the script
        kernels, launches = ({}, 0.0) if external else ground_truth.kernels(trainer.step, 5)
        gpu_ms = sum(kernels.values()) / 1e3
        print(f"RESULT launch_loop {args.variant}: {stats['median']:.2f} ms/step (CUDA events, median of "
              f"{len(times)}, no profiler); GPU kernel time {gpu_ms:.3f} ms/step "
              f"({100 * gpu_ms / stats['median']:.1f} % of the step, {launches:.0f} kernels)")
        ground_truth.write(args.out / "truth.json", {
            "workload": "launch_loop", "variant": args.variant, "blocks": args.blocks, "width": args.width,
            "batch": args.batch, "params": params, "step_ms_unprofiled": stats,
            "gpu_kernel_ms_per_step": round(gpu_ms, 4), "kernels_per_step": launches, "flops_per_step": total,
            "flops_by_op": by_op, "kernel_us_per_step_by_name": kernels, "step_ms_all": times})

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, device.type == "cuda",
                        gpu_activity=args.torch_activities == "cpu,cuda") as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            trainer.step()
            prof.step()


if __name__ == "__main__":
    main()
