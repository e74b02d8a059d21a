"""A compiled MLP-block training step, timed without a profiler (CUDA events), then recorded with Triton's
Proton profiler in trace mode (Chrome-trace JSON): the program behind ``samples/proton-compiled-mlp``.

Four blocks of LayerNorm + Linear(2048, 8192) + GELU + Linear(8192, 2048) with a residual, bf16, on a batch of
8192 rows, under ``torch.compile``, with fused AdamW. Five warm-up steps (compilation), 30 unprofiled steps each
timed between CUDA events, FlopCounterMode's FLOPs of one step of the uncompiled model, then five steps under
``proton.start(name, data="trace")``, each in ``proton.scope(f"step_{i}")``, and ``proton.finalize()``. Writes
``OUT/truth.json`` and ``OUT/compiled-mlp.chrome_trace``.

Example (one GPU, Triton 3.6 or later):
  python workloads/proton_step/run.py out/proton
"""
import inspect
import json
import os
import sys

import torch
import triton
import triton.profiler as proton

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)
print("proton.start", inspect.signature(proton.start))
torch.manual_seed(0)
d, h, b = 2048, 8192, 8192


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, h)
        self.down = torch.nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


model = torch.nn.Sequential(*[Block() for _ in range(4)]).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(b, d, device="cuda", dtype=torch.bfloat16)
cmodel = torch.compile(model)


def step():
    opt.zero_grad(set_to_none=True)
    loss = cmodel(x).float().pow(2).mean()
    loss.backward()
    opt.step()


for _ in range(5):
    step()
torch.cuda.synchronize()
times = []
for _ in range(30):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    step()
    e.record()
    torch.cuda.synchronize()
    times.append(s.elapsed_time(e))
times.sort()
truth = {"step_ms_median": times[len(times) // 2], "step_ms_min": times[0], "step_ms_max": times[-1], "steps": 30,
         "flops_per_step": None}
try:
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        opt.zero_grad(set_to_none=True)
        model(x).float().pow(2).mean().backward()
    truth["flops_per_step"] = fc.get_total_flops()
except Exception as exc:  # noqa
    print("flops", exc)
print("truth", truth)
with open(f"{out}/truth.json", "w") as f:
    json.dump(truth, f, indent=1)
name = f"{out}/compiled-mlp"
for kw in ({"data": "trace"}, {"data": "trace", "context": "shadow"}):
    try:
        proton.start(name, **kw)
        print("started with", kw)
        break
    except Exception as exc:
        print("start failed", kw, exc)
for i in range(5):
    with proton.scope(f"step_{i}"):
        step()
torch.cuda.synchronize()
proton.finalize()
print(sorted(os.listdir(out)))
for f in os.listdir(out):
    p = f"{out}/{f}"
    print(f, os.path.getsize(p))
    if "trace" in f:
        with open(p) as trace:
            print(trace.read(1500))
