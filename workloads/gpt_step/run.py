"""A GPT-style training step on one GPU, profiled with its operators' shapes, with the ground truth beside it.

Variants:
  base        8 pre-norm blocks, d_model 2048, 16 heads, sequence 2048, batch 8, vocabulary 32000, bf16 weights,
              causal flash attention through scaled_dot_product_attention, fused AdamW
  checkpoint  the same model with every block under activation checkpointing (torch.utils.checkpoint): the
              forward of each block runs again in backward, so the hardware does more FLOPs than the model needs
  gpt2        a small model with GPT-2's vocabulary of 50257 (no multiple of 64): d_model 768, 4 blocks,
              sequence 1024, batch 8; its GEMMs are small and the output projection badly shaped
  gemm        four 8192x8192 linear layers on 16384 tokens, forward, backward and fused AdamW: a step that is all
              large GEMMs, near the chip's matrix roofline

Besides the trace (record_shapes=True), the script writes ``counts.json``: the FLOPs of one step as
torch.utils.flop_counter.FlopCounterMode counts them (total and per aten op), and the step time measured with
CUDA events around unprofiled steps (median), which give the ground-truth MFU: FLOPs / time / peak.

Example:
  python workloads/gpt_step/run.py --variant base --out out/gpt-step
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from profiled_steps import (  # noqa: E402
    SKIPPED_STEPS,
    add_profiler_option,
    phase,
    profiled_steps,
    sync,
    training_step,
    use_profiler,
)

VARIANTS = ("base", "checkpoint", "gpt2", "gemm")


@dataclass(frozen=True)
class Config:
    layers: int = 8
    d_model: int = 2048
    heads: int = 16
    seq: int = 2048
    batch: int = 8
    vocab: int = 32000


CONFIGS = {
    "base": Config(),
    "checkpoint": Config(),
    "gpt2": Config(layers=4, d_model=768, heads=12, seq=1024, batch=8, vocab=50257),
    "gemm": Config(layers=4, d_model=8192, heads=1, seq=2048, batch=8, vocab=0),
}


class Block(nn.Module):
    """Pre-norm block: causal self-attention (SDPA, flash) and a GELU MLP of 4 x d_model."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc1 = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.fc2 = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: Config, recompute: bool) -> None:
        super().__init__()
        self.recompute = recompute
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.recompute else block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class Gemms(nn.Module):
    """Large square linear layers and nothing else."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(cfg.d_model, cfg.d_model, bias=False) for _ in range(cfg.layers))

    def forward(self, x: torch.Tensor, _targets: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x.float().square().mean()


class Trainer:
    def __init__(self, variant: str, device: torch.device) -> None:
        cfg = self.cfg = CONFIGS[variant]
        model = Gemms(cfg) if variant == "gemm" else GPT(cfg, recompute=variant == "checkpoint")
        self.model = model.to(device=device, dtype=torch.bfloat16)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=device.type == "cuda")
        gen = torch.Generator(device=device).manual_seed(1)
        if variant == "gemm":
            self.inputs = torch.randn(cfg.batch, cfg.seq, cfg.d_model, device=device, generator=gen,
                                      dtype=torch.bfloat16)
            self.targets = self.inputs
        else:
            self.inputs = torch.randint(cfg.vocab, (cfg.batch, cfg.seq), device=device, generator=gen)
            self.targets = torch.randint(cfg.vocab, (cfg.batch, cfg.seq), device=device, generator=gen)

    def step(self) -> None:
        with training_step():
            with phase("forward"):
                loss = self.model(self.inputs, self.targets)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)


def event_times(trainer: Trainer, steps: int) -> list[float]:
    """Each step's time in ms between CUDA events recorded before and after it (no profiler)."""
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        trainer.step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="base")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz and counts.json")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=10, help="unprofiled steps timed with CUDA events")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, record_shapes=True)
    device = torch.device("cuda")
    torch.manual_seed(0)
    trainer = Trainer(args.variant, device)
    params = sum(p.numel() for p in trainer.model.parameters())
    print(f"variant={args.variant} params={params / 1e6:.1f}M {trainer.cfg} torch={torch.__version__}")

    for _ in range(3):
        trainer.step()
    sync(device)
    with FlopCounterMode(display=False) as counter:
        trainer.step()
    sync(device)
    flops = counter.get_total_flops()
    by_op = {str(op): n for op, n in counter.get_flop_counts().get("Global", {}).items()}
    times = event_times(trainer, args.bench_steps)
    step_ms = statistics.median(times)
    print(f"RESULT gpt_step {args.variant}: {step_ms:.2f} ms/step (CUDA events, median of {len(times)}), "
          f"{flops / 1e12:.2f} TFLOP/step (FlopCounterMode), {flops / step_ms / 1e9:.0f} TFLOP/s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "counts.json").write_text(json.dumps({
        "workload": "gpt_step", "variant": args.variant, "config": asdict(trainer.cfg), "params": params,
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "flops_per_step": flops, "flops_by_op": by_op,
        "step_ms_cuda_events": step_ms, "step_ms_all": times,
    }, indent=1))

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, True) as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            trainer.step()
            prof.step()


if __name__ == "__main__":
    main()
