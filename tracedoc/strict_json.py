"""JSON from untrusted files, parsed with the standard library but stricter than it; and JSON written as JSON is.

Python's json module accepts what JSON does not (``NaN``, ``Infinity``), turns a number too large for a float
(``1e400``) into infinity, and raises RecursionError (not a ValueError) on deeply nested arrays. Every one of
those reaches code that expects finite numbers and a ValueError on bad input, so here each is a ``BadJson``:
a ValueError, which callers already turn into their one-line InputError. It also writes ``NaN`` and ``Infinity``
by default, which no strict reader (tracedoc's own included) takes back: ``dumps`` refuses them, naming where.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

# Integers beyond 64 bits fit no column of the store (unsigned 64-bit values, such as NVML counters, do).
_INT_LIMIT = 1 << 64


class BadJson(ValueError):
    """Well-formed JSON that tracedoc still refuses: a non-finite or out-of-range number, or nesting too deep."""


def loads(data: bytes | str) -> Any:
    """Parse ``data`` like json.loads; BadJson for NaN, ±Infinity, numbers out of range and runaway nesting.

    Syntax errors stay json.JSONDecodeError (a ValueError too) and bad UTF-8 UnicodeDecodeError.
    """
    try:
        return json.loads(data, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise BadJson("nested too deeply") from None


def _constant(name: str) -> Any:
    raise BadJson(f"non-finite number {name}")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJson(f"number out of range ({text[:40]})")
    return value


def _int(text: str) -> int:
    if len(text) > 21:  # more digits than any 64-bit integer (and than int() converts without a limit)
        raise BadJson(f"integer out of range ({text[:40]}…)")
    value = int(text)
    if not -_INT_LIMIT < value < _INT_LIMIT:
        raise BadJson(f"integer out of range ({text})")
    return value


def plain_number(value: Any) -> Any:
    """A number a store returns as a Decimal or a numpy scalar, as the Python int or float JSON writes (the
    ``default`` of the report's and the diff's JSON)."""
    if hasattr(value, "item"):
        return value.item()
    return float(value)


def dumps(value: Any, default: Callable[[Any], Any] | None = None, **options: Any) -> str:
    """``value`` as JSON like json.dumps, but BadJson when a NaN or ±Infinity lies anywhere in it (the message says
    where): JSON has no such numbers."""
    try:
        return json.dumps(value, allow_nan=False, default=default, **options)
    except ValueError as exc:
        if "JSON compliant" not in str(exc):
            raise
        raise BadJson(f"not written as JSON: {_non_finite_at(value, default)} is not a finite number") from None


def _non_finite_at(value: Any, default: Callable[[Any], Any] | None) -> str:
    """Where the first non-finite float lies in ``value``, e.g. 'findings[0].impact_ms' (values json.dumps would
    hand to ``default`` are converted the same way)."""
    stack: list[tuple[str, Any]] = [("the value", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict):
            stack.extend((f"{where}.{key}" if where != "the value" else str(key), v)
                         for key, v in reversed(list(item.items())))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        elif default is not None and not isinstance(item, str | int | float | bool | type(None)):
            stack.append((where, default(item)))
    return "a value"
