"""Process-group set-up shared by the multi-GPU workloads (started with torchrun)."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def init_distributed(device_kind: str) -> tuple[torch.device, int, int]:
    """Join the torchrun job: NCCL on this rank's GPU, or gloo on the CPU for a smoke test.

    Returns the device, this rank and the world size.
    """
    if device_kind == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device, dist.get_rank(), dist.get_world_size()
