"""`tracedoc analyze`: diagnose traces and print or write the report."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from tracedoc.api import analyze
from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.render import RENDERERS, renderer_for_extension
from tracedoc.render.text import TextRenderer
from tracedoc.report import SEVERITIES, Report


@click.command("analyze")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default=None,
              help="Output format (default: text, or what --out's extension implies).")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write the report to this file, or into this directory as tracedoc-report.<ext>.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(path_type=Path),
              help="A folder of extra rule files (*.yaml); repeatable. A rule with a built-in's id replaces it.")
@click.option("--set", "settings", multiple=True, metavar="RULE.THRESHOLD=VALUE",
              help="Override a rule threshold, e.g. --set launch-bound.min_idle_pct=25; repeatable.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default=None,
              help="Exit with code 1 when a finding of this severity or worse is reported (for CI).")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="Where ingested stores are cached (default: $TRACEDOC_CACHE_DIR or ~/.cache/tracedoc).")
@click.option("--no-cache", is_flag=True, help="Ingest into a temporary store and discard it afterwards.")
@one_line_errors
def analyze_command(paths: tuple[Path, ...], fmt: str | None, out: Path | None, rules_dirs: tuple[Path, ...],
                    settings: tuple[str, ...], fail_on: str | None, cache_dir: Path | None, no_cache: bool) -> None:
    """Diagnose GPU traces: a trace file, or a directory with one trace per rank.

    Example:

        tracedoc analyze trace.json.gz

        tracedoc analyze ranks/ --format json --out reports/ --fail-on warning
    """
    fmt, target = _output_target(fmt, out)
    thresholds = _parse_settings(settings)
    err = Console(stderr=True)
    with err.status("reading traces…") as status:
        report = analyze(paths, rules_dirs=rules_dirs, cache_dir=cache_dir, use_cache=not no_cache,
                         thresholds=thresholds, progress=lambda msg: status.update(msg))
    if target is None and fmt == "text":
        console = Console(highlight=False)
        for part in TextRenderer(width=min(console.width, 120)).parts(report):
            console.print(part)
    else:
        text = RENDERERS[fmt]().render(report)
        if target is None:
            click.echo(text, nl=False)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            err.print(f"report written to {target}", highlight=False)
    sys.exit(_exit_code(report, fail_on))


def _output_target(fmt: str | None, out: Path | None) -> tuple[str, Path | None]:
    """The format and file to write: --out with a known extension is a file, otherwise a directory."""
    if out is None:
        return fmt or "text", None
    by_extension = renderer_for_extension(out.suffix)
    if by_extension is not None and not out.is_dir():
        if fmt is not None and fmt != by_extension.name:
            raise BadInput(f"--format {fmt} does not match the extension of {out}")
        return by_extension.name, out
    fmt = fmt or "text"
    return fmt, out / f"tracedoc-report{RENDERERS[fmt].extension}"


def _parse_settings(settings: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """--set RULE.NAME=VALUE options as {rule: {name: value}}."""
    parsed: dict[str, dict[str, float]] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        rule, dot, name = key.partition(".")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not dot or not rule or not name or number is None:
            raise BadInput(f"--set {item}: expected RULE.THRESHOLD=NUMBER")
        parsed.setdefault(rule, {})[name] = number
    return parsed


def _exit_code(report: Report, fail_on: str | None) -> int:
    """1 when a finding is at least as severe as --fail-on, else 0."""
    if fail_on is None:
        return 0
    worst = report.worst_severity()
    return 1 if worst is not None and SEVERITIES.index(worst) <= SEVERITIES.index(fail_on) else 0
