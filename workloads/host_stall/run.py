"""An MLP training step whose host stalls the GPU in one of two ways, or not at all, profiled.

Variants:
  item   after every step the host reads the loss with loss.item() (a blocking sync that drains the GPU's queue)
         and then does per-step bookkeeping in Python on the value: the GPU idles through both
  sleep  no sync, but the host spends time in plain Python between steps that no profiler range covers
         (a time.sleep standing in for un-instrumented work: logging, a metrics client, a Python loop), longer
         than the GPU's step, so the GPU runs dry
  fixed  neither: the loss is summed on the device and read once after the run

The model is the same in every variant, so fixed is the twin of item and of sleep.

Example:
  python workloads/host_stall/run.py --variant item --out out/host-stall-item
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import record_function

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from profiled_steps import SKIPPED_STEPS, add_profiler_option, profiled_steps, sync  # noqa: E402

VARIANTS = ("item", "sleep", "fixed")


def bookkeeping(value: float, history: list[float], host_ms: float) -> float:
    """Per-step Python work on a value read from the GPU: a running statistic, computed the slow way."""
    history.append(value)
    deadline = time.perf_counter() + host_ms / 1e3
    acc = 0.0
    while time.perf_counter() < deadline:
        acc += sum(math.log1p(abs(v)) for v in history[-64:])
    return acc


class Trainer:
    """One optimizer step of a 6-layer MLP on random data, with the variant's host behaviour after it."""

    def __init__(self, variant: str, device: torch.device, batch: int, width: int, host_ms: float) -> None:
        self.variant, self.device, self.host_ms = variant, device, host_ms
        layers: list[nn.Module] = []
        for _ in range(6):
            layers += [nn.Linear(width, width), nn.GELU()]
        self.model = nn.Sequential(*layers).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.x = torch.randn(batch, width, device=device)
        self.y = torch.randn(batch, width, device=device)
        self.loss_sum = torch.zeros((), device=device)
        self.history: list[float] = []

    def step(self) -> None:
        with record_function("forward"):
            loss = nn.functional.mse_loss(self.model(self.x), self.y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        if self.variant == "item":
            with record_function("bookkeeping"):
                bookkeeping(loss.item(), self.history, self.host_ms)
        elif self.variant == "sleep":
            time.sleep(self.host_ms / 1e3)  # deliberately outside any record_function range
            self.loss_sum += loss.detach()
        else:
            self.loss_sum += loss.detach()


def main() -> None:
    """Parse arguments, time unprofiled steps, then write one trace."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="item")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz")
    parser.add_argument("--steps", type=int, default=5, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=50, help="unprofiled steps timed")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--host-ms", type=float, default=None,
                        help="host time per step: bookkeeping after the sync (item, default 4) or un-instrumented "
                             "time (sleep, default 25: longer than the GPU's step, or the GPU never waits for it)")
    parser.add_argument("--device", default="cuda", help="'cpu' runs a smoke test")
    add_profiler_option(parser)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    host_ms = args.host_ms if args.host_ms is not None else 25.0 if args.variant == "sleep" else 4.0
    trainer = Trainer(args.variant, device, args.batch, args.width, host_ms)
    print(f"variant={args.variant} device={device} torch={torch.__version__}")
    for _ in range(5):  # warm-up
        trainer.step()
    sync(device)
    started = time.perf_counter()
    for _ in range(args.bench_steps):
        trainer.step()
    sync(device)
    elapsed = time.perf_counter() - started
    print(f"RESULT host_stall {args.variant}: {1e3 * elapsed / args.bench_steps:.2f} ms/step (no profiler)")

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, device.type == "cuda") as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            trainer.step()
            prof.step()
    sync(device)


if __name__ == "__main__":
    main()
