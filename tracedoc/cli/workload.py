"""`tracedoc workload`: list the bundled GPU workloads, or run one under a profiler with telemetry beside it."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from tracedoc import workload as workloads
from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.cli.options import FiniteFloatRange
from tracedoc.cli.terminal import table_console
from tracedoc.health.nvml import Backend, LiveNvml
from tracedoc.health.replay import ENV_VAR, Replay


@click.group("workload")
def workload_command() -> None:
    """Small GPU programs that plant one known performance problem each (and a variant without it).

    Run one on your GPU, then let tracedoc diagnose what it recorded. The programs live in the workloads/
    folder of tracedoc's source and need `pip install 'tracedoc[workloads]'` (torch; cupy for the GEMM ladder).

    Example:

        tracedoc workload list

        tracedoc workload run decode_loop --variant eager --out out/decode-eager

        tracedoc analyze out/decode-eager
    """


@workload_command.command("list")
def list_command() -> None:
    """List the workloads, their variants (the default first), GPUs and the problem each plants.

    Example:

        tracedoc workload list
    """
    console = table_console(markup=False)
    table = Table("workload", "variants", "GPUs", "plants", box=None, header_style="bold")
    for w in workloads.WORKLOADS.values():
        table.add_row(w.name, ", ".join(w.variants), str(w.gpus), w.plants)
    console.print(table)
    missing = sorted({m for w in workloads.WORKLOADS.values() for m in workloads.missing_modules(w)})
    if missing:
        console.print(f"not installed here: {', '.join(missing)} (pip install 'tracedoc[workloads]')")


@workload_command.command("run")
@click.argument("name")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--variant", help="Which variant to run (default: the workload's first; see `tracedoc workload list`).")
@click.option("--profiler", type=click.Choice(workloads.PROFILERS), default="torch", show_default=True,
              help="torch: the script's PyTorch profiler trace; nsys: `nsys profile -t cuda,nvtx,osrt` around it; "
                   "ncu: `ncu --set full` on the recorded steps' kernels; none: only the printed figure.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the traces, reports and run.telemetry.parquet (default out/<name>-<variant>).")
@click.option("--gpus", type=click.IntRange(min=1), default=None,
              help="Processes (one per GPU) for the multi-GPU workloads, started by torchrun (default 2).")
@click.option("--interval", type=FiniteFloatRange(min=0.01), default=0.1, show_default=True,
              help="Seconds between GPU telemetry samples.")
@click.option("--replay", type=click.Path(path_type=Path), default=None, envvar=ENV_VAR, hidden=True,
              help="Answer NVML from a recording instead of the driver (tests, demos).")
@one_line_errors
def run_command(name: str, script_args: tuple[str, ...], variant: str | None, profiler: str, out: Path | None,
                gpus: int | None, interval: float, replay: Path | None) -> None:
    """Run workload NAME on this machine's GPU(s) under a profiler, sampling GPU telemetry beside it.

    Arguments after `--` go to the workload's script (e.g. `-- --steps 2`). What it recorded lands in --out,
    with run.telemetry.parquet when NVML is available; `tracedoc analyze` reads the folder.

    Example:

        tracedoc workload run decode_loop --variant eager

        tracedoc workload run gemm_ladder --profiler ncu --out out/gemm -- --shapes 4096

        tracedoc workload run ddp_step --variant no_overlap --gpus 2
    """
    job = workloads.plan(name, variant, profiler, out, gpus, script_args)
    err = Console(stderr=True, highlight=False, markup=False, soft_wrap=True)
    for command in job.before:
        err.print(f"timing first, without the profiler: {shlex.join(command)}")
    err.print(f"running: {shlex.join(job.command)}")
    backend: Backend = Replay.load(replay) if replay else LiveNvml()
    try:
        code = workloads.run(job, backend, interval)
    finally:
        backend.close()
    if code != 0:
        raise BadInput(f"{name} exited with code {code} (its output is above)")
    telemetry = job.out / workloads.TELEMETRY_FILE
    note = f" and GPU telemetry ({telemetry.name})" if telemetry.exists() else ""
    err.print(f"{name} wrote its results{note} to {job.out}; diagnose them with: tracedoc analyze {job.out}")
