"""Options and helpers the commands share: writing a report (`tracedoc analyze`, `tracedoc health`), rules and
thresholds, the cache. What is drawn with Rich (tables, the text report on a terminal) is in tracedoc.cli.terminal,
imported where something is drawn."""

from __future__ import annotations

import functools
import io
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracedoc.cli.errors import BadInput, debug_enabled, one_line_errors
from tracedoc.cli.stderr import say
from tracedoc.errors import RuleError
from tracedoc.export import EXPORTS
from tracedoc.judge import Rule, load_rules
from tracedoc.judge.rule import check_thresholds
from tracedoc.limits import Limits
from tracedoc.options import AnalysisOptions, Peaks
from tracedoc.render import RENDERERS
from tracedoc.render.base import Renderer
from tracedoc.report import SEVERITIES, Report
from tracedoc.units import parse_size

if TYPE_CHECKING:
    from rich.console import RenderableType

_OUT_HELP = "Write the report to this file, or into this directory as tracedoc-report.<ext>."

# Options several commands share, applied as decorators.
rules_option = click.option("--rules", "rules_dirs", multiple=True, type=click.Path(path_type=Path),
                            help="A folder of extra rule files (*.yaml); repeatable. A rule with a built-in's id "
                                 "replaces it.")


def set_option(example: str = "launch-bound.min_idle_pct=25") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--set RULE.THRESHOLD=VALUE (parameter settings), with an example of the command's own rules."""
    return click.option("--set", "settings", multiple=True, metavar="RULE.THRESHOLD=VALUE",
                        help=f"Override a rule threshold, e.g. --set {example}; repeatable.")

cache_dir_option = click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
                                help="Where ingested stores are cached (default: $TRACEDOC_CACHE_DIR or "
                                     "~/.cache/tracedoc).")


class FiniteFloatRange(click.FloatRange):
    """A FloatRange that also refuses NaN and ±infinity, which float() reads ('inf', 'nan') and FloatRange's bounds
    let through: nothing downstream can use them, and they would end up in the JSON."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def cluster_options() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--workers / --dask-scheduler / --dask-scheduler-file (parameters workers, dask_scheduler,
    dask_scheduler_file): where a distributed run does its per-rank work. Without them everything runs here."""
    options = [
        click.option("--workers", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Read and analyse the ranks on a local Dask cluster of N processes (needs tracedoc[dask])."),
        click.option("--dask-scheduler", metavar="ADDRESS", default=None,
                     help="Do the per-rank work on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); "
                          "the inputs and --cache-dir must be on a file system its workers share."),
        click.option("--dask-scheduler-file", type=click.Path(path_type=Path), default=None, metavar="FILE",
                     help="Like --dask-scheduler, with the scheduler named in FILE (dask scheduler --scheduler-file)."),
    ]
    return stacked(options)


def stacked(options: Sequence[Callable[..., Any]]) -> Callable[..., Any]:
    """One decorator applying click ``options`` in order (the first is listed first in --help)."""
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def cluster_spec(workers: int | None, scheduler: str | None, scheduler_file: Path | None) -> Any:
    """The cluster the options name (a tracedoc.scale.ClusterSpec), or None for a run on this machine alone."""
    given = [name for name, value in (("--workers", workers), ("--dask-scheduler", scheduler),
                                      ("--dask-scheduler-file", scheduler_file)) if value is not None]
    if not given:
        return None
    if len(given) > 1:
        raise BadInput(f"{' and '.join(given)}: give one of them")
    from tracedoc.scale import ClusterSpec  # Dask itself is imported only when the run starts

    return ClusterSpec(workers=workers, scheduler=scheduler, scheduler_file=scheduler_file,
                       worker_logs=debug_enabled())


def report_options(out_help: str = _OUT_HELP, formats: Sequence[str] | None = None,
                   set_example: str | None = "launch-bound.min_idle_pct=25",
                   ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of a command that writes a report: --format (``formats``, default every renderer and export),
    --out, --rules and --set (with ``set_example``; None: none, the command takes them with ``analysis_options``),
    --fail-on (parameters fmt, out, rules_dirs, settings, fail_on)."""
    judged = [rules_option, set_option(set_example)] if set_example is not None else []
    options: list[Callable[..., Any]] = [
        click.option("--format", "fmt", type=click.Choice(sorted(formats or report_formats())), default=None,
                     help="Output format (default: text, or what --out's extension implies)."),
        click.option("--out", type=click.Path(), callback=out_path, default=None, help=out_help),
        *judged,
        click.option("--fail-on", type=click.Choice(SEVERITIES), default=None,
                     help="Exit with code 1 when a finding of this severity or worse is reported (for CI)."),
    ]
    return stacked(options)


_POSITIVE = click.FloatRange(min=0, min_open=True)

# The options of one analysis run besides --rules and --set, in --help's order.
_RUN_OPTIONS: tuple[Callable[..., Any], ...] = (
    click.option("--max-inflate", metavar="SIZE", default=None,
                 help="Largest size a compressed input (or standard input) may unpack to, e.g. 20G (default: the "
                      "larger of 100 times its compressed size and 64 MiB, 4 GiB for standard input; also "
                      "$TRACEDOC_MAX_INFLATE_BYTES)."),
    click.option("--memory-limit", metavar="SIZE", default=None,
                 help="Memory for the store and the analyses, e.g. 2G; beyond it they spill to a temporary "
                      "directory, slower (default: DuckDB's, 80% of RAM, or the size of an uncompressed Nsight "
                      "Systems .sqlite export of 64 MiB or more, at least 192 MiB and 32 MiB a core; also "
                      "$TRACEDOC_MEMORY_LIMIT)."),
)
_WHAT_IF_OPTION = click.option(
    "--what-if", "what_if_rule", metavar="RULE", default=None,
    help="Print only the projected step time with RULE's largest finding fixed, and the next bottleneck (with "
         "--format or --out, the report holds it under what_if).")
_STEP_OPTIONS: tuple[Callable[..., Any], ...] = (
    click.option("--step-range", metavar="NAME", default=None,
                 help="The host range (NVTX or record_function) that marks one step, e.g. train_step ('step' also "
                      "takes 'step 1', 'step 2', …); by default tracedoc finds the steps itself (ProfilerStep#N, a "
                      "repeated range, the repeating kernel) and says how."),
    click.option("--peak-tflops", type=_POSITIVE, default=None,
                 help="Dense peak TFLOP/s that MFU divides by, for a GPU the peak table lacks (it overrides the table "
                      "for every dtype)."),
    click.option("--peak-gbps", type=_POSITIVE, default=None,
                 help="Peak memory bandwidth in GB/s that MBU divides by (overrides the table)."),
    click.option("--flops-per-step", type=_POSITIVE, default=None,
                 help="The model's FLOPs per step, where the trace holds no operator shapes (CUDA graphs, "
                      "record_shapes off, Nsight Systems): MFU from it and the step time."),
    click.option("--bytes-per-step", type=_POSITIVE, default=None,
                 help="The bytes one step must move (decode: weights + KV cache), for MBU where the trace holds no "
                      "shapes (CUDA graphs): alone, it gives MBU without MFU."),
    click.option("--step-time-ms", type=_POSITIVE, default=None,
                 help="The step time in ms from your own logs, without the profiler: MFU and MBU divide by it instead "
                      "of the profiled step's time, and the report echoes it."),
)
_PEAKS = ("peak_tflops", "peak_gbps", "flops_per_step", "bytes_per_step", "step_time_ms")


def analysis_options(set_example: str = "launch-bound.min_idle_pct=25",
                     what_if: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options one analysis run is judged by, as `analyze`, `serve` and `diff` take them: --rules, --set (with
    ``set_example``), --max-inflate, --memory-limit, --what-if (``what_if``: the commands that print a
    projection), --step-range, --peak-tflops, --peak-gbps, --flops-per-step, --bytes-per-step, --step-time-ms. The
    command gets them as one value, its parameter ``options`` (a tracedoc.options.AnalysisOptions): a bad one is
    one line and exit 2, before the command runs."""
    options: list[Callable[..., Any]] = [rules_option, set_option(set_example), *_RUN_OPTIONS,
                                         *([_WHAT_IF_OPTION] if what_if else []), *_STEP_OPTIONS]

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @one_line_errors
        @functools.wraps(func)
        def command(*args: Any, rules_dirs: tuple[Path, ...], settings: tuple[str, ...], max_inflate: str | None,
                    memory_limit: str | None, step_range: str | None, what_if_rule: str | None = None,
                    **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in _PEAKS}
            limits = Limits.from_env(
                memory_bytes=parse_size(memory_limit, "--memory-limit") if memory_limit else None,
                max_inflate_bytes=parse_size(max_inflate, "--max-inflate") if max_inflate else None)
            rules = load_rules(rules_dirs)
            peaks = Peaks(**given) if any(v is not None for v in given.values()) else None
            value = AnalysisOptions(rules_dirs=rules_dirs, thresholds=parse_settings(settings, rules),
                                    step_range=step_range, peaks=peaks, limits=limits, what_if=what_if_rule)
            return func(*args, options=value, **kwargs)

        return stacked(options)(command)

    return decorate


class _DirectoryPath(type(Path())):  # type: ignore[misc]
    """An --out written with a trailing slash: a directory, whatever its name looks like."""


def out_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """--out as a Path, remembering a trailing slash (which Path drops) as a _DirectoryPath."""
    if value is None:
        return None
    return _DirectoryPath(value) if value.endswith(("/", os.sep)) else Path(value)


# Extensions that name a format besides each format's own (.html, .md, .json, .txt).
_EXTENSION_ALIASES = {".htm": "html", ".markdown": "md"}


def renderer_formats() -> dict[str, str]:
    """The formats a report renders to (no export: those need the analysed store): name → extension."""
    return RENDERERS.extensions()


def report_formats() -> dict[str, str]:
    """The report's output formats: each renderer's and each export's name and the extension of its files."""
    return {**renderer_formats(), **{name: export.extension for name, export in EXPORTS.items()}}


def _format_of_extension(suffix: str, formats: Mapping[str, str]) -> str | None:
    """The format of ``formats`` (name → extension) a file extension names, if any."""
    suffix = suffix.lower()
    named = next((name for name, extension in formats.items() if extension == suffix), None)
    alias = _EXTENSION_ALIASES.get(suffix)
    return named or (alias if alias in formats else None)


def output_target(fmt: str | None, out: Path | None, stem: str = "tracedoc-report",
                  formats: Mapping[str, str] | None = None,
                  refused: Mapping[str, str] | None = None) -> tuple[str, Path | None]:
    """The format and file to write, for any document a command writes (the report, the diff, a health report).

    ``formats``: the document's formats, name → extension (default: the report's renderers and exports);
    ``refused``: an extension → why this document has no such form. --out is a directory (the document goes in as
    STEM.<ext>) when it ends with a slash, exists as one, or has no extension; else a file, in --format when given
    (an explicit format wins over the extension: --format perfetto --out trace.json), else in the format its
    extension names (an error when it names none)."""
    formats = report_formats() if formats is None else formats
    if out is None:
        if sys.stdout is None:  # started with its output closed (`>&-`): nowhere to write to
            raise BadInput("standard output is closed: give --out FILE")
        return fmt or "text", None
    known = " ".join(formats.values())
    suffixes = ("".join(out.suffixes[-2:]).lower(), out.suffix.lower())  # a two-part extension first (.perfetto.json)
    if (why := next((refused[s] for s in suffixes if refused and s in refused), None)) is not None:
        raise BadInput(f"--out {out}: {why}; use {known} or a directory")
    by_extension = _format_of_extension(suffixes[0], formats) or _format_of_extension(suffixes[1], formats)
    is_dir = isinstance(out, _DirectoryPath) or out.is_dir()
    if out.suffix and not is_dir and fmt is not None:
        return fmt, out
    if by_extension is not None and not is_dir:
        return by_extension, out
    if out.suffix and not is_dir:
        raise BadInput(f"--out {out}: unknown extension; use {known} or a directory")
    fmt = fmt or "text"
    return fmt, out / f"{stem}{formats[fmt]}"


def write_document(text: str, target: Path | None, what: str) -> None:
    """Print ``text`` on stdout, or write it to ``target`` and say so on stderr (``what``: 'report', 'diff')."""
    if target is None:
        click.echo(text, nl=False)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    say([f"{what} written to {target}"])


def parse_settings(settings: Sequence[str], rules: Sequence[Rule]) -> dict[str, dict[str, float]]:
    """--set RULE.NAME=VALUE options as {rule: {name: value}}; each must name one of ``rules`` and a threshold
    it has."""
    parsed: dict[str, dict[str, float]] = {}
    for item in settings:
        key, sep, value = item.partition("=")
        rule, dot, name = key.partition(".")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not dot or not rule or not name or number is None or not math.isfinite(number):
            raise BadInput(f"--set {item}: expected RULE.THRESHOLD=NUMBER (a finite number)")
        try:
            check_thresholds(rules, {rule: {name: number}})
        except RuleError as exc:
            raise BadInput(f"--set {item}: {exc}") from None
        parsed.setdefault(rule, {})[name] = number
    return parsed


def exit_code(report: Report, fail_on: str | None) -> int:
    """1 when a finding is at least as severe as --fail-on, else 0."""
    if fail_on is None:
        return 0
    worst = report.worst_severity()
    return 1 if worst is not None and SEVERITIES.index(worst) <= SEVERITIES.index(fail_on) else 0


def emit_report(report: Report, fmt: str, target: Path | None, text_head: Sequence[RenderableType] | None = None,
                markdown_head: str = "") -> None:
    """Print the report (text in colour on a terminal) or write it to ``target``.

    ``text_head`` replaces the text report's summary line, for a command that summarises in its own way;
    ``markdown_head`` goes before the Markdown report. Rich and a format's renderer are imported only for the
    format written.
    """
    if fmt == "text" and (target is None or text_head is not None):
        from rich.console import Console

        from tracedoc.cli.terminal import OutputConsole
        from tracedoc.render.text import TextRenderer

        console: Console = OutputConsole(highlight=False)
        renderer = TextRenderer(width=min(console.width, 120)) if target is None else TextRenderer()
        buf = io.StringIO()
        if target is not None:
            console = Console(file=buf, width=renderer.width, no_color=True, highlight=False)
        parts = renderer.parts(report)
        for part in [*text_head, *parts[1:]] if text_head is not None else parts:
            console.print(part)
        if target is None:
            return
        text = buf.getvalue()
    elif fmt == "md" and markdown_head:
        from tracedoc.render.markdown import MarkdownRenderer

        text = markdown_head + MarkdownRenderer(headline=False).render(report)
    else:
        document: Renderer = RENDERERS[fmt]()
        text = document.render(report)
    write_document(text, target, "report")
