"""The errors tracedoc reports to users as one line (exit code 2), never as a traceback."""

import re
from collections.abc import Iterator

_MAX_QUOTE = 1000  # characters of a one-line error quoted from an exception (a 5,000-digit number is noise)
_TRACEBACK = re.compile(r"\s*(Detail:\s*)?(Python exception:\s*)?Traceback \(most recent call last\):?.*$")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its class name when the message is empty): what one-line
    errors quote of a library's failure. A traceback header a library appended (DuckDB quoting a Python error
    raised in an Arrow stream) is dropped, and a very long line is cut."""
    text = str(exc).strip()
    line = _TRACEBACK.sub("", text.splitlines()[0]).strip() if text else ""
    if len(line) > _MAX_QUOTE:
        line = line[:_MAX_QUOTE] + "…"
    return line or type(exc).__name__


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then those it was raised from or while handling (once each): what a wrapped failure was."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


class TracedocError(Exception):
    """Base class: a problem the user can act on, shown as a one-line message."""


class InputError(TracedocError):
    """The input is missing, unreadable, corrupt, empty or not a format tracedoc knows."""


class RuleError(TracedocError):
    """A rule file is malformed or its SQL does not run against the store."""
