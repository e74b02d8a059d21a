"""`tracedoc analyze`: diagnose traces and print or write the report."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from tracedoc.api import analyze
from tracedoc.cli.errors import one_line_errors
from tracedoc.cli.options import (
    cache_dir_option,
    emit_report,
    exit_code,
    output_target,
    parse_settings,
    report_options,
)
from tracedoc.judge import load_rules


@click.command("analyze")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, allow_dash=True))
@report_options()
@cache_dir_option
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store and discard it afterwards.")
@one_line_errors
def analyze_command(paths: tuple[Path, ...], fmt: str | None, out: Path | None, rules_dirs: tuple[Path, ...],
                    settings: tuple[str, ...], fail_on: str | None, cache_dir: Path | None, no_cache: bool) -> None:
    """Diagnose GPU traces: a trace file, or a directory with one trace per rank.

    Example:

        tracedoc analyze trace.json.gz

        tracedoc analyze ranks/ --format json --out reports/ --fail-on warning
    """
    fmt, target = output_target(fmt, out)
    thresholds = parse_settings(settings, load_rules(rules_dirs))
    err = Console(stderr=True)
    with err.status("reading traces…") as status:
        report = analyze(paths, rules_dirs=rules_dirs, cache_dir=cache_dir, use_cache=not no_cache,
                         thresholds=thresholds, progress=lambda msg: status.update(msg))
    emit_report(report, fmt, target)
    sys.exit(exit_code(report, fail_on))
