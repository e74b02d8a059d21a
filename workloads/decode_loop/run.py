"""Batch-1 autoregressive decode of a small random-weight transformer, profiled.

Variants:
  eager      plain Python loop: one launch per op, the GPU waits for the host (launch-bound)
  cudagraph  one decode step captured with torch.cuda.CUDAGraph and replayed per token
  compile    torch.compile(mode="reduce-overhead"): fused kernels replayed from a CUDA graph

Every profiler step decodes ``--tokens-per-step`` tokens and then copies them to a pinned host
buffer (what a server does to stream tokens out). The host waits for those tokens one step late,
after it has queued the next step, so the wait never leaves the GPU without work.

Example:
  python workloads/decode_loop/run.py --variant eager --out out/decode-eager
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
import ground_truth  # noqa: E402
from profiled_steps import SKIPPED_STEPS, Stepper, add_profiler_option, profiled_steps, use_profiler  # noqa: E402

VARIANTS = ("eager", "cudagraph", "compile")


@dataclass(frozen=True)
class Config:
    """Model shape; the defaults give about 540M parameters (about 1.1 GB in bf16)."""

    layers: int = 8
    d_model: int = 2048
    heads: int = 16
    vocab: int = 32000
    max_len: int = 512


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm computed in float32, written out op by op as hand-written models do."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return xf.to(x.dtype) * weight


class Block(nn.Module):
    """Pre-norm transformer block that attends over a preallocated KV cache."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.head_dim = cfg.d_model // cfg.heads
        self.attn_norm = nn.Parameter(torch.ones(cfg.d_model))
        self.mlp_norm = nn.Parameter(torch.ones(cfg.d_model))
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.up = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False)
        self.down = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        pos: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """Decode one position: x is [1, d_model]; caches are [heads, max_len, head_dim]."""
        h = rms_norm(x, self.attn_norm)
        q, k, v = self.qkv(h).view(3, self.heads, 1, self.head_dim).unbind(0)
        k_cache.index_copy_(1, pos, k)
        v_cache.index_copy_(1, pos, v)
        scores = (k_cache @ q.transpose(1, 2)).squeeze(-1) * self.head_dim**-0.5
        scores = torch.where(mask, scores.float(), float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(x.dtype)
        attn = (probs.unsqueeze(1) @ v_cache).reshape(1, -1)
        x = x + self.proj(attn)
        return x + self.down(F.gelu(self.up(rms_norm(x, self.mlp_norm))))


class Decoder(nn.Module):
    """Greedy decoder whose whole state (token, position, KV cache, output) lives in buffers.

    ``step()`` reads and writes only these buffers, so it can be captured in a CUDA graph and
    replayed: no host values enter the step and nothing leaves it.
    """

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        head_dim = cfg.d_model // cfg.heads
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos_embed = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.Parameter(torch.ones(cfg.d_model))
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        cache_shape = (cfg.layers, cfg.heads, cfg.max_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(cache_shape))
        self.register_buffer("v_cache", torch.zeros(cache_shape))
        self.register_buffer("positions", torch.arange(cfg.max_len))
        self.register_buffer("token", torch.ones(1, dtype=torch.long))
        self.register_buffer("pos", torch.zeros(1, dtype=torch.long))
        self.register_buffer("generated", torch.zeros(cfg.max_len, dtype=torch.long))

    def reset(self) -> None:
        """Start a new sequence in place (buffer addresses stay the same for graph replay)."""
        self.token.fill_(1)
        self.pos.zero_()

    def step(self) -> None:
        """Decode one token: argmax on the GPU, written to ``token`` and ``generated``."""
        x = self.embed(self.token) + self.pos_embed(self.pos)
        mask = self.positions <= self.pos
        for i, block in enumerate(self.blocks):
            x = block(x, self.k_cache[i], self.v_cache[i], self.pos, mask)
        logits = self.lm_head(rms_norm(x, self.norm))
        nxt = logits.argmax(dim=-1)
        self.generated.index_copy_(0, self.pos, nxt)
        self.token.copy_(nxt)
        self.pos.add_(1)


def capture_graph(model: Decoder) -> Callable[[], None]:
    """Warm up on a side stream, capture one ``model.step()`` and return the replay function."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model.step()
    model.reset()
    return graph.replay


def make_step(model: Decoder, variant: str) -> Callable[[], None]:
    """Return the per-token function for a variant (warmed up, graphs captured)."""
    if variant == "eager":
        return model.step
    if variant == "cudagraph":
        return capture_graph(model)
    for buf in model.buffers():
        torch._dynamo.mark_static_address(buf)
    compiled = torch.compile(model.step, mode="reduce-overhead", fullgraph=True)
    started = time.perf_counter()
    for _ in range(4):  # the first calls compile and record the graph
        compiled()
    sync(model)
    print(f"compile + graph recording: {time.perf_counter() - started:.1f} s")
    model.reset()
    return compiled


def sync(model: Decoder) -> None:
    """Wait for the model's device."""
    if model.pos.is_cuda:
        torch.cuda.synchronize()


class Emitter:
    """Copies newly generated tokens into a pinned host buffer, as a server streaming tokens does."""

    def __init__(self, model: Decoder) -> None:
        self.model = model
        pin = model.pos.is_cuda
        self.host = torch.zeros(model.generated.numel(), dtype=torch.long, pin_memory=pin)
        self.pending: torch.cuda.Event | None = None

    def emit(self, start: int, end: int) -> None:
        """Start copying tokens [start, end) to the host, then wait for the previous step's copy."""
        with record_function("emit_tokens"):
            self.host[start:end].copy_(self.model.generated[start:end], non_blocking=True)
            if self.model.pos.is_cuda:
                done = torch.cuda.Event()
                done.record()
                self.flush()
                self.pending = done

    def flush(self) -> None:
        """Wait until every copy started so far has reached the host."""
        if self.pending is not None:
            self.pending.synchronize()
            self.pending = None


def decode_steps(
    step: Callable[[], None],
    emitter: Emitter,
    n_steps: int,
    tokens_per_step: int,
    prof: Stepper | None = None,
) -> None:
    """Decode n_steps x tokens_per_step tokens from a fresh sequence, emitting after each step."""
    emitter.model.reset()
    for s in range(n_steps):
        for _ in range(tokens_per_step):
            with record_function("decode_step"):
                step()
        emitter.emit(s * tokens_per_step, (s + 1) * tokens_per_step)
        if prof is not None:
            prof.step()
    emitter.flush()


def write_counts(path: Path, model: Decoder, step: Callable[[], None], emitter: Emitter, tokens_per_step: int,
                 steps: int) -> None:
    """The ground truth of one profiler step: FLOPs as FlopCounterMode counts them (of the eager step, the same
    arithmetic: a graph's replay does not pass through its dispatch), the bytes the weights and the KV cache take
    (what each token must read at least), the step time between CUDA events over ``steps`` unprofiled steps
    (median, min, max; and per token), and the GPU's kernel time per step (CUPTI's kernel records alone)."""
    with FlopCounterMode(display=False) as counter:
        decode_steps(model.step, emitter, 1, tokens_per_step)
    sync(model)
    times = []
    emitter.model.reset()
    for s in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(tokens_per_step):
            with record_function("decode_step"):
                step()
        emitter.emit(s * tokens_per_step, (s + 1) * tokens_per_step)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    emitter.flush()
    kernels, launches = ground_truth.kernels(lambda: decode_steps(step, emitter, 1, tokens_per_step), 5)
    embeddings = {id(model.embed.weight), id(model.pos_embed.weight)}
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in embeddings)
    row_bytes = 2 * model.embed.weight.shape[1] * model.embed.weight.element_size()
    cache_bytes = 2 * model.k_cache.numel() * model.k_cache.element_size()
    median = statistics.median(times)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "workload": "decode_loop", "tokens_per_step": tokens_per_step, "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__, "flops_per_step": counter.get_total_flops(),
        "flops_by_op": {str(op): n for op, n in counter.get_flop_counts().get("Global", {}).items()},
        "weights_kv_bytes_per_step": tokens_per_step * (weight_bytes + row_bytes + cache_bytes),
        "step_ms_cuda_events": median, "step_ms_min": min(times), "step_ms_max": max(times),
        "ms_per_token_cuda_events": median / tokens_per_step, "gpu_kernel_ms_per_step": sum(kernels.values()) / 1e3,
        "kernels_per_step": launches, "step_ms_all": times,
    }, indent=1))
    print(f"counts: {counter.get_total_flops() / 1e9:.2f} GFLOP/step, {median:.3f} ms/step (CUDA events, median of "
          f"{len(times)}, min {min(times):.3f}, max {max(times):.3f}), {median / tokens_per_step:.3f} ms/token; GPU "
          f"kernel time {sum(kernels.values()) / 1e3:.3f} ms/step ({launches:.0f} kernels)")


def main() -> None:
    """Parse arguments, benchmark the variant without the profiler, then write one trace."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="eager")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz")
    parser.add_argument("--steps", type=int, default=4, help="profiled (active) steps")
    parser.add_argument("--tokens-per-step", type=int, default=4)
    parser.add_argument("--bench-steps", type=int, default=32, help="unprofiled steps timed for tokens/s")
    parser.add_argument("--layers", type=int, default=Config.layers)
    parser.add_argument("--d-model", type=int, default=Config.d_model)
    parser.add_argument("--device", default="cuda", help="'cpu' runs the eager variant as a smoke test")
    parser.add_argument("--counts", type=Path, help="on CUDA: write FlopCounterMode's FLOPs, weight and KV bytes and "
                                                    "CUDA-event step times (--bench-steps of them) per profiler "
                                                    "step here")
    add_profiler_option(parser)
    args = parser.parse_args()
    use_profiler(args.profiler, args.record_shapes)
    if args.device != "cuda" and args.variant != "eager":
        parser.error("only the eager variant runs without CUDA")

    torch.manual_seed(0)
    cfg = Config(layers=args.layers, d_model=args.d_model)
    needed = max(args.bench_steps, 3 + args.steps) * args.tokens_per_step
    if needed > cfg.max_len:
        parser.error(f"{needed} tokens per sequence exceed max_len {cfg.max_len}")
    model = Decoder(cfg).to(device=args.device, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    print(f"variant={args.variant} params={params / 1e6:.1f}M device={args.device} torch={torch.__version__}")

    with torch.inference_mode():
        step = make_step(model, args.variant)
        emitter = Emitter(model)
        decode_steps(step, emitter, 2, args.tokens_per_step)  # warm-up
        sync(model)
        started = time.perf_counter()
        decode_steps(step, emitter, args.bench_steps, args.tokens_per_step)
        sync(model)
        elapsed = time.perf_counter() - started
        n_tokens = args.bench_steps * args.tokens_per_step
        print(f"first tokens: {emitter.host[:16].tolist()}")
        print(
            f"RESULT decode {args.variant}: {n_tokens / elapsed:.1f} tokens/s "
            f"({1e3 * elapsed / n_tokens:.3f} ms/token, {n_tokens} tokens, no profiler)"
        )

        if args.counts is not None and args.device == "cuda":
            write_counts(args.counts, model, step, emitter, args.tokens_per_step, args.bench_steps)

        with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, args.device == "cuda",
                            gpu_activity=args.torch_activities == "cpu,cuda") as prof:
            decode_steps(step, emitter, SKIPPED_STEPS + args.steps, args.tokens_per_step, prof)


if __name__ == "__main__":
    main()
