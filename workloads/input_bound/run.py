"""A small convnet training step fed by a host-side DataLoader, profiled.

Variants:
  slow  num_workers=0 (augmentation runs inline in the training loop), batches not pinned and
        copied with a blocking .to(device) from pageable memory, loss.item() after every step
  fast  worker processes with prefetch, pinned batches copied with non_blocking=True, the loss
        summed on the device and read once after the run

Example:
  python workloads/input_bound/run.py --variant slow --out out/input-slow
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # workloads/: the shared profiled_steps
from profiled_steps import SKIPPED_STEPS, add_profiler_option, profiled_steps, sync  # noqa: E402
from torch.utils.data import DataLoader, Dataset

VARIANTS = ("slow", "fast")
IMAGE = 64
CROP = 56
CLASSES = 100
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class AugmentedImages(Dataset):
    """Synthetic uint8 images with a CPU augmentation pipeline that stands in for JPEG decoding.

    Each item: random crop, horizontal flip, colour jitter, a 3x3 box blur, normalisation,
    HWC -> CHW. The work is real numpy arithmetic, about 0.1-0.2 ms per image on one core.
    """

    def __init__(self, length: int, n_images: int = 1024) -> None:
        rng = np.random.default_rng(0)
        self.length = length
        self.images = rng.integers(0, 256, (n_images, IMAGE, IMAGE, 3), dtype=np.uint8)
        self.labels = rng.integers(0, CLASSES, n_images)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng(index)
        src = index % len(self.images)
        y0, x0 = rng.integers(0, IMAGE - CROP - 1, 2)
        img = self.images[src, y0 : y0 + CROP + 2, x0 : x0 + CROP + 2].astype(np.float32) / 255
        if rng.random() < 0.5:
            img = img[:, ::-1]
        img = img * rng.uniform(0.8, 1.2, 3).astype(np.float32) + rng.uniform(-0.1, 0.1, 3).astype(np.float32)
        rows = img[:-2] + img[1:-1] + img[2:]
        img = (rows[:, :-2] + rows[:, 1:-1] + rows[:, 2:]) / 9
        img = (img - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), int(self.labels[src])


def conv_bn(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """3x3 convolution, batch norm, ReLU."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


def make_model() -> nn.Module:
    """A small VGG-style classifier for 56x56 inputs (about 3.2 GFLOP per image forward)."""
    return nn.Sequential(
        conv_bn(3, 64),
        conv_bn(64, 128),
        conv_bn(128, 256, stride=2),
        conv_bn(256, 256),
        conv_bn(256, 512, stride=2),
        conv_bn(512, 512),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(512, CLASSES),
    )


def make_loader(variant: str, batch: int, workers: int, length: int, pin: bool) -> DataLoader:
    """The variant's DataLoader: inline and unpinned (slow) or worker processes, pinned (fast)."""
    dataset = AugmentedImages(length)
    if variant == "slow":
        return DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True)
    return DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        prefetch_factor=4,
        persistent_workers=True,
        pin_memory=pin,
    )


def forever(loader: DataLoader) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield batches epoch after epoch."""
    while True:
        yield from loader


class Trainer:
    """One training step per call; the variant decides how batches arrive and how loss is logged."""

    def __init__(
        self, variant: str, device: torch.device, batches: Iterator[tuple[torch.Tensor, torch.Tensor]]
    ) -> None:
        self.variant = variant
        self.device = device
        self.batches = batches
        self.model = make_model().to(device).to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9, foreach=True)
        self.loss_sum = torch.zeros((), device=device)
        self.last_loss = float("nan")

    def step(self) -> None:
        """Fetch a batch, copy it to the device, forward, backward, optimizer step, log."""
        non_blocking = self.variant == "fast"
        with record_function("data"):
            x, y = next(self.batches)
        with record_function("h2d"):
            x = x.to(self.device, non_blocking=non_blocking).contiguous(memory_format=torch.channels_last)
            y = y.to(self.device, non_blocking=non_blocking)
        with record_function("forward"):
            loss = F.cross_entropy(self.model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        with record_function("log"):
            if self.variant == "slow":
                self.last_loss = loss.item()
            else:
                self.loss_sum += loss.detach()



def main() -> None:
    """Parse arguments, time unprofiled steps, then write one trace."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="slow")
    parser.add_argument("--out", type=Path, required=True, help="folder for trace.json.gz")
    parser.add_argument("--steps", type=int, default=3, help="profiled (active) steps")
    parser.add_argument("--bench-steps", type=int, default=20, help="unprofiled steps timed for images/s")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--workers", type=int, default=8, help="DataLoader workers of the fast variant")
    parser.add_argument("--device", default="cuda", help="'cpu' runs a smoke test")
    add_profiler_option(parser)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    n_steps = 3 + args.bench_steps + 3 + args.steps
    loader = make_loader(args.variant, args.batch, args.workers, n_steps * args.batch, device.type == "cuda")
    trainer = Trainer(args.variant, device, forever(loader))
    print(f"variant={args.variant} device={device} torch={torch.__version__} workers={loader.num_workers}")

    for _ in range(3):  # warm-up: workers start, cuDNN picks algorithms
        trainer.step()
    sync(device)
    started = time.perf_counter()
    for _ in range(args.bench_steps):
        trainer.step()
    sync(device)
    elapsed = time.perf_counter() - started
    images = args.bench_steps * args.batch
    print(
        f"RESULT input {args.variant}: {images / elapsed:.0f} images/s "
        f"({1e3 * elapsed / args.bench_steps:.1f} ms/step, batch {args.batch}, no profiler)"
    )

    with profiled_steps(args.profiler, args.out / "trace.json.gz", args.steps, device.type == "cuda") as prof:
        for _ in range(SKIPPED_STEPS + args.steps):
            trainer.step()
            prof.step()
    loss = trainer.last_loss if args.variant == "slow" else trainer.loss_sum.item() / n_steps
    print(f"loss: {loss:.4f}")


if __name__ == "__main__":
    main()
