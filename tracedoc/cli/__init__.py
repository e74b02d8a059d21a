"""The command line: a click group of thin commands over the Python API (one file per command group).

Each command's module is imported only when that command runs (or help lists it), so that `tracedoc analyze`
does not pay for the dashboard, the diff or the workloads.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

import click

from tracedoc.cli.errors import TracedocGroup
from tracedoc.lazy import load
from tracedoc.version import __version__

# name: "module:attribute" of the click command.
_COMMANDS = {
    "analyze": "tracedoc.cli.analyze:analyze_command",
    "cache": "tracedoc.cli.cache:cache_command",
    "diff": "tracedoc.cli.diff:diff_command",
    "health": "tracedoc.cli.health:health_command",
    "resident": "tracedoc.cli.resident:resident_command",
    "rules": "tracedoc.cli.rules:rules_command",
    "serve": "tracedoc.cli.serve:serve_command",
    "workload": "tracedoc.cli.workload:workload_command",
}


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name, each imported from its module on first use."""

    def __init__(self, targets: dict[str, str]) -> None:
        self._targets = dict(targets)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            self._loaded[name] = load(self._targets[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._targets[name] = ""
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._targets[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)


@click.group(cls=TracedocGroup, commands=LazyCommands(_COMMANDS),
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracedoc")
@click.option("--debug", is_flag=True,
              help="Show the traceback of an error, not only its one-line message (also TRACEDOC_DEBUG=1).")
def cli(debug: bool) -> None:
    """tracedoc: a doctor for GPU profiling traces.

    Reads Nsight Systems reports and exports, Nsight Compute reports, PyTorch profiler traces (one file or every
    rank of a job), NCCL flight-recorder dumps after a hang and GPU health samples, and tells you what is slow,
    where, how much it costs and how to fix it.
    """
