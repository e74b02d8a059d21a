"""A ResNet-50 training step in bf16, profiled with its operators' shapes, with its unprofiled truth beside it.

Variants:
  bf16  torchvision's resnet50 with bf16 weights, batch 32 of 224x224 images, cross-entropy over 1000 classes,
        SGD with momentum: a GPU-bound step whose host runs ahead of the GPU unwatched, but which the profiler's
        per-operator cost (record_shapes=True) stretches, so the trace's step is longer than the job's

Besides the trace the script writes ``truth.json`` (ground_truth.py): the step time between CUDA events around
``--bench-steps`` unprofiled steps (median, min, max), FlopCounterMode's FLOPs of one step and the GPU's kernel time
per step (CUPTI's kernel records alone, no CPU operators recorded).

Example:
  python workloads/conv_step/run.py --variant bf16 --record-shapes --out out/conv-step
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
import ground_truth  # noqa: E402
from profiled_steps import (  # noqa: E402
    add_profiler_option,
    phase,
    profiled_steps,
    steps_to_run,
    sync,
    training_step,
    use_profiler,
)

VARIANTS = ("bf16",)


class Trainer:
    """ResNet-50, its optimizer and one fixed batch of random images and labels."""

    def __init__(self, device: torch.device, batch: int, size: int) -> None:
        self.model = torchvision.models.resnet50(num_classes=1000).to(device=device, dtype=torch.bfloat16)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        gen = torch.Generator(device=device).manual_seed(1)
        self.images = torch.randn(batch, 3, size, size, device=device, dtype=torch.bfloat16, generator=gen)
        self.labels = torch.randint(1000, (batch,), device=device, generator=gen)

    def step(self) -> None:
        with training_step():
            with phase("forward"):
                loss = F.cross_entropy(self.model(self.images).float(), self.labels)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="bf16")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz and truth.json")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=30, help="unprofiled steps timed with CUDA events")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224, help="image height and width")
    parser.add_argument("--device", default="cuda", help="'cpu' checks the logic (no truth, no GPU events)")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, args.record_shapes, args.cycles, args.cycle_names)
    device = torch.device(args.device)
    torch.manual_seed(0)
    trainer = Trainer(device, args.batch, args.size)
    params = sum(p.numel() for p in trainer.model.parameters())
    print(f"variant={args.variant} params={params / 1e6:.1f}M batch={args.batch} size={args.size} "
          f"torch={torch.__version__}")
    for _ in range(5):  # warm-up: cuDNN picks its algorithms, the optimizer makes its momentum buffers
        trainer.step()
    sync(device)
    if device.type == "cuda":
        total, by_op = ground_truth.flops(trainer.step)
        times = ground_truth.event_times(trainer.step, args.bench_steps)
        stats = ground_truth.summary(times)
        kernels, launches = ground_truth.kernels(trainer.step, 5)
        gpu_ms = sum(kernels.values()) / 1e3
        print(f"RESULT conv_step {args.variant}: {stats['median']:.2f} ms/step (CUDA events, median of "
              f"{len(times)}, no profiler), {total / 1e12:.3f} TFLOP/step (FlopCounterMode), "
              f"{total / stats['median'] / 1e9:.0f} TFLOP/s; GPU kernel time {gpu_ms:.2f} ms/step "
              f"({100 * gpu_ms / stats['median']:.1f} % of the step, {launches:.0f} kernels)")
        ground_truth.write(args.out / "truth.json", {
            "workload": "conv_step", "variant": args.variant, "batch": args.batch, "size": args.size,
            "params": params, "step_ms_unprofiled": stats, "flops_per_step": total,
            "gpu_kernel_ms_per_step": round(gpu_ms, 4), "kernels_per_step": launches, "flops_by_op": by_op,
            "kernel_us_per_step_by_name": kernels, "step_ms_all": times})

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, device.type == "cuda",
                        gpu_activity=args.torch_activities == "cpu,cuda") as prof:
        for _ in range(steps_to_run(args.steps)):
            trainer.step()
            prof.step()


if __name__ == "__main__":
    main()
