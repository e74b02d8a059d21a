"""A training step of a small transformer sharded with FSDP2 (fully_shard), profiled on every rank.

Variants:
  prefetch     FSDP2's defaults: each block is its own fully_shard unit, so its parameters are all-gathered on
               FSDP's communication stream while the block before it still computes (implicit forward prefetch,
               explicit backward prefetch of the next block), and its gradients' reduce-scatter runs during the
               backward of the block before it
  no_prefetch  the same model with the host waiting for the GPU (torch.cuda.synchronize) at every block
               boundary: in forward before FSDP issues the block's all-gather, in backward before the block's
               gradients are computed. FSDP's overlap rests on the host issuing collectives ahead of the GPU; here
               every collective finds the GPU idle and runs alone, as with per-layer timing or .item() logging
               between blocks. (An empty set_modules_to_backward_prefetch([]) would not do it: FSDP2 reads an
               empty list as "use the default prefetch".)

Parameters are kept in fp32 and all-gathered in bf16; gradients are reduce-scattered in fp32
(MixedPrecisionPolicy). Each rank writes its own trace, rank<N>.trace.json.gz, into --out.

Example:
  torchrun --nproc_per_node=2 workloads/fsdp_step/run.py --variant prefetch --out out/fsdp-prefetch
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
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from distributed import init_distributed  # noqa: E402
from profiled_steps import (  # noqa: E402
    SKIPPED_STEPS,
    add_profiler_option,
    phase,
    profiled_steps,
    sync,
    training_step,
    use_profiler,
)

VARIANTS = ("prefetch", "no_prefetch")
D_IN = 256


class WaitInBackward(torch.autograd.Function):
    """Identity whose backward makes the host wait for the GPU before the gradients below it are computed."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.device = x.device
        return x.view_as(x)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        sync(ctx.device)
        return grad


class Block(nn.Module):
    """A pre-norm transformer encoder layer: one fully_shard unit (one all-gather, one reduce-scatter)."""

    def __init__(self, d_model: int, heads: int, wait: bool) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.wait = wait

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [batch, seq, d_model]. FSDP's pre-backward hook sits on the output, before WaitInBackward runs."""
        y = self.layer(x)
        return WaitInBackward.apply(y) if self.wait else y


class Net(nn.Module):
    """Input projection, a stack of Blocks, output projection."""

    def __init__(self, d_model: int, layers: int, heads: int, wait: bool) -> None:
        super().__init__()
        self.inp = nn.Linear(D_IN, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, wait) for _ in range(layers))
        self.out = nn.Linear(d_model, D_IN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [batch, seq, D_IN] -> [batch, seq, D_IN]."""
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def shard(model: Net, device: torch.device, variant: str) -> None:
    """fully_shard every block, then the root (which keeps the projections); the bad variant's host waits."""
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
        if variant == "no_prefetch":
            # Runs before FSDP's own pre-forward hook (prepend): the block's all-gather is issued on an idle GPU.
            block.register_forward_pre_hook(lambda module, args: sync(device), prepend=True)
    fully_shard(model, mesh=mesh, mp_policy=policy)


class Trainer:
    """Runs one training step per call."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        torch.manual_seed(0)  # the same initial weights on every rank before sharding
        self.model = Net(args.d_model, args.layers, args.heads, wait=args.variant == "no_prefetch").to(device)
        self.numel = sum(p.numel() for p in self.model.parameters())
        shard(self.model, device, args.variant)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, foreach=True)
        gen = torch.Generator(device=device).manual_seed(1000 + dist.get_rank())
        shape = (args.batch, args.seq, D_IN)
        self.batches = [tuple(torch.randn(shape, device=device, generator=gen) for _ in range(2)) for _ in range(2)]
        self.n = 0

    def step(self) -> None:
        """Forward, backward (all-gathers and reduce-scatters issued by FSDP's hooks), optimizer."""
        x, target = self.batches[self.n % len(self.batches)]
        self.n += 1
        with training_step():
            with phase("forward"):
                loss = F.mse_loss(self.model(x).float(), target)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)


def main() -> None:
    """Parse arguments, time unprofiled steps, then write one trace per rank."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="prefetch")
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<N>.trace.json.gz")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=20, help="unprofiled steps timed for step ms")
    parser.add_argument("--d-model", type=int, default=3072)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=24)
    parser.add_argument("--batch", type=int, default=8,
                        help="sequences per rank; keep each block's GPU time well above the host's time for it "
                             "(FSDP's hooks, the profiler) or the good variant is host-bound when profiled")
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--device", default="cuda", help="'cpu' runs a smoke test over gloo")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, args.record_shapes)

    device, rank, world = init_distributed(args.device)
    trainer = Trainer(args, device)
    tokens = args.batch * args.seq
    if rank == 0:
        print(f"variant={args.variant} world={world} params={trainer.numel / 1e6:.1f}M layers={args.layers} "
              f"tokens/rank={tokens} torch={torch.__version__}; per step about {4 * trainer.numel / 1e6:.0f} MB "
              f"all-gathered (bf16, forward and backward) and {4 * trainer.numel / 1e6:.0f} MB reduce-scattered (fp32)")

    for _ in range(3):
        trainer.step()
    sync(device)
    started = time.perf_counter()
    for _ in range(args.bench_steps):
        trainer.step()
    sync(device)
    step_ms = 1e3 * (time.perf_counter() - started) / args.bench_steps
    if rank == 0:
        print(f"RESULT fsdp {args.variant}: {step_ms:.2f} ms/step, "
              f"{world * tokens / step_ms * 1e3:.0f} tokens/s over {world} ranks (no profiler)")

    trace = args.out / f"rank{rank}.trace.json.gz"
    with profiled_steps(args.profiler, trace, args.steps, device.type == "cuda") as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            trainer.step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
