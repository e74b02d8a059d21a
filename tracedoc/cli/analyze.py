"""`tracedoc analyze`: diagnose traces and print or write the report."""

from __future__ import annotations

import contextlib
import math
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from tracedoc import efficiency
from tracedoc.api import analyze
from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.cli.options import (
    OutputConsole,
    cache_dir_option,
    cluster_options,
    cluster_spec,
    emit_report,
    exit_code,
    output_target,
    parse_settings,
    report_options,
)
from tracedoc.export import EXPORTS
from tracedoc.judge import load_rules
from tracedoc.limits import Limits
from tracedoc.report import Report
from tracedoc.units import parse_size
from tracedoc.whatif import projection_for
from tracedoc.words.findings import missing_ranks_lines, what_if_text
from tracedoc.words.sanitize import one_line, terminal_text


@click.command("analyze")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True))
@report_options()
@cache_dir_option
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store and discard it afterwards.")
@click.option("--max-inflate", metavar="SIZE", default=None,
              help="Largest size a compressed input (or standard input) may unpack to, e.g. 20G (default: the larger "
                   "of 100 times its compressed size and 64 MiB, 4 GiB for standard input; also "
                   "$TRACEDOC_MAX_INFLATE_BYTES).")
@click.option("--memory-limit", metavar="SIZE", default=None,
              help="Memory for the store and the analyses, e.g. 2G; beyond it they spill to a temporary directory, "
                   "slower (default: DuckDB's, 80% of RAM; also $TRACEDOC_MEMORY_LIMIT).")
@click.option("--what-if", "what_if_rule", metavar="RULE", default=None,
              help="Print only the projected step time with RULE's largest finding fixed, and the next bottleneck "
                   "(with --format or --out, the report holds it under what_if).")
@click.option("--step-range", metavar="NAME", default=None,
              help="The host range (NVTX or record_function) that marks one step, e.g. train_step ('step' also takes "
                   "'step 1', 'step 2', …); by default tracedoc finds the steps itself (ProfilerStep#N, a repeated "
                   "range, the repeating kernel) and says how.")
@click.option("--peak-tflops", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Dense peak TFLOP/s that MFU divides by, for a GPU the peak table lacks (it overrides the table "
                   "for every dtype).")
@click.option("--peak-gbps", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Peak memory bandwidth in GB/s that MBU divides by (overrides the table).")
@click.option("--flops-per-step", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The model's FLOPs per step, where the trace holds no operator shapes (CUDA graphs, "
                   "record_shapes off, Nsight Systems): MFU from it and the step time.")
@click.option("--bytes-per-step", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The bytes one step must move (decode: weights + KV cache), for MBU where the trace holds no "
                   "shapes (CUDA graphs): alone, it gives MBU without MFU.")
@click.option("--step-time-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The step time in ms from your own logs, without the profiler: MFU and MBU divide by it instead "
                   "of the profiled step's time, and the report echoes it.")
@cluster_options()
@one_line_errors
def analyze_command(paths: tuple[Path, ...], fmt: str | None, out: Path | None, rules_dirs: tuple[Path, ...],
                    settings: tuple[str, ...], fail_on: str | None, cache_dir: Path | None, no_cache: bool,
                    max_inflate: str | None, memory_limit: str | None, what_if_rule: str | None,
                    step_range: str | None, peak_tflops: float | None, peak_gbps: float | None,
                    flops_per_step: float | None, bytes_per_step: float | None, step_time_ms: float | None,
                    workers: int | None,
                    dask_scheduler: str | None, dask_scheduler_file: Path | None) -> None:
    """Diagnose GPU traces: a trace file, or a directory with one trace per rank.

    Example:

        tracedoc analyze trace.json.gz

        tracedoc analyze ranks/ --format json --out reports/ --fail-on warning

        tracedoc analyze ranks/ --workers 8
    """
    fmt, target = output_target(fmt, out)
    limits = Limits.from_env(memory_bytes=parse_size(memory_limit, "--memory-limit") if memory_limit else None,
                             max_inflate_bytes=parse_size(max_inflate, "--max-inflate") if max_inflate else None)
    rules = load_rules(rules_dirs)
    thresholds = parse_settings(settings, rules)
    cluster = cluster_spec(workers, dask_scheduler, dask_scheduler_file)
    if step_time_ms is not None and not math.isfinite(step_time_ms):
        raise BadInput(f"--step-time-ms {step_time_ms}: not a finite number of milliseconds")
    given = (peak_tflops, peak_gbps, flops_per_step, bytes_per_step, step_time_ms)
    peaks = efficiency.Options(*given) if any(v is not None for v in given) else None
    if peaks is not None and cluster is not None:
        raise BadInput("--peak-tflops, --peak-gbps, --flops-per-step, --bytes-per-step and --step-time-ms apply to "
                       "a local analysis: not with --workers or a Dask scheduler")
    err = Console(stderr=True)
    with err.status("reading traces…") as status, _export_file(fmt, target) as exported:

        def progress(message: str) -> None:
            status.update(Text(one_line(message)))

        report = analyze(paths, rules_dirs=rules_dirs, cache_dir=cache_dir, use_cache=not no_cache,
                         thresholds=thresholds, progress=progress, step_range=step_range, cluster=cluster,
                         limits=limits, what_if=what_if_rule, perfetto=exported, peaks=peaks)
    if exported is not None and target is not None:
        err.print(f"{EXPORTS[fmt].title} written to {target}", highlight=False)
    projection_only = what_if_rule is not None and fmt == "text" and target is None
    if fmt != "text" or target is not None or projection_only:  # else the text report says it under its headline
        for line in missing_ranks_lines(report.summary):
            err.print(Text(one_line(line)), highlight=False)
    if projection_only:  # the answer asked for, not the report again
        assert what_if_rule is not None
        projection = projection_for(report, what_if_rule)
        OutputConsole(highlight=False).print(Text(terminal_text(
            f"{what_if_rule} (#{projection['finding']}): {what_if_text(projection)}" if projection
            else _no_projection(report, what_if_rule))))
    elif fmt not in EXPORTS:
        emit_report(report, fmt, target)
    sys.exit(exit_code(report, fail_on))


@contextlib.contextmanager
def _export_file(fmt: str, target: Path | None) -> Iterator[Path | None]:
    """Where the analysis writes an export (tracedoc.export.EXPORTS; the one there is, ``--format perfetto``, is the
    API's ``perfetto``): ``target``, or a temporary file copied to standard output once written; None for the
    renderers' formats."""
    if fmt not in EXPORTS:
        yield None
    elif target is not None:
        yield target
    else:
        with tempfile.TemporaryDirectory(prefix=f"tracedoc-{fmt}-") as tmp:
            written = Path(tmp) / f"trace{EXPORTS[fmt].extension}"
            yield written
            with written.open("rb") as f:
                shutil.copyfileobj(f, sys.stdout.buffer)
            sys.stdout.flush()


def _no_projection(report: Report, rule: str) -> str:
    """Why there is no projection for ``rule``'s finding."""
    if any(f.rule == rule and f.impact_ms > 0 for f in report.findings):
        return (f"What if {rule} were fixed: tracedoc projects no step time for it: it is informational, or the "
                "time it counts has a cause the trace does not name.")
    return f"What if {rule} were fixed: it found nothing with attributed time here, so nothing changes."
