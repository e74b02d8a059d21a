"""The error contract at the command line: bad input is one line and exit code 2, an unexpected failure one line
and exit code 3, Ctrl-C one line and exit code 130; `--debug` (or TRACEDOC_DEBUG=1) adds the traceback."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tracedoc import interrupts
from tracedoc.errors import TracedocError, error_chain, first_line
from tracedoc.words.sanitize import one_line

F = TypeVar("F", bound=Callable[..., Any])

INTERNAL_ERROR = 3
INTERRUPTED = 130
OUTPUT_CLOSED = 141  # 128 + SIGPIPE, as a shell reports a command whose reader went away

# What a query cancelled by Ctrl-C raises when DuckDB, not Python, notices the signal.
_DUCKDB_INTERRUPTED = "Query interrupted"


class BadInput(click.ClickException):
    """Bad input or usage: one line on stderr, exit code 2. The message often quotes a file name or a library's
    error about the file's content: control characters and escape sequences are taken out (words.sanitize)."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def debug_enabled(ctx: click.Context | None = None) -> bool:
    """True when the user asked for tracebacks: `tracedoc --debug …`, or TRACEDOC_DEBUG set (to anything but 0)."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().params.get("debug"):
        return True
    return os.environ.get("TRACEDOC_DEBUG", "") not in ("", "0")


def _duckdb_error(name: str) -> tuple[type[BaseException], ...]:
    """DuckDB's error class ``name`` when DuckDB is imported, else none: nothing can have raised one then. So that a
    run that never opens a store (a report read back from the cache) does not import DuckDB to classify errors."""
    duckdb = sys.modules.get("_duckdb") or sys.modules.get("duckdb")
    return () if duckdb is None else (getattr(duckdb, name),)


def is_interrupt(exc: BaseException) -> bool:
    """True for Ctrl-C, however it surfaced: KeyboardInterrupt, DuckDB's InterruptException or its
    'Query interrupted', also when wrapped in another error on the way up; and any error once Ctrl-C came during
    the command (``tracedoc.interrupts``)."""
    if interrupts.seen():  # Ctrl-C came: whatever a library made of it (DuckDB: 'Unknown error')
        return True
    kinds: tuple[type[BaseException], ...] = (KeyboardInterrupt, *_duckdb_error("InterruptException"))
    return any(isinstance(e, kinds)
               or (isinstance(e, RuntimeError) and str(e).startswith(_DUCKDB_INTERRUPTED)) for e in error_chain(exc))


def is_input_error(exc: BaseException) -> bool:
    """True for what is the input's fault or the machine's (one line, exit 2): tracedoc's own errors, DuckDB's
    (about a file's content), the operating system's, memory, undecodable text."""
    return isinstance(exc, (TracedocError, OSError, MemoryError, UnicodeDecodeError, *_duckdb_error("Error")))


def one_line_errors(func: F) -> F:
    """Report tracedoc, database and OS errors as one line with exit code 2 (with --debug, after the traceback)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return func(*args, **kwargs)
            finally:  # what is still buffered goes out here, so that a closed pipe is seen by this handler
                if sys.stdout is not None:  # None: started with its output closed
                    sys.stdout.flush()
        except BrokenPipeError:  # the reader of our output stopped reading (`| head`): not an error of the input
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
            raise click.exceptions.Exit(OUTPUT_CLOSED) from None
        except Exception as exc:
            if not is_input_error(exc) or is_interrupt(exc):
                raise
            if debug_enabled():
                traceback.print_exception(exc, file=sys.stderr)
            raise BadInput(first_line(exc)) from None

    return wrapper  # type: ignore[return-value]


class UsageLine(click.ClickException):
    """A usage error (unknown option or command, missing argument, bad value) as one line on stderr, exit code 2:
    click's own form takes three (the usage, a hint, the error)."""

    exit_code = 2

    def __init__(self, error: click.UsageError) -> None:
        where = f" (see {error.ctx.command_path} --help)" if error.ctx is not None else ""
        super().__init__(one_line(error.format_message()) + where)


# click (8.2 and later) asks for help this way when a group is given no command: that stays the help it shows.
_SHOWS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _one_line_usage(error: click.UsageError) -> click.ClickException:
    return error if isinstance(error, _SHOWS_HELP) else UsageLine(error)


class TracedocGroup(click.Group):
    """The `tracedoc` group: every command's usage errors, unexpected failures and Ctrl-C end here, whatever the
    command."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Parse the group's own options: a usage error is one line, Ctrl-C one line and exit 130."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as error:
            raise _one_line_usage(error) from None
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            raise _one_line_usage(error) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BaseException as exc:
            if is_interrupt(exc):
                click.echo("interrupted", err=True)
                raise click.exceptions.Exit(INTERRUPTED) from None
            if not isinstance(exc, Exception):
                raise
            if debug_enabled(ctx):
                traceback.print_exception(exc, file=sys.stderr)
            click.echo(f"internal error: {type(exc).__name__}: {one_line(first_line(exc))} (run with --debug for "
                       "the traceback)", err=True)
            raise click.exceptions.Exit(INTERNAL_ERROR) from None
