"""`tracedoc serve`: explore traces in the dashboard (a Panel app in the browser)."""

from __future__ import annotations

from pathlib import Path

import click

from tracedoc.cli.errors import one_line_errors
from tracedoc.cli.options import cache_dir_option, parse_settings, rules_option, set_option
from tracedoc.judge import load_rules
from tracedoc.store.cache import default_cache_dir


@click.command("serve")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. The dashboard has no login: keep it on 127.0.0.1 unless the network "
                   "around you may read the traces.")
@click.option("--port", type=click.IntRange(1, 65535), default=5006, show_default=True, help="Port to listen on.")
@click.option("--no-show", is_flag=True, help="Do not open a browser.")
@click.option("--diff", "as_diff", is_flag=True,
              help="Compare two runs: PATHS are BEFORE and AFTER, as `tracedoc diff` takes them.")
@rules_option
@set_option
@cache_dir_option
@one_line_errors
def serve_command(paths: tuple[Path, ...], host: str, port: int, no_show: bool, as_diff: bool,
                  rules_dirs: tuple[Path, ...], settings: tuple[str, ...], cache_dir: Path | None) -> None:
    """Serve the dashboard for traces, a cached store (*.duckdb) or a saved JSON report.

    The pages (overview, timeline, kernels, ranks, overlap, ncu, hang) show what `tracedoc analyze` finds, with
    charts; traces are ingested in the background while the pages show the progress. Needs the dashboard extra:
    pip install 'tracedoc[dashboard]'.

    Example:

        tracedoc serve ranks/

        tracedoc serve trace.json.gz --port 8080 --no-show

        tracedoc serve --diff before/ after/
    """
    from tracedoc.dashboard import require

    if as_diff and len(paths) != 2:
        raise click.UsageError(f"--diff takes two paths, BEFORE and AFTER (got {len(paths)})")
    require("tracedoc serve")  # before importing the dashboard, whose dependencies are an optional extra
    address = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
    rules = load_rules(rules_dirs)
    thresholds = parse_settings(settings, rules)
    if as_diff:
        from tracedoc.dashboard.diff import DiffLoading, serve_diff

        for path in paths:
            if not path.exists():
                raise click.BadParameter(f"{path}: no such file or directory", param_hint="PATHS")
        click.echo(f"tracedoc diff at {address} (Ctrl-C stops it)", err=True)
        serve_diff(DiffLoading(paths[0], paths[1], cache_dir or default_cache_dir(), rules, thresholds), host, port,
                   show=not no_show)
        return
    from tracedoc.dashboard.app import serve
    from tracedoc.dashboard.source import Loading, resolve

    loading = Loading(resolve(paths), cache_dir or default_cache_dir(), rules, thresholds)
    click.echo(f"tracedoc dashboard at {address} (Ctrl-C stops it)", err=True)
    serve(loading, host, port, show=not no_show)
