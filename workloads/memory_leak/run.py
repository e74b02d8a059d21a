"""A small MLP training loop whose GPU memory leaks, runs out, fragments, or stays flat, profiled with the memory
recorded both ways: the PyTorch profiler's ``[memory]`` events (``profile_memory=True, with_stack=True``) and the
caching allocator's history (``torch.cuda.memory._record_memory_history`` + ``_dump_snapshot``).

Variants:
  leak      keeps every step's output (``history.append(out.detach())``, for metrics "later"): exactly
            ``--batch`` × ``--hidden`` × 4 bytes more held after each step (2048 × 4096 × 4 = 32 MiB by default)
  fixed     the same loop keeping only a Python float of each step's loss (``loss.item()`` after the step)
  oom       the leak under a per-process memory cap (``torch.cuda.set_per_process_memory_fraction``) set to the
            memory the loop holds after warm-up plus ``--oom-after`` leaked outputs and a bit: the allocator runs
            out in the recorded steps; the OutOfMemoryError is caught and the snapshot dumped
  fragment  the fixed loop after ``--frag-count`` 4 MiB buffers were allocated and every other one freed: the
            caching allocator packs five such buffers into each 20 MiB segment, so the segments keep 4 MiB holes
            between live buffers that no larger request can use (``--frag-count`` / 2 × 4 MiB free inside
            segments, largest free block 4 MiB), while reserved memory stays flat
Writes into ``--out``: ``trace.json.gz`` (the profiled steps) and ``snapshot.pickle.gz`` (the allocator snapshot,
``_dump_snapshot``), and prints ``RESULT`` lines with the truth the variant was built with.

``--profiler nvtx`` records neither: for a run under Nsight Systems (``nsys profile -t cuda,nvtx
--cuda-memory-usage=true``), every step is the NVTX range ``train_step`` and its phases NVTX ranges, and the memory
seen is what the caching allocator takes from CUDA (its reserved memory), not its tensors.

Example:
  python workloads/memory_leak/run.py --variant leak --out out/memory-leak
  nsys profile -t cuda,nvtx --cuda-memory-usage=true -o leak python workloads/memory_leak/run.py --variant leak \
      --profiler nvtx --steps 20 --out out/memory-leak-nsys
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import pickle
import shutil
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

VARIANTS = ("leak", "fixed", "oom", "fragment")
MiB = 1 << 20


def make_model(hidden: int, layers: int) -> nn.Module:
    blocks: list[nn.Module] = []
    for _ in range(layers):
        blocks += [nn.Linear(hidden, hidden), nn.ReLU()]
    return nn.Sequential(*blocks)


def forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x)  # the output: batch × hidden floats


_nvtx = False  # --profiler nvtx: phases and steps are NVTX ranges


def phase(name: str) -> contextlib.AbstractContextManager:
    """A named phase of a step: an NVTX range under --profiler nvtx, else the torch profiler's annotation."""
    return torch.cuda.nvtx.range(name) if _nvtx else record_function(name)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, target: torch.Tensor,
               history: list, variant: str) -> None:
    with phase("forward"):
        out = forward(model, x)
        loss = nn.functional.mse_loss(out, target)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    if variant in ("leak", "oom"):
        history.append(out.detach())  # the leak: every step's output stays referenced
    else:
        history.append(loss.item())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="leak")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=10, help="profiled steps (after 3 unrecorded ones)")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--oom-after", type=int, default=5, help="oom: leaked outputs that fit under the cap")
    parser.add_argument("--frag-count", type=int, default=100, help="fragment: 4 MiB buffers, every other freed")
    parser.add_argument("--history", choices=("python", "default"), default="python",
                        help="python: _record_memory_history(max_entries=200000, stacks='python'); default: "
                             "_record_memory_history() with no arguments, as most users call it (every stack "
                             "with its C++ frames)")
    parser.add_argument("--snapshot-only", action="store_true",
                        help="keep the allocator snapshot alone (the profiler still marks the steps, whose "
                             "ProfilerStep#N ranges the snapshot's history holds; its trace is not written)")
    parser.add_argument("--profiler", choices=("torch", "nvtx"), default="torch",
                        help="torch: the profiler's trace and the allocator snapshot; nvtx: NVTX ranges only, for "
                             "a run under nsys profile --cuda-memory-usage=true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    if args.profiler == "nvtx":
        if args.variant == "oom":
            sys.exit("--profiler nvtx: the oom variant's cap stops the allocator before CUDA sees a request")
        global _nvtx
        _nvtx = True
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = make_model(args.hidden, args.layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.hidden, device=device)
    target = torch.randn(args.batch, args.hidden, device=device)
    history: list = []
    kept: list = []
    leak_bytes = args.batch * args.hidden * 4 if args.variant in ("leak", "oom") else 0
    print(f"RESULT memory {args.variant}: leak per step {leak_bytes} bytes ({leak_bytes / MiB:.1f} MiB)")
    args.out.mkdir(parents=True, exist_ok=True)
    if not _nvtx:
        if args.history == "default":
            torch.cuda.memory._record_memory_history()
        else:
            torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
    if args.variant == "fragment":
        buffers = [torch.empty(MiB, device=device) for _ in range(args.frag_count)]  # 4 MiB each (float32)
        kept = buffers[1::2]
        del buffers
        print(f"RESULT memory fragment: {args.frag_count - len(kept)} holes of {4 * MiB} bytes between "
              f"{len(kept)} live buffers")
    warm = 2
    for _ in range(warm):  # warm-up, unrecorded: Adam's state and the cuBLAS workspace exist before the trace
        train_step(model, opt, x, target, history, args.variant)
    torch.cuda.synchronize()
    if args.variant == "oom":
        total = torch.cuda.get_device_properties(device).total_memory
        # +1: the profiler's warm-up step leaks one more output
        cap = torch.cuda.memory_reserved() + (args.oom_after + 1) * leak_bytes + leak_bytes // 2
        torch.cuda.set_per_process_memory_fraction(cap / total, torch.cuda.current_device())
        free, _ = torch.cuda.mem_get_info()
        print(f"RESULT memory oom: cap {cap} bytes ({cap / MiB:.1f} MiB) of {total} bytes, fraction "
              f"{cap / total!r}; the device had {free} bytes free")
    if _nvtx:
        run_nvtx(model, opt, x, target, history, args, warm)
        return
    trace = args.out / "trace.json"
    failed = None
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=args.steps, repeat=1),
                 profile_memory=True, with_stack=True, record_shapes=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        for step in range(warm, warm + 1 + args.steps):  # one warm-up step of the profiler first
            try:
                train_step(model, opt, x, target, history, args.variant)
            except torch.cuda.OutOfMemoryError as exc:
                failed = exc
                print(f"RESULT memory oom: out of memory at step {step}: {str(exc).splitlines()[0]}")
                break
            finally:
                prof.step()
    torch.cuda.synchronize()
    snapshot = args.out / "snapshot.pickle"
    print(f"RESULT memory {args.variant}: snapshot dumped at epoch {time.time_ns()} ns")
    torch.cuda.memory._dump_snapshot(str(snapshot))
    torch.cuda.memory._record_memory_history(enabled=None)
    print_step_markers(snapshot)
    if args.snapshot_only:
        trace.unlink(missing_ok=True)
    for path in (snapshot,) if args.snapshot_only else (trace, snapshot):
        with path.open("rb") as src, gzip.open(f"{path}.gz", "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
        print(f"wrote {path}.gz ({Path(f'{path}.gz').stat().st_size / 1e3:.0f} kB)")
    print(f"RESULT memory {args.variant}: allocated {torch.cuda.memory_allocated()} reserved "
          f"{torch.cuda.memory_reserved()} max_allocated {torch.cuda.max_memory_allocated()} "
          f"steps kept {len(history)} failed {failed is not None}")


def print_step_markers(snapshot: Path) -> None:
    """Say how many ProfilerStep#N ranges the snapshot's history holds (``external_annotations``, where torch
    keeps the record_function ranges it saw while recording history), and what its stacks look like."""
    with snapshot.open("rb") as f:
        doc = pickle.load(f)
    marks = [a for a in doc.get("external_annotations") or [] if str(a.get("name", "")).startswith("ProfilerStep#")]
    starts = sorted({a["name"] for a in marks if a.get("stage") == "START"}, key=lambda n: int(n.split("#")[1]))
    events = [e for trace in doc.get("device_traces") or [] for e in trace]
    frames = [len(e.get("frames") or []) for e in events if e.get("action") == "alloc"]
    print(f"RESULT memory snapshot: {len(marks)} ProfilerStep annotations ({', '.join(starts)}), "
          f"{len(events)} history events, {max(frames, default=0)} frames at most per allocation")


def run_nvtx(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, target: torch.Tensor, history: list,
             args: argparse.Namespace, warm: int) -> None:
    """The steps under --profiler nvtx: each one the NVTX range train_step; what CUDA holds after each printed."""
    for _ in range(args.steps):
        with torch.cuda.nvtx.range("train_step"):
            train_step(model, opt, x, target, history, args.variant)
            torch.cuda.synchronize()
        print(f"RESULT memory {args.variant}: step {len(history)} reserved {torch.cuda.memory_reserved()} "
              f"allocated {torch.cuda.memory_allocated()}")
    print(f"RESULT memory {args.variant}: allocated {torch.cuda.memory_allocated()} reserved "
          f"{torch.cuda.memory_reserved()} max_reserved {torch.cuda.max_memory_reserved()} steps {args.steps} "
          f"after {warm} warm-up steps")


if __name__ == "__main__":
    main()
