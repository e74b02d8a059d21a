"""How numbers are written for people: durations in the unit that reads best, and measured values in reports."""

import math
from typing import Any


def fmt_ms(value: float) -> str:
    """A duration in ms, readable at a glance: 1234.5 -> '1,234.5 ms', 0.0123 -> '12.3 µs'."""
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:,.1f} ms"
    return f"{value * 1000:,.1f} µs"


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
