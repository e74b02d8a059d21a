"""A 2-rank Gloo hang on CPU, dumped by the flight recorder while it hangs (the scenario of workloads/hang/run.py).

Both ranks run two good all_reduces on a 3x4 float tensor; then rank 1 sleeps in Python before collective #3
while rank 0 issues #3 and waits in it. Gloo writes no dump on its own when a collective times out, and once a
Gloo collective fails its record is retired like a completed one; so, as torch does for NCCL when a watchdog
fires, a monitor thread on rank 0 signals every rank through the store and each rank writes its own dump while
rank 0 still waits (before the group's timeout). Without TORCH_NCCL_ENABLE_TIMING, and Gloo records no GPU
events anyway: every record stays 'scheduled' and the only times are enqueue times.

  torchrun --standalone --nproc_per_node=2 gloo_hang.py OUT_DIR      (writes OUT_DIR/trace_rank_0, trace_rank_1)
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace

TIMEOUT_S = 60.0  # the group's timeout: longer than the hang lasts before the dump
DUMP_AFTER_S = 8.0  # rank 0 signals the dump this long after it issued #3
SLEEP_S = 30.0  # rank 1's stall in host code


def main() -> None:
    out = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    a = torch.full((3, 4), float(rank + 1))
    for _ in range(2):
        dist.all_reduce(a)
    print(f"rank {rank}: 2 all_reduces done", flush=True)

    def dump_on_signal() -> None:
        if rank == 0:
            time.sleep(DUMP_AFTER_S)
            store.set("fr_dump", "1")
        store.get("fr_dump")  # blocks until the key is set
        with open(os.path.join(out, f"trace_rank_{rank}"), "wb") as f:
            f.write(_dump_fr_trace())
        store.add("fr_dumped", 1)
        while store.add("fr_dumped", 0) < 2:
            time.sleep(0.1)
        print(f"rank {rank}: dumped", flush=True)
        os._exit(0)

    threading.Thread(target=dump_on_signal, daemon=True).start()
    if rank == 1:
        time.sleep(SLEEP_S)  # stuck in host code: #3 is never issued while rank 0 waits in it
    dist.all_reduce(a)  # collective #3
    time.sleep(SLEEP_S)


if __name__ == "__main__":
    main()
