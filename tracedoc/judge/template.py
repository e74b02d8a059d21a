"""Rule message templates: ``{column}`` placeholders filled from the rule's row, sentences that adapt to what the
trace knows.

A template may hold optional parts in double brackets: ``[[ Of the host's time in them, {host_cause_pct:.0f}% is
{host_cause_text}.]]`` is left out whole when any field inside it is NULL (a trace without long host gaps has no host
cause to name); parts do not nest. ``{x_ns:time}`` writes a duration given in ns readably ('1.2 ms'), ``{x:bytes}``
a byte count ('32.0 MiB'), ``{n:plural launch|launches}`` a count with its noun ('1 launch', '1,204 launches'). A
value that ends a sentence before the template's own full stop leaves one stop, not two. A NULL field outside an
optional part reads 'unknown'; rules put every field a trace may lack inside an optional part, so that never
shows.
"""

from __future__ import annotations

import numbers
import re
import string
from collections.abc import Mapping
from typing import Any

from tracedoc.units import fmt_bytes, fmt_count, fmt_ms

_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)
# Two full stops ending a sentence (a value's own, then the template's), never an ellipsis or a '../' path.
_DOUBLE_STOP = re.compile(r"(?<!\.)\.\.(?=\s|$)")
UNKNOWN = "unknown"
PLURAL = "plural "


class TemplateError(ValueError):
    """A template that cannot be filled (an unbalanced brace, a bad format spec)."""


def fill(template: str, values: Mapping[str, Any]) -> str:
    """The template with its optional parts kept or dropped and its fields filled from ``values``.

    Each part is formatted once, on its own, so braces in the values (a kernel named ``f<{x}>``) stay as they are.
    """
    pieces = _OPTIONAL.split(template)  # even indexes: always shown; odd: optional parts
    if any("[[" in piece or "]]" in piece for piece in pieces):
        raise TemplateError("optional parts [[...]] cannot nest, and each [[ needs its ]]")
    try:
        out = [_FORMATTER.vformat(piece, (), values) for i, piece in enumerate(pieces)
               if i % 2 == 0 or all(values.get(name) is not None for name in fields(piece))]
    except (ValueError, IndexError) as exc:
        raise TemplateError(str(exc)) from None
    text = _squeeze("".join(out)) if len(pieces) > 1 else "".join(out)
    return _DOUBLE_STOP.sub(".", text)


def fields(template: str) -> set[str]:
    """The field names a template (or part of one) refers to."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(str(exc)) from None
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in parsed if name}


def _squeeze(text: str) -> str:
    """Spaces left doubled (or before a full stop) where an optional part was dropped."""
    return re.sub(r" +([.,;)])", r"\1", re.sub(r"  +", " ", text)).strip()


class _Formatter(string.Formatter):
    """str.format that reads NULL as 'unknown', writes {x:time} as a duration, {n:plural one|many} as a count with
    its noun, and never fails on a spec."""

    def get_value(self, key: int | str, args: Any, kwargs: Any) -> Any:
        return kwargs.get(key) if isinstance(key, str) else None

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            return UNKNOWN
        if format_spec == "time":
            return fmt_ms(float(value) / 1e6)
        if format_spec == "bytes":
            return fmt_bytes(float(value))
        if format_spec.startswith(PLURAL) and isinstance(value, numbers.Number) and not isinstance(value, bool):
            one, _, many = format_spec[len(PLURAL):].partition("|")
            return fmt_count(value, one, many or one)
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


_FORMATTER = _Formatter()
