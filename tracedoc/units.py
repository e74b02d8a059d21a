"""How numbers are written for people: durations in the unit that reads best."""


def fmt_ms(value: float) -> str:
    """A duration in ms, readable at a glance: 1234.5 -> '1,234.5 ms', 0.0123 -> '12.3 µs'."""
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:,.1f} ms"
    return f"{value * 1000:,.1f} µs"
