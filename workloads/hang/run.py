"""A collective hang on N ranks: the NCCL flight-recorder dumps torch writes when the watchdog times out.

Every rank runs two good ``all_reduce``s on a 3×4 float tensor, then collective #3 goes wrong on --culprit:

  stuck          the culprit sleeps --sleep seconds in Python (a data loader or blocking call that never
                 returns) and never issues #3; the others wait in their all_reduce until the timeout
  type_mismatch  the culprit issues a broadcast where the others issue an all_reduce
  size_mismatch  the culprit all-reduces a 5×4 tensor where the others all-reduce a 3×4 one
  gpu_busy       every rank issues #3, but the culprit's GPU is still busy with earlier work (a kernel that
                 spins for --sleep seconds) when it does: its NCCL kernel never starts while the others' wait
                 inside theirs. Without TORCH_NCCL_ENABLE_TIMING every entry of #3 stays 'scheduled'; with it
                 the others' are 'started' and the culprit's is not

The process-group timeout is --timeout seconds. Run it with the flight recorder on and a dump prefix, so that
the rank that times out dumps and signals every other rank to dump too (see README.md):

  TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_ENABLE_TIMING=1 \\
  TORCH_FR_DUMP_TEMP_FILE=out/hang/trace_rank_ \\
  timeout 120 torchrun --nproc_per_node=4 workloads/hang/run.py --scenario stuck --culprit 2

The job then aborts (that is the point): torchrun reports the failed ranks.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist

SCENARIOS = ("stuck", "type_mismatch", "size_mismatch", "gpu_busy")


def collective_three(scenario: str, culprit: bool, a: torch.Tensor, sleep_s: float) -> None:
    """Issue collective #3 as the scenario has it: the culprit differs from every other rank."""
    if scenario == "stuck":
        if culprit:
            time.sleep(sleep_s)  # stuck in host code: #3 is never issued while the others wait in it
        dist.all_reduce(a)
    elif scenario == "gpu_busy":
        if culprit:  # queued on the stream NCCL waits on: #3's kernel starts only after it
            torch.cuda._sleep(int(sleep_s * 2e9))  # cycles: at most 2 GHz on the GPUs this runs on
        dist.all_reduce(a)
    elif scenario == "type_mismatch":
        if culprit:
            dist.broadcast(a, src=0)
        else:
            dist.all_reduce(a)
    else:
        t = torch.ones((5, 4) if culprit else (3, 4), device=a.device)
        dist.all_reduce(t)
    torch.cuda.synchronize()


def main() -> None:
    """Two good all_reduces, then the scenario's bad collective #3; the watchdog's timeout ends the job."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--scenario", choices=SCENARIOS, default="stuck")
    parser.add_argument("--culprit", type=int, default=1, help="the rank that goes wrong at collective #3")
    parser.add_argument("--timeout", type=float, default=10.0, help="process-group timeout (s)")
    parser.add_argument("--sleep", type=float, default=90.0, help="how long the culprit sleeps (stuck)")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank % torch.cuda.device_count())  # ranks share GPUs when there are fewer
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=args.timeout), device_id=device)
    rank, world = dist.get_rank(), dist.get_world_size()
    culprit = args.culprit % world
    a = torch.full((3, 4), float(rank + 1), device=device)
    for _ in range(2):
        dist.all_reduce(a)
    torch.cuda.synchronize()
    print(f"rank {rank}/{world}: 2 all_reduces done; scenario {args.scenario}, culprit rank {culprit}", flush=True)
    collective_three(args.scenario, rank == culprit, a, args.sleep)
    time.sleep(args.sleep)  # a mismatched collective may complete on some ranks: keep them in the job
    print(f"rank {rank}: finished (unexpected for a hang)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
