"""Run the bundled GPU workloads under a profiler, with GPU telemetry sampled beside them.

The workloads are standalone PyTorch scripts in the top-level ``workloads/`` folder of a source checkout (each
``workloads/<name>/run.py``); they need torch, and the GEMM ladder cupy: the optional extra
``tracedoc[workloads]``. tracedoc never imports them. It finds the folder beside its own package (an editable
install or a checkout) or at ``$TRACEDOC_WORKLOADS``, builds the command line for the chosen profiler
(Nsight Systems or Compute around the script, torchrun for the multi-GPU ones) and samples GPU telemetry into
``<out>/run.telemetry.parquet`` in a background thread while the command runs, when NVML is there.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracedoc.errors import TracedocError
from tracedoc.health.nvml import Backend, NoGpuError, start
from tracedoc.health.watch import watch

ENV_DIR = "TRACEDOC_WORKLOADS"
PROFILERS = ("torch", "nsys", "ncu", "none")
TELEMETRY_FILE = "run.telemetry.parquet"
NSYS_TRACE = "cuda,nvtx,osrt"


class WorkloadError(TracedocError):
    """A workload cannot be run here: unknown name or variant, a missing dependency, profiler or folder."""


@dataclass(frozen=True)
class Workload:
    """One bundled workload: its variants (the first is the default) and how it is launched."""

    name: str
    plants: str
    variants: tuple[str, ...]
    gpus: int = 1
    needs: tuple[str, ...] = ("torch",)
    ncu_launches: int | None = 50  # kernels ncu profiles in the recorded steps (None: all of them)
    # The script also times itself (--phase time | record | all): under nsys or ncu it is run twice, first without
    # the profiler for the timings (a profiler's launch overhead would starve short kernels), then under it for
    # the recorded steps alone.
    times_itself: bool = False

    def default_out(self, variant: str) -> Path:
        """Where a run writes when no --out is given: out/<name>-<variant>."""
        return Path("out") / f"{self.name}-{variant}".replace("_", "-")


WORKLOADS = {w.name: w for w in (
    Workload("decode_loop", "batch-1 decode launched op by op from Python (launch-bound)",
             ("eager", "cudagraph", "compile")),
    Workload("input_bound", "training starved by its DataLoader, pageable copies, per-step .item()", ("slow", "fast")),
    Workload("host_stall", "a step whose host stalls the GPU: .item() and bookkeeping, or un-instrumented time",
             ("item", "sleep", "fixed")),
    Workload("gpt_step", "a GPT-style training step with its operators' shapes and FlopCounterMode's FLOPs: the "
             "ground truth of MFU (low-mfu on GPT-2's 50257 vocabulary; HFU under checkpointing)",
             ("base", "checkpoint", "gpt2", "gemm")),
    Workload("conv_step", "a ResNet-50 bf16 training step whose trace (record_shapes=True) is longer than the job's "
             "step: the profiler's own cost, against the unprofiled truth", ("bf16",), needs=("torch", "torchvision")),
    Workload("launch_loop", "a deep, narrow MLP step of 1,000+ kernels of a few µs each (launch-bound)", ("eager",)),
    Workload("llama_step", "a Llama-style training step under torch.compile (Triton kernels), or eager under "
             "autocast with fp32 weights cast to bf16 every step", ("compile", "autocast")),
    Workload("gemm_ladder", "naive, tiled, WMMA and cuBLAS matrix products: each rung's bottleneck under ncu",
             ("all", "naive", "tiled", "wmma", "cublas"), needs=("torch", "cupy"), ncu_launches=None,
             times_itself=True),
    Workload("transpose", "a matrix transpose whose stores are uncoalesced, and the same kernel tiled in shared memory",
             ("naive", "tiled"), needs=("torch", "cupy"), ncu_launches=None),
    Workload("ddp_step", "DDP gradients all-reduced after backward (low-comm-overlap); a straggling rank (extra "
             "work, or a larger batch)", ("overlap", "no_overlap", "straggler", "larger_batch"), gpus=2),
    Workload("fsdp_step", "FSDP2 transformer step whose collectives cannot run ahead (low-comm-overlap)",
             ("prefetch", "no_prefetch"), gpus=2),
    Workload("moe_alltoall", "expert-parallel MoE whose router favours one rank's expert (expert-imbalance)",
             ("balanced", "hot_expert"), gpus=2),
)}


def get(name: str) -> Workload:
    """The workload called ``name``; WorkloadError naming the known ones otherwise."""
    if name not in WORKLOADS:
        raise WorkloadError(f"no workload {name!r}; known: {', '.join(WORKLOADS)} (tracedoc workload list)")
    return WORKLOADS[name]


def workloads_dir() -> Path:
    """The workloads/ folder: $TRACEDOC_WORKLOADS, else beside the tracedoc package (a source checkout)."""
    configured = os.environ.get(ENV_DIR)
    folder = Path(configured) if configured else Path(__file__).resolve().parent.parent / "workloads"
    if not folder.is_dir():
        where = f"${ENV_DIR} points to {folder}" if configured else f"not found beside the tracedoc package ({folder})"
        raise WorkloadError(f"the workloads folder is missing: {where}; the workloads ship with tracedoc's source: "
                            f"install from a checkout (pip install -e '.[workloads]') or set {ENV_DIR}")
    return folder


def missing_modules(workload: Workload) -> list[str]:
    """The Python modules the workload imports that this interpreter lacks."""
    return [m for m in workload.needs if importlib.util.find_spec(m) is None]


@dataclass(frozen=True)
class Plan:
    """What ``run`` executes: the command line, the folder the run writes into, and the commands run before it
    without a profiler (a workload's own timings, when it times itself)."""

    command: list[str]
    out: Path
    before: tuple[list[str], ...] = ()


def plan(name: str, variant: str | None, profiler: str, out: Path | None, gpus: int | None,
         extra: Sequence[str] = ()) -> Plan:
    """Check that the workload can run here and build its command line; WorkloadError says why not."""
    workload = get(name)
    variant = variant or workload.variants[0]
    if variant not in workload.variants:
        raise WorkloadError(f"{name} has no variant {variant!r}; its variants: {', '.join(workload.variants)}")
    if gpus is not None and workload.gpus == 1 and gpus != 1:
        raise WorkloadError(f"{name} runs on one GPU; --gpus applies to the multi-GPU workloads")
    missing = missing_modules(workload)
    if missing:
        raise WorkloadError(f"{name} needs {' and '.join(missing)}, not installed for {sys.executable}: "
                            "pip install 'tracedoc[workloads]'")
    script = workloads_dir() / name / "run.py"
    if not script.is_file():
        raise WorkloadError(f"{script} is missing")
    if profiler in ("nsys", "ncu") and shutil.which(profiler) is None:
        tool = "Nsight Systems" if profiler == "nsys" else "Nsight Compute"
        raise WorkloadError(f"--profiler {profiler} needs {tool}'s {profiler} on PATH")
    out = out or workload.default_out(variant)
    processes = gpus or workload.gpus
    base = [sys.executable, str(script), "--variant", variant, "--out", str(out)]
    script_cmd = [*base, "--profiler", profiler, *extra]
    before: tuple[list[str], ...] = ()
    if workload.times_itself and profiler in ("nsys", "ncu"):
        before = ([*base, "--profiler", "none", *extra, "--phase", "time"],)
        script_cmd.extend(["--phase", "record"])
    # Per-rank reports: %q{RANK} is expanded by nsys and ncu from each process's environment.
    stem = out / ("run" if profiler == "nsys" else "kernels")
    wrapper = _profiler_command(profiler, workload, stem if processes == 1 else Path(f"{stem}.rank%q{{RANK}}"))
    if processes == 1:
        return Plan([*wrapper, *script_cmd], out, before)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    if wrapper:
        return Plan([*launcher, "--no-python", *wrapper, *script_cmd], out, before)
    return Plan([*launcher, *script_cmd[1:]], out, before)


def _profiler_command(profiler: str, workload: Workload, report: Path) -> list[str]:
    """The profiler that wraps the script: only the steps it brackets with cudaProfilerStart/Stop are recorded."""
    if profiler == "nsys":
        return ["nsys", "profile", "-t", NSYS_TRACE, "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                "--force-overwrite=true", "-o", str(report)]
    if profiler == "ncu":
        limit = ["--launch-count", str(workload.ncu_launches)] if workload.ncu_launches else []
        return ["ncu", "--set", "full", "--profile-from-start", "off", "--target-processes", "all", *limit,
                "--force-overwrite", "-o", str(report)]
    return []


def run(job: Plan, backend: Backend | None, interval_s: float) -> int:
    """Run the command (its output goes to the terminal) with telemetry sampled beside it; its exit code."""
    job.out.mkdir(parents=True, exist_ok=True)
    with _telemetry(backend, job.out / TELEMETRY_FILE, interval_s):
        for command in (*job.before, job.command):
            code = subprocess.run(command, check=False).returncode
            if code != 0:
                return code
        return 0


@contextlib.contextmanager
def _telemetry(backend: Backend | None, path: Path, interval_s: float) -> Iterator[None]:
    """Sample every GPU into ``path`` in a background thread while the block runs; nothing without NVML."""
    try:
        if backend is None:
            raise NoGpuError("no NVML backend")
        start(backend)
    except NoGpuError:
        yield
        return
    stop = threading.Event()
    failures: list[BaseException] = []

    def sample() -> None:
        try:
            watch(backend, path, interval_s, stop=stop)
        except Exception as exc:  # telemetry is a by-product: a failure must not end the workload
            failures.append(exc)

    thread = threading.Thread(target=sample, name="tracedoc-telemetry", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if failures:
            print(f"GPU telemetry stopped early: {failures[0]}", file=sys.stderr)
