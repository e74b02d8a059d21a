"""The command line: a click group of thin commands over the Python API (one file per command group)."""

from __future__ import annotations

import click

from tracedoc import __version__
from tracedoc.cli.analyze import analyze_command
from tracedoc.cli.cache import cache_command
from tracedoc.cli.diff import diff_command
from tracedoc.cli.errors import TracedocGroup
from tracedoc.cli.health import health_command
from tracedoc.cli.rules import rules_command
from tracedoc.cli.serve import serve_command
from tracedoc.cli.workload import workload_command


@click.group(cls=TracedocGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracedoc")
@click.option("--debug", is_flag=True,
              help="Show the traceback of an error, not only its one-line message (also TRACEDOC_DEBUG=1).")
def cli(debug: bool) -> None:
    """tracedoc: a doctor for GPU profiling traces.

    Reads PyTorch profiler traces and tells you what is slow, where, how much it costs and how to fix it.
    """


cli.add_command(analyze_command)
cli.add_command(diff_command)
cli.add_command(rules_command)
cli.add_command(health_command)
cli.add_command(serve_command)
cli.add_command(workload_command)
cli.add_command(cache_command)
