"""How numbers are written for people (durations in the unit that reads best, measured values in reports) and read
from them (byte counts)."""

import math
import re
from typing import Any

from tracedoc.errors import TracedocError
from tracedoc.measures import BYTES, COUNT, MS, PCT, Measure

_SIZE = re.compile(r"([0-9]{1,20})\s*([KMGT]i?B?)?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def fmt_ms(value: float) -> str:
    """A duration in ms, readable at a glance: 1234.5 -> '1,234.5 ms', 0.0123 -> '12.3 µs'."""
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:,.1f} ms"
    return f"{value * 1000:,.1f} µs"


def fmt_bytes(value: float) -> str:
    """A byte count readable at a glance, in powers of 1024: 33554432 -> '32.0 MiB'."""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"


def fmt_measure(value: float, measure: Measure) -> str:
    """A value as people read it, by the unit its column declares: a time as ``fmt_ms``, bytes as ``fmt_bytes``,
    a share as '12.3%', a count as '1,204'; any other number with its digits grouped and 1 decimal."""
    if measure.unit == MS.unit:
        return fmt_ms(value)
    if measure.unit == BYTES.unit:
        return fmt_bytes(value)
    if measure.unit == PCT.unit:
        return f"{value:.1f}%"
    if measure.unit == COUNT.unit:
        return f"{int(value):,}"
    return f"{value:,.1f}"


def fmt_count(value: Any, one: str, many: str) -> str:
    """A count with its noun, singular or plural: '1 launch', '1,204 launches'."""
    return f"{value:,} {one if value == 1 else many}"


def report_number(value: Any) -> Any:
    """A measured value as reports carry it: floats (and DuckDB's decimals) to 3 decimals, and a number that is not
    finite (NaN, ±inf from a corrupt or hostile input) as None, since JSON has no way to write it; other values as
    they are."""
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, float) or hasattr(value, "as_integer_ratio"):
        number = float(value)
        return round(number, 3) if math.isfinite(number) else None
    return value


def parse_size(text: str, what: str) -> int:
    """A byte count such as ``8000000000``, ``512M`` or ``8GiB`` (powers of 1024); TracedocError otherwise."""
    m = _SIZE.fullmatch(text.strip())
    if m is None or int(m.group(1)) == 0:
        raise TracedocError(f"{what}={text[:40]!r}: not a positive byte count (e.g. 8000000000, 512M or 8GiB)")
    return int(m.group(1)) * _UNITS[(m.group(2) or "")[:1].upper()]
