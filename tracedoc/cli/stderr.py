"""What a command says on standard error besides its errors: its progress while it reads and analyses, and lines
such as where a report was written. On a terminal Rich draws them (a status line; lines wrapped to its width).
Elsewhere Rich would draw no status (it is transient, and its control codes are dropped off a terminal), so Rich
is not imported for one there: about 35 ms of a run that writes JSON to a pipe or a file; a line is written as it
is, one line whatever its length."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

import click

from tracedoc.words.sanitize import one_line

# What can make Rich take a stream for a terminal, or draw in a notebook, whatever the stream: where one is set,
# Rich is imported and decides.
_RICH_DECIDES_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE")


def may_be_drawn(stream: TextIO) -> bool:
    """False where Rich would certainly see no terminal on ``stream`` (not a TTY, and no environment variable or
    notebook that could tell Rich otherwise)."""
    if any(name in os.environ for name in _RICH_DECIDES_ENV) or "IPython" in sys.modules:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream: as Rich takes them, no terminal
        return False


@contextlib.contextmanager
def progress(message: str) -> Iterator[Callable[[str], None]]:
    """A status line on standard error saying ``message``, for as long as the block runs; the block is given a
    function that says the next step (trace text in it made one plain line)."""
    if not may_be_drawn(sys.stderr):
        yield lambda step: None
        return
    from rich.console import Console
    from rich.text import Text

    with Console(stderr=True).status(message) as status:
        yield lambda step: status.update(Text(one_line(step)))


def say(lines: Sequence[str]) -> None:
    """Each of ``lines`` on standard error as one plain line (text from a trace or a path in it made one line, never
    read as Rich's markup)."""
    if not lines:
        return
    if not may_be_drawn(sys.stderr):
        for line in lines:
            click.echo(one_line(line), err=True)
        return
    from rich.console import Console
    from rich.text import Text

    err = Console(stderr=True)
    for line in lines:
        err.print(Text(one_line(line)), highlight=False)
