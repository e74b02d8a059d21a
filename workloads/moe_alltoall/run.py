"""Expert-parallel mixture-of-experts layers: tokens dispatched to experts and combined back by all-to-all.

One expert per rank. Each of the --layers MoE layers routes every local token to one expert (top-1 of a
linear router), exchanges the per-expert token counts, dispatches the tokens with ``dist.all_to_all_single``
and uneven split sizes, runs the local expert (a bf16 FFN) on the tokens it received, and sends the results
back with a second (combine) all-to-all.

Variants:
  balanced    the router spreads the tokens evenly over the experts
  hot_expert  the router favours the expert of --hot-rank (a logit bias worth --hot-share of the tokens; the
              routing noise leaves somewhat less: 74 % for 0.8 on two ranks), so that rank computes longest
              and every other rank waits for it in the combine all-to-all

Each rank writes its own trace, rank<N>.trace.json.gz, into --out.

Example:
  torchrun --nproc_per_node=2 workloads/moe_alltoall/run.py --variant hot_expert --out out/moe-hot-expert
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from distributed import init_distributed  # noqa: E402
from profiled_steps import SKIPPED_STEPS, add_profiler_option, profiled_steps, sync  # noqa: E402

VARIANTS = ("balanced", "hot_expert")


class MoELayer(nn.Module):
    """Router, the local expert and the dispatch/combine exchanges of one expert-parallel MoE layer."""

    def __init__(self, d_model: int, hidden: int, world: int, hot: tuple[int, float] | None) -> None:
        super().__init__()
        self.world = world
        self.router = nn.Linear(d_model, world, bias=False)
        nn.init.normal_(self.router.weight, std=0.02)
        # A router that collapsed onto one expert: a logit bias that sends about `share` of the tokens there.
        bias = torch.zeros(world)
        if hot is not None:
            rank, share = hot
            bias[rank] = math.log(share * (world - 1) / (1 - share))
        self.register_buffer("bias", bias)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)
        self.received: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [tokens, d_model] -> [tokens, d_model]."""
        with record_function("route"):
            logits = self.router(x).float()
            # Gumbel noise makes the top-1 choice a sample of the router's distribution, as a trained router's is.
            noise = -torch.log(-torch.log(torch.rand_like(logits).clamp_min(1e-9)))
            expert = (logits + self.bias + noise).argmax(dim=-1)
            gate = F.softmax(logits + self.bias, dim=-1).gather(1, expert.unsqueeze(1))
            order = torch.argsort(expert)
            send_counts = torch.bincount(expert, minlength=self.world)
            recv_counts = torch.empty_like(send_counts)
            dist.all_to_all_single(recv_counts, send_counts)
            send_splits, recv_splits = send_counts.tolist(), recv_counts.tolist()
        self.received.append(sum(recv_splits))
        with record_function("dispatch"):
            tokens = x[order]
            received = tokens.new_empty((sum(recv_splits), x.shape[1]))
            dist.all_to_all_single(received, tokens, recv_splits, send_splits)
        with record_function("expert"):
            out = self.down(F.gelu(self.up(received)))
        with record_function("combine"):
            back = torch.empty_like(tokens)
            dist.all_to_all_single(back, out, send_splits, recv_splits)
        y = torch.empty_like(x)
        y[order] = back
        return x + y * gate.to(x.dtype)


class Model(nn.Module):
    """A stack of MoE layers (the attention blocks between them are left out: they are the same on every rank)."""

    def __init__(self, args: argparse.Namespace, world: int) -> None:
        super().__init__()
        hot = (args.hot_rank % world, args.hot_share) if args.variant == "hot_expert" else None
        self.layers = nn.ModuleList(MoELayer(args.d_model, args.hidden, world, hot) for _ in range(args.layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x



def main() -> None:
    """Parse arguments, time unprofiled steps, then write one trace per rank."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="balanced")
    parser.add_argument("--out", type=Path, required=True, help="folder for rank<N>.trace.json.gz")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=20, help="unprofiled steps timed for step ms")
    parser.add_argument("--tokens", type=int, default=16384, help="tokens per rank per step")
    parser.add_argument("--d-model", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=8192, help="expert FFN width")
    parser.add_argument("--layers", type=int, default=4, help="MoE layers per step")
    parser.add_argument("--hot-rank", type=int, default=1, help="rank whose expert is hot (hot_expert)")
    parser.add_argument("--hot-share", type=float, default=0.8,
                        help="share of the tokens the hot expert's logit bias aims at")
    parser.add_argument("--device", default="cuda", help="'cpu' runs a smoke test over gloo")
    add_profiler_option(parser)
    args = parser.parse_args()

    device, rank, world = init_distributed(args.device)
    torch.manual_seed(0)  # the same router and experts' initialisation on every rank
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = Model(args, world).to(device=device, dtype=dtype)
    torch.manual_seed(1000 + rank)  # each rank's own tokens and routing noise
    x = torch.randn(args.tokens, args.d_model, device=device, dtype=dtype)
    if rank == 0:
        print(f"variant={args.variant} world={world} tokens/rank={args.tokens} d_model={args.d_model} "
              f"hidden={args.hidden} layers={args.layers} torch={torch.__version__}")

    def step() -> None:
        with torch.no_grad():
            model(x)

    for _ in range(3):
        step()
    sync(device)
    for layer in model.layers:
        layer.received.clear()
    started = time.perf_counter()
    for _ in range(args.bench_steps):
        step()
    sync(device)
    step_ms = 1e3 * (time.perf_counter() - started) / args.bench_steps
    received = sum(sum(layer.received) for layer in model.layers) / args.bench_steps / args.layers
    print(f"rank {rank} expert received {received:.0f} tokens per layer ({received / args.tokens:.2f}x its own)")
    if rank == 0:
        print(f"RESULT moe {args.variant}: {step_ms:.2f} ms/step, "
              f"{world * args.tokens / step_ms * 1e3:.0f} tokens/s over {world} ranks (no profiler)")

    trace = args.out / f"rank{rank}.trace.json.gz"
    with profiled_steps(args.profiler, trace, args.steps, device.type == "cuda") as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            step()
            prof.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
