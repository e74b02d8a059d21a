"""Record a GPU health sample on a GPU machine: an NVML snapshot while idle, telemetry over a few seconds in which
a bf16 matrix-product load runs on every GPU, and a second snapshot under that load.

    cd /tmp && python3 /path/to/tracedoc/samples/health-2xh200/record.py OUT_DIR   # tracedoc installed

Writes OUT_DIR/nvml-idle.replay.json, OUT_DIR/nvml-load.replay.json, OUT_DIR/run.telemetry.parquet and what
nvidia-smi reported under the load (OUT_DIR/smi-load.txt).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

WATCH_S = 8.0      # telemetry recording
IDLE_S = 1.5       # idle time recorded before the load starts
LOAD_S = 5.0       # matrix products on every GPU
SNAPSHOT_AT_S = 3.0  # second snapshot, this long after the load started


def load_gpu(device: int, seconds: float) -> None:
    """Back-to-back 8192³ bf16 matrix products on one GPU."""
    torch.cuda.set_device(device)
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn_like(a)
    end = time.monotonic() + seconds
    products = 0
    while time.monotonic() < end:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize(device)
        products += 10
    print(f"GPU {device}: {products} products of 8192³ in {seconds:.0f} s "
          f"({products * 2 * 8192**3 / seconds / 1e12:.0f} TFLOP/s)", flush=True)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    health = [sys.executable, "-m", "tracedoc", "health"]
    subprocess.run([*health, "--record", str(out / "nvml-idle.replay.json")], check=False)
    devices = range(torch.cuda.device_count())
    for d in devices:  # create the CUDA contexts before the telemetry starts, so the load starts at once
        torch.zeros(1, device=d)
    watch = subprocess.Popen([*health, "--watch", "--interval", "0.1", "--duration", str(WATCH_S),
                              "--out", str(out / "run.telemetry.parquet")])
    time.sleep(IDLE_S)
    workers = [threading.Thread(target=load_gpu, args=(d, LOAD_S)) for d in devices]
    for w in workers:
        w.start()
    time.sleep(SNAPSHOT_AT_S)
    subprocess.run([*health, "--record", str(out / "nvml-load.replay.json")], check=False)
    with (out / "smi-load.txt").open("w") as f:  # what nvidia-smi says under the same load, to compare
        subprocess.run(["nvidia-smi", "-q"], stdout=f, check=False)
    for w in workers:
        w.join()
    watch.wait()


if __name__ == "__main__":
    main()
