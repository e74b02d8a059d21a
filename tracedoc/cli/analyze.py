"""`tracedoc analyze`: diagnose traces and print or write the report."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from tracedoc.api import run_analysis
from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.cli.options import (
    analysis_options,
    cache_dir_option,
    cluster_options,
    cluster_spec,
    emit_report,
    exit_code,
    output_target,
    report_options,
)
from tracedoc.cli.stderr import progress, say
from tracedoc.export import EXPORTS
from tracedoc.options import AnalysisOptions
from tracedoc.report import Report
from tracedoc.warm import on_first_step
from tracedoc.words.findings import missing_ranks_lines


@click.command("analyze")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True))
@report_options(set_example=None)
@cache_dir_option
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store and discard it afterwards.")
@analysis_options(what_if=True)
@cluster_options()
@one_line_errors
def analyze_command(paths: tuple[Path, ...], fmt: str | None, out: Path | None, fail_on: str | None,
                    cache_dir: Path | None, no_cache: bool, options: AnalysisOptions, workers: int | None,
                    dask_scheduler: str | None, dask_scheduler_file: Path | None) -> None:
    """Diagnose GPU traces: a trace file, or a directory with one trace per rank.

    Example:

        tracedoc analyze trace.json.gz

        tracedoc analyze ranks/ --format json --out reports/ --fail-on warning

        tracedoc analyze ranks/ --workers 8
    """
    fmt, target = output_target(fmt, out)
    cluster = cluster_spec(workers, dask_scheduler, dask_scheduler_file)
    if options.peaks is not None and cluster is not None:
        raise BadInput("--peak-tflops, --peak-gbps, --flops-per-step, --bytes-per-step and --step-time-ms apply to "
                       "a local analysis: not with --workers or a Dask scheduler")
    with progress("reading traces…") as step, _export_file(fmt, target) as exported:
        report = run_analysis(paths, options, cache_dir=cache_dir, use_cache=not no_cache,
                              progress=on_first_step(step, fmt), cluster=cluster, perfetto=exported)
    projection_only = options.what_if is not None and fmt == "text" and target is None
    said = [f"{EXPORTS[fmt].title} written to {target}"] if exported is not None and target is not None else []
    if fmt != "text" or target is not None or projection_only:  # else the text report says it under its headline
        said += missing_ranks_lines(report.summary)
    say(said)
    if projection_only:  # the answer asked for, not the report again
        rule = options.what_if
        assert rule is not None
        _print_projection(report, rule)
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
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory(prefix=f"tracedoc-{fmt}-") as tmp:
            written = Path(tmp) / f"trace{EXPORTS[fmt].extension}"
            yield written
            with written.open("rb") as f:
                shutil.copyfileobj(f, sys.stdout.buffer)
            sys.stdout.flush()


def _print_projection(report: Report, rule: str) -> None:
    """Print the projected step time with ``rule``'s largest finding fixed (``--what-if`` with the text format)."""
    from rich.text import Text

    from tracedoc.cli.terminal import OutputConsole
    from tracedoc.whatif import projection_for
    from tracedoc.words.findings import what_if_text
    from tracedoc.words.sanitize import terminal_text

    projection = projection_for(report, rule)
    OutputConsole(highlight=False).print(Text(terminal_text(
        f"{rule} (#{projection['finding']}): {what_if_text(projection)}" if projection
        else _no_projection(report, rule))))


def _no_projection(report: Report, rule: str) -> str:
    """Why there is no projection for ``rule``'s finding."""
    if any(f.rule == rule and f.impact_ms > 0 for f in report.findings):
        return (f"What if {rule} were fixed: tracedoc projects no step time for it: it is informational, or the "
                "time it counts has a cause the trace does not name.")
    return f"What if {rule} were fixed: it found nothing with attributed time here, so nothing changes."
