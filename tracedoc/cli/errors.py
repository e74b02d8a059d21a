"""Turning failures into one-line messages and exit code 2."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
import duckdb

from tracedoc.errors import TracedocError, first_line

F = TypeVar("F", bound=Callable[..., Any])


class BadInput(click.ClickException):
    """Bad input or usage: one line on stderr, exit code 2."""

    exit_code = 2


def one_line_errors(func: F) -> F:
    """Report tracedoc, database and OS errors as one line with exit code 2 (TRACEDOC_DEBUG=1 shows tracebacks)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (TracedocError, duckdb.Error, OSError, MemoryError, UnicodeDecodeError) as exc:
            if os.environ.get("TRACEDOC_DEBUG"):
                raise
            message = first_line(exc)
            raise BadInput(message) from None

    return wrapper  # type: ignore[return-value]
