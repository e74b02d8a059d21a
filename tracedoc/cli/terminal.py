"""What the commands draw with Rich: consoles on standard output whose closed pipe keeps the exit codes' meaning,
and tables. Imported only where something is drawn: a report written as JSON, Markdown or HTML imports no Rich
(tracedoc.cli.progress says when its status line is drawn)."""

from __future__ import annotations

from typing import Any

from rich.console import Console


class OutputConsole(Console):
    """A console on stdout whose closed pipe (`| head`) is a BrokenPipeError for the command's error handling
    (exit 141, cli.errors), not Rich's own exit with code 1, which means a finding here."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def table_console(**options: Any) -> Console:
    """A console for tables on stdout; piped, it never wraps or cuts a row (a table is only as wide as its text)."""
    console = OutputConsole(highlight=False, **options)
    if not console.is_terminal:
        console.width = 100_000
    return console
