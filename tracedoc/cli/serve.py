"""`tracedoc serve`: explore traces in the dashboard (a Panel app in the browser)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from tracedoc.cli.errors import one_line_errors
from tracedoc.cli.options import analysis_options, cache_dir_option
from tracedoc.cli.ports import DEFAULT_PORT, listen_port
from tracedoc.cli.stderr import progress
from tracedoc.ingest import InputFile
from tracedoc.options import AnalysisOptions
from tracedoc.pages import PAGES
from tracedoc.store.cache import default_cache_dir

# The command's help; its list of pages is the dashboard's own (tracedoc.pages.PAGES), so it names every page.
SERVE_HELP = f"""Serve the dashboard for traces, a cached store (*.duckdb) or a saved JSON report.

    The pages ({", ".join(page.module for page in PAGES)}) show what `tracedoc analyze` finds, with
    charts. Traces are read into the cache before the server starts (an input that cannot be read is one line,
    exit 2), then analysed while the pages show the progress. Needs the dashboard extra:
    pip install 'tracedoc[dashboard]'.

    Example:

        tracedoc serve ranks/

        tracedoc serve trace.json.gz --port 8080 --no-show

        tracedoc serve --diff before/ after/
    """


@click.command("serve", help=SERVE_HELP)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. The dashboard has no login: keep it on 127.0.0.1 unless the network "
                   "around you may read the traces.")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help=f"Port to listen on (default: {DEFAULT_PORT}, or a free port when {DEFAULT_PORT} is taken).")
@click.option("--no-show", is_flag=True, help="Do not open a browser.")
@click.option("--diff", "as_diff", is_flag=True,
              help="Compare two runs: PATHS are BEFORE and AFTER, as `tracedoc diff` takes them.")
@analysis_options()
@cache_dir_option
@one_line_errors
def serve_command(paths: tuple[Path, ...], host: str, port: int | None, no_show: bool, as_diff: bool,
                  options: AnalysisOptions, cache_dir: Path | None) -> None:
    """Serve the dashboard (the help is SERVE_HELP: it names the pages from the dashboard's own list)."""
    from tracedoc.dashboard import require

    if as_diff and len(paths) != 2:
        raise click.UsageError(f"--diff takes two paths, BEFORE and AFTER (got {len(paths)})")
    port = listen_port(host, port)  # before reading anything: a port taken is refused at once
    require("tracedoc serve")  # before reading the traces: the dashboard's dependencies are an optional extra
    address = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
    cache = cache_dir or default_cache_dir()
    # the inputs are read and refused, if they must be, before the dashboard's libraries are imported: those take
    # several times as long as reading a small trace
    if as_diff:
        from tracedoc.diff.side import check_kinds, resolve_side

        sides = [resolve_side(path) for path in paths]
        check_kinds(*sides)
        for side in sides:
            if side.report is not None:
                options.refuse_saved(side.label)
            ingest(side.inputs, cache, options)
        from tracedoc.dashboard.diff import DiffLoading, serve_diff

        click.echo(f"tracedoc diff at {address} (Ctrl-C stops it)", err=True)
        serve_diff(DiffLoading(paths[0], paths[1], cache, options), host, port, show=not no_show)
        return
    from tracedoc.dashboard.target import resolve

    target = resolve(paths)
    if target.report is not None:
        options.refuse_saved(str(paths[0]))
    ingest(target.inputs, cache, options)
    from tracedoc.dashboard.app import serve
    from tracedoc.dashboard.source import Loading

    click.echo(f"tracedoc dashboard at {address} (Ctrl-C stops it)", err=True)
    serve(Loading(target, cache, options), host, port, show=not no_show)


def ingest(inputs: Sequence[InputFile], cache_dir: Path, options: AnalysisOptions) -> None:
    """Read the traces into the cache before the server starts, so that one that cannot be read is refused as bad
    input (one line, exit 2) instead of a page saying so (under ``options``' limits); the server then analyses the
    cached store."""
    from tracedoc.api import open_store

    if not inputs:
        return
    with progress("reading traces…") as step:
        store, _ = open_store(inputs, cache_dir, step, options.limits)
        store.close()
