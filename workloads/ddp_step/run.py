"""A DistributedDataParallel training step of a small transformer, profiled on every rank.

Variants:
  overlap     plain DDP: gradient buckets are all-reduced while backward is still running
  no_overlap  forward and backward under ddp.no_sync(), then every gradient is all-reduced by hand
              after backward, so no communication is hidden behind compute
  straggler   plain DDP, but the last rank runs extra matrix products before each forward (about
              --straggler-ms of GPU work), as a rank with a heavier data pipeline or a slower GPU does:
              every other rank waits for it in the gradient all-reduces
  larger_batch  plain DDP, but the last rank's batch is --straggler-batch-factor times the others' (uneven
              data sharding): the same kernels, on larger inputs, run longer there and every other rank waits

Each rank writes its own trace, rank<N>.trace.json.gz, into --out.

Example:
  torchrun --nproc_per_node=2 workloads/ddp_step/run.py --variant overlap --out out/ddp-overlap
  torchrun --nproc_per_node=2 --no-python nsys profile -t cuda,nvtx,osrt -o rank%q{RANK} \
      python3 workloads/ddp_step/run.py --variant larger_batch --profiler nvtx --out .
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from distributed import init_distributed  # noqa: E402
from profiled_steps import (  # noqa: E402
    add_profiler_option,
    phase,
    profiled_steps,
    steps_to_run,
    sync,
    training_step,
    use_profiler,
)

VARIANTS = ("overlap", "no_overlap", "straggler", "larger_batch")
D_IN = 256


class Net(nn.Module):
    """Input projection, a stack of pre-norm transformer encoder layers, output projection."""

    def __init__(self, d_model: int, layers: int, heads: int) -> None:
        super().__init__()
        self.inp = nn.Linear(D_IN, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                d_model, heads, 4 * d_model, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            for _ in range(layers)
        )
        self.out = nn.Linear(d_model, D_IN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [batch, seq, D_IN] -> [batch, seq, D_IN]."""
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)


def allreduce_grads(params: list[nn.Parameter], world: int) -> None:
    """Average gradients over ranks one tensor at a time, after backward has finished."""
    grads = [p.grad for p in params if p.grad is not None]
    for g in grads:
        dist.all_reduce(g)
    torch._foreach_div_(grads, world)


class ExtraWork:
    """The straggling rank's additional GPU work: a chain of bf16 4096x4096 matrix products per step."""

    def __init__(self, device: torch.device, matmuls: int) -> None:
        gen = torch.Generator(device=device).manual_seed(7)
        self.a = torch.randn(4096, 4096, device=device, generator=gen).to(torch.bfloat16) / 64
        self.b = torch.randn(4096, 4096, device=device, generator=gen).to(torch.bfloat16) / 64
        self.matmuls = matmuls

    def __call__(self) -> None:
        with phase("extra_work"):
            x = self.a
            for _ in range(self.matmuls):
                x = x @ self.b


class Trainer:
    """Runs one training step per call for the chosen variant."""

    def __init__(self, args: argparse.Namespace, device: torch.device, world: int) -> None:
        self.variant = args.variant
        self.device = device
        self.world = world
        model = Net(args.d_model, args.layers, args.heads).to(device)
        self.ddp = DDP(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            bucket_cap_mb=args.bucket_mb,
        )
        self.params = list(self.ddp.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=1e-4, foreach=True)
        gen = torch.Generator(device=device).manual_seed(1000 + dist.get_rank())
        last = dist.get_rank() == world - 1
        batch = args.batch * (args.straggler_batch_factor if args.variant == "larger_batch" and last else 1)
        shape = (batch, args.seq, D_IN)
        self.batches = [tuple(torch.randn(shape, device=device, generator=gen) for _ in range(2)) for _ in range(2)]
        self.n = 0
        straggles = args.variant == "straggler" and last
        self.extra = ExtraWork(device, args.straggler_matmuls) if straggles else None

    def loss(self) -> torch.Tensor:
        """Forward pass on the next synthetic batch."""
        x, target = self.batches[self.n % len(self.batches)]
        self.n += 1
        with phase("forward"), torch.autocast(self.device.type, dtype=torch.bfloat16):
            return F.mse_loss(self.ddp(x).float(), target)

    def step(self) -> None:
        """Forward, backward (with or without overlapped all-reduce), optimizer."""
        with training_step():
            self._step()

    def _step(self) -> None:
        if self.extra is not None:
            self.extra()
        if self.variant != "no_overlap":
            loss = self.loss()
            with phase("backward"):
                loss.backward()
        else:
            with self.ddp.no_sync():
                loss = self.loss()
                with phase("backward"):
                    loss.backward()
            with phase("allreduce_grads"):
                allreduce_grads(self.params, self.world)
        with phase("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)



def allreduce_gbps(numel: int, device: torch.device, repeats: int = 5) -> float:
    """Bus bandwidth in GB/s of an fp32 all-reduce of numel elements (the gradients' size)."""
    buf = torch.ones(numel, device=device)
    dist.all_reduce(buf)
    sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(buf)
    sync(device)
    seconds = (time.perf_counter() - started) / repeats
    world = dist.get_world_size()
    return 4 * numel * 2 * (world - 1) / world / seconds / 1e9


def extra_work_ms(extra: ExtraWork, device: torch.device, repeats: int = 5) -> float:
    """GPU time of the straggler's extra work, ms per step (alone, outside the training step)."""
    sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        extra()
    sync(device)
    return 1e3 * (time.perf_counter() - started) / repeats


def main() -> None:
    """Parse arguments, time unprofiled steps, then write one trace per rank."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="overlap")
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<N>.trace.json.gz")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=20, help="unprofiled steps timed for step ms")
    parser.add_argument("--d-model", type=int, default=3072)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=24)
    parser.add_argument("--batch", type=int, default=8, help="sequences per rank")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket_cap_mb")
    parser.add_argument("--straggler-matmuls", type=int, default=32,
                        help="extra 4096x4096 bf16 products per step on the last rank (straggler variant)")
    parser.add_argument("--straggler-batch-factor", type=int, default=2,
                        help="the last rank's batch over the others' (larger_batch variant)")
    parser.add_argument("--device", default="cuda", help="'cpu' runs a smoke test over gloo")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, args.record_shapes, args.cycles, args.cycle_names)

    device, rank, world = init_distributed(args.device)
    torch.manual_seed(0)
    trainer = Trainer(args, device, world)
    numel = sum(p.numel() for p in trainer.params)
    tokens = args.batch * args.seq
    if rank == 0:
        print(
            f"variant={args.variant} world={world} params={numel / 1e6:.1f}M "
            f"grads={4 * numel / 1e6:.0f} MB tokens/rank={tokens} bucket_cap_mb={args.bucket_mb} "
            f"torch={torch.__version__}"
        )
        print(f"all-reduce of the gradients' size: {allreduce_gbps(numel, device):.1f} GB/s bus bandwidth")
    else:
        allreduce_gbps(numel, device)

    for _ in range(3):
        trainer.step()
    sync(device)
    started = time.perf_counter()
    for _ in range(args.bench_steps):
        trainer.step()
    sync(device)
    step_ms = 1e3 * (time.perf_counter() - started) / args.bench_steps
    if trainer.extra is not None:
        print(f"rank {rank} extra work: {extra_work_ms(trainer.extra, device):.2f} ms/step")
    if rank == 0:
        print(
            f"RESULT ddp {args.variant}: {step_ms:.2f} ms/step, "
            f"{world * tokens / step_ms * 1e3:.0f} tokens/s over {world} ranks (no profiler)"
        )

    trace = args.out / f"rank{rank}.trace.json.gz"
    with profiled_steps(args.profiler, trace, args.steps, device.type == "cuda") as prof:
        for _ in range(steps_to_run(args.steps)):
            trainer.step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
