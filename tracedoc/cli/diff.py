"""`tracedoc diff BEFORE AFTER`: compare two runs — faster or not and how sure, where the time went, which
problems went away — with CI gates on a regression and on new findings."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracedoc.cli.errors import one_line_errors
from tracedoc.cli.options import (
    FiniteFloatRange,
    analysis_options,
    cache_dir_option,
    out_path,
    output_target,
    write_document,
)
from tracedoc.cli.stderr import progress
from tracedoc.diff import build_diff, load_side
from tracedoc.diff.gates import new_finding_failures, regression_failures
from tracedoc.diff.render import FORMATS, render
from tracedoc.diff.side import check_kinds, resolve_side
from tracedoc.options import AnalysisOptions
from tracedoc.report import SEVERITIES

_STEM = "tracedoc-diff"
_MAX_ITEMS = 1e12  # items a step processes: beyond any batch, and throughputs stay far from overflowing


@click.command("diff")
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None,
              help="Output format (default: text, or what --out's extension implies).")
@click.option("--out", type=click.Path(), callback=out_path, default=None,
              help="Write the diff to this file (.txt .json .md .html), or into this directory as "
                   f"{_STEM}.<ext>.")
@click.option("--fail-on-regression", type=FiniteFloatRange(min=0), metavar="PCT", default=None,
              help="Exit with code 1 when the job's median step time got worse by more than PCT % and the change "
                   "is significant (for CI).")
@click.option("--fail-on-new", type=click.Choice(SEVERITIES), default=None,
              help="Exit with code 1 when a finding of this severity or worse appears that BEFORE did not have.")
@click.option("--per-step-items", type=FiniteFloatRange(min=0, min_open=True, max=_MAX_ITEMS), metavar="N",
              default=None,
              help="Items (samples, tokens, images) one step processes: adds throughput in items/s.")
@click.option("--rank", type=int, default=None,
              help="The rank whose causes are compared (default: the slowest rank before).")
@analysis_options()
@cache_dir_option
@click.option("--no-cache", is_flag=True, help="Ingest into temporary stores and discard them afterwards.")
@one_line_errors
def diff_command(before: Path, after: Path, fmt: str | None, out: Path | None, fail_on_regression: float | None,
                 fail_on_new: str | None, per_step_items: float | None, rank: int | None,
                 options: AnalysisOptions, cache_dir: Path | None, no_cache: bool) -> None:
    """Compare two runs: BEFORE and AFTER are each what `analyze` takes (a trace, a directory of ranks), a cached
    *.duckdb store, or a saved JSON report.

    Example:

        tracedoc diff samples/decode-eager samples/decode-cudagraph

        tracedoc diff base/ pr/ --format md --out diff.md --fail-on-regression 5 --fail-on-new warning
    """
    fmt, target = output_target(fmt, out, _STEM, FORMATS, {".perfetto.json": "a diff has no Perfetto form"})
    source_b, source_a = resolve_side(before), resolve_side(after)
    check_kinds(source_b, source_a)  # before the analyses: a torch trace against an ncu report fails at once
    with progress("reading BEFORE…"):
        side_b = load_side(source_b, options, cache_dir, use_cache=not no_cache)
    if _same_path(before, after):
        side_a = side_b
    else:
        with progress("reading AFTER…"):
            side_a = load_side(source_a, options, cache_dir, use_cache=not no_cache)
    diff = build_diff(side_b, side_a, per_step_items=per_step_items, rank=rank)
    failures = regression_failures(diff, fail_on_regression) if fail_on_regression is not None else []
    if fail_on_new is not None:
        failures += new_finding_failures(diff, fail_on_new)
    if fmt == "text" and target is None:
        from tracedoc.cli.terminal import table_console
        from tracedoc.diff.text import diff_parts

        console = table_console()  # on a terminal its width; piped, rows are never wrapped or cut
        for part in diff_parts(diff):
            console.print(part)
    else:
        write_document(render(diff, fmt), target, "diff")
    for reason in failures:
        click.echo(f"fail: {reason}", err=True)
    sys.exit(1 if failures else 0)


def _same_path(a: Path, b: Path) -> bool:
    """The same file or directory given twice (read once)."""
    try:
        return a.exists() and a.resolve() == b.resolve()
    except OSError:
        return False
