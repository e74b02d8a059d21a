"""What PyTorch's profiler writes besides its Chrome trace, from one small profiled loop on a GPU: the table of
key_averages() and the memory timeline (export_memory_timeline) as JSON, gzipped JSON and a page.

    python make_outputs.py OUT_DIR
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 512, device="cuda")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, profile_memory=True,
             with_stack=True) as prof:  # export_memory_timeline needs the shapes, memory and stacks
    for _ in range(3):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    torch.cuda.synchronize()
with open(f"{out}/key_averages.txt", "w") as f:
    f.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20))
for ext in ("json", "html", "json.gz"):
    try:
        prof.export_memory_timeline(f"{out}/memory_timeline.{ext}", device="cuda:0")
    except Exception as exc:
        print(ext, "failed:", exc)
print("done")
