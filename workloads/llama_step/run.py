"""A small Llama-style transformer training step (RMSNorm, rotary embeddings, SwiGLU, causal SDPA), two ways.

Variants:
  compile   bf16 weights, the model under ``torch.compile`` (``--compile-mode``, default mode), fused AdamW: the
            step's elementwise work and norms run as Triton kernels that Inductor generated, beside cuBLAS GEMMs and
            flash attention; under ``--compile-mode max-autotune-no-cudagraphs`` Inductor also benchmarks its Triton
            GEMM templates against cuBLAS (``--gemm-backends``) and the winners run as ``triton_tem_*`` kernels
  autocast  the same stack eager with fp32 weights under ``torch.autocast("cuda", torch.bfloat16)``, AdamW (fp32
            state): every forward casts each Linear weight to bf16 (autocast caches a cast within one forward),
            so every step reads the fp32 weights and writes a bf16 copy of them

Besides the trace the script writes ``truth.json`` (ground_truth.py): the step time between CUDA events around
``--bench-steps`` unprofiled steps (median, min, max), FlopCounterMode's FLOPs of one step, the GPU's kernel time per
step by kernel name (CUPTI's kernel records alone) with the share in Triton kernels (and in Triton GEMM templates,
``triton_tem_*``), and for ``autocast`` the bytes of the weights cast each step. ``--d-model``, ``--heads``,
``--ffn``, ``--layers``, ``--seq`` and ``--batch`` size the stack: ``--d-model 4096 --heads 32 --ffn 11008`` makes
products large enough that the autocast step is compute-bound.

Example:
  python workloads/llama_step/run.py --variant compile --record-shapes --out out/compile-step
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import asdict, dataclass
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

VARIANTS = ("compile", "autocast")
COMPILE_MODES = ("default", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Config:
    layers: int = 8
    d_model: int = 1024
    heads: int = 16
    ffn: int = 2816
    seq: int = 1024
    batch: int = 8
    vocab: int = 32000


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotary(seq: int, head_dim: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of rotary position embeddings, [seq, head_dim / 2]."""
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq, device=device).float(), inv)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of x's last dimension ([batch, heads, seq, head_dim]) by the position's angle."""
    x1, x2 = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)


class Block(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.attn_norm = RMSNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.mlp_norm = RMSNorm(cfg.d_model)
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.ffn, bias=False)
        self.down = nn.Linear(cfg.ffn, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                ) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


class Trainer:
    def __init__(self, variant: str, cfg: Config, device: torch.device, compile_mode: str = "default") -> None:
        self.variant, self.cfg = variant, cfg
        weights = torch.float32 if variant == "autocast" else torch.bfloat16
        self.model = Llama(cfg).to(device=device, dtype=weights)
        self.forward = torch.compile(self.model, mode=compile_mode) if variant == "compile" else self.model
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, fused=device.type == "cuda")
        gen = torch.Generator(device=device).manual_seed(1)
        self.tokens = torch.randint(cfg.vocab, (cfg.batch, cfg.seq), device=device, generator=gen)
        self.targets = torch.randint(cfg.vocab, (cfg.batch, cfg.seq), device=device, generator=gen)
        self.cos, self.sin = rotary(cfg.seq, cfg.d_model // cfg.heads, device)
        self.autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if variant == "autocast"
                         else contextlib.nullcontext())

    def step(self) -> None:
        with training_step():
            with phase("forward"), self.autocast:
                loss = self.forward(self.tokens, self.targets, self.cos, self.sin)
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)

    def eager_step(self) -> None:
        """One step with the model uncompiled (the same arithmetic): what FlopCounterMode counts, since compiled
        code does not pass through its dispatch."""
        compiled, self.forward = self.forward, self.model
        try:
            self.step()
        finally:
            self.forward = compiled

    def cast_weight_bytes(self) -> dict[str, int]:
        """What autocast's weight casts move per step: each Linear weight (the ones its matmuls cast) read in fp32
        and written in bf16 once per forward."""
        if self.variant != "autocast":
            return {}
        n = sum(m.weight.numel() for m in self.model.modules() if isinstance(m, nn.Linear))
        return {"cast_weight_elements": n, "cast_read_bytes": 4 * n, "cast_write_bytes": 2 * n,
                "cast_bytes_per_step": 6 * n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="compile")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz and truth.json")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=30, help="unprofiled steps timed with CUDA events")
    parser.add_argument("--layers", type=int, default=Config.layers)
    parser.add_argument("--d-model", type=int, default=Config.d_model)
    parser.add_argument("--heads", type=int, default=Config.heads)
    parser.add_argument("--ffn", type=int, default=Config.ffn, help="the SwiGLU MLP's hidden width")
    parser.add_argument("--compile-mode", choices=COMPILE_MODES, default="default", help="torch.compile's mode")
    parser.add_argument("--gemm-backends", default=None,
                        help="Inductor's max_autotune_gemm_backends under max-autotune (default: Inductor's, "
                             "ATEN,TRITON,CPP; TRITON: only Triton templates)")
    parser.add_argument("--seq", type=int, default=Config.seq)
    parser.add_argument("--batch", type=int, default=Config.batch)
    parser.add_argument("--device", default="cuda", help="'cpu' checks the logic (no truth, no GPU events)")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, args.record_shapes)
    device = torch.device(args.device)
    torch.manual_seed(0)
    if args.gemm_backends:
        import torch._inductor.config as inductor_config

        inductor_config.max_autotune_gemm_backends = args.gemm_backends
    cfg = Config(layers=args.layers, d_model=args.d_model, heads=args.heads, ffn=args.ffn, seq=args.seq,
                 batch=args.batch)
    trainer = Trainer(args.variant, cfg, device, args.compile_mode)
    params = sum(p.numel() for p in trainer.model.parameters())
    print(f"variant={args.variant} params={params / 1e6:.1f}M {cfg} compile_mode={args.compile_mode} "
          f"gemm_backends={args.gemm_backends or 'default'} torch={torch.__version__}")
    started = time.perf_counter()
    for _ in range(5):  # warm-up; under compile the first step compiles forward and backward
        trainer.step()
    sync(device)
    print(f"warm-up (compilation included): {time.perf_counter() - started:.1f} s")
    if device.type == "cuda":
        total, by_op = ground_truth.flops(trainer.eager_step)
        times = ground_truth.event_times(trainer.step, args.bench_steps)
        stats = ground_truth.summary(times)
        kernels, launches = ground_truth.kernels(trainer.step, 5)
        gpu_us = sum(kernels.values())
        triton_us = sum(us for name, us in kernels.items() if name.startswith("triton_"))
        template_us = sum(us for name, us in kernels.items() if name.startswith("triton_tem_"))
        cast = trainer.cast_weight_bytes()
        print(f"RESULT llama_step {args.variant}: {stats['median']:.2f} ms/step (CUDA events, median of "
              f"{len(times)}, no profiler), {total / 1e12:.3f} TFLOP/step (FlopCounterMode), "
              f"{total / stats['median'] / 1e9:.0f} TFLOP/s; GPU kernel time {gpu_us / 1e3:.2f} ms/step, "
              f"{100 * triton_us / gpu_us:.1f} % in Triton kernels, {100 * template_us / gpu_us:.1f} % in Triton GEMM "
              f"templates (triton_tem_)")
        ground_truth.write(args.out / "truth.json", {
            "workload": "llama_step", "variant": args.variant, "config": asdict(cfg), "params": params,
            "compile_mode": args.compile_mode, "gemm_backends": args.gemm_backends or "default",
            "step_ms_unprofiled": stats, "flops_per_step": total, "gpu_kernel_ms_per_step": round(gpu_us / 1e3, 4),
            "kernels_per_step": launches, "triton_kernel_ms_per_step": round(triton_us / 1e3, 4),
            "triton_share_of_kernel_time": round(triton_us / gpu_us, 4),
            "triton_tem_kernel_ms_per_step": round(template_us / 1e3, 4),
            "triton_tem_share_of_kernel_time": round(template_us / gpu_us, 4), **cast, "flops_by_op": by_op,
            "kernel_us_per_step_by_name": kernels, "step_ms_all": times})

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, device.type == "cuda",
                        gpu_activity=args.torch_activities == "cpu,cuda") as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            trainer.step()
            prof.step()


if __name__ == "__main__":
    main()
