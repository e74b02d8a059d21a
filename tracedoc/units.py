"""How numbers are written for people (durations in the unit that reads best, measured values in reports) and read
from them (byte counts)."""

import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from tracedoc.errors import TracedocError
from tracedoc.measures import (
    BYTES,
    CELSIUS,
    COUNT,
    FLOP,
    GBPS,
    MHZ,
    MS,
    NS,
    NUMBER,
    PCT,
    TFLOPS,
    TIME_NS,
    US,
    WATTS,
    Measure,
)

_SIZE = re.compile(r"([0-9]{1,20})\s*([KMGT]i?B?)?", re.IGNORECASE)
_UNIT_TAIL = re.compile(r"(?<=[0-9]) ?[^0-9,.]+$")  # what follows a written number: ' ms', '%'
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


def fmt_us(value: float) -> str:
    """A duration in µs, written as ``fmt_ms`` writes one: 12.3 -> '12.3 µs', 4500 -> '4.5 ms'."""
    return fmt_ms(value / 1000)


def fmt_pct(value: float, digits: int = 1) -> str:
    """A share in %: 12.345 -> '12.3%'."""
    return f"{fmt_number(value, digits)}%"


def fmt_whole(value: float) -> str:
    """A count, whole and grouped: 1204.0 -> '1,204'."""
    return f"{round(value):,}"


def fmt_number(value: float, digits: int = 1) -> str:
    """A plain number with its digits grouped: 1234.56 -> '1,234.6'."""
    return f"{float(value):,.{digits}f}"


def fmt_flop(value: float) -> str:
    """An amount of work in the prefix that reads best: 1.2e13 -> '12.00 TFLOP'."""
    return _prefixed(value, "FLOP")


def _prefixed(value: float, unit: str) -> str:
    """A decimal amount with its SI prefix: 4.2e9 B -> '4.20 GB'."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {prefix}{unit}"
    return f"{value:,.0f} {unit}"


class UnitFormat(NamedTuple):
    """How numbers of one unit are written: ``text`` with the unit (a sentence, or a cell under a header that
    names no unit), and in a table whose header names the unit (``symbol``): scaled by ``scale`` to it, with
    ``digits`` decimals unless the table asks for more or fewer."""

    text: Callable[[float], str]
    symbol: str
    scale: float = 1.0
    digits: int = 1
    scales_itself: bool = False  # ``text`` picks the unit's size itself (µs or ms, KiB or GiB, GFLOP or TFLOP)


def _with(symbol: str, digits: int) -> Callable[[float], str]:
    return lambda value: f"{fmt_number(value, digits)} {symbol}"


# Each unit of tracedoc.measures, written one way. Bytes in a table are MiB (memory sizes); FLOPs are TFLOP.
UNIT_FORMATS: dict[str, UnitFormat] = {
    MS.unit: UnitFormat(fmt_ms, "ms", digits=2, scales_itself=True),
    US.unit: UnitFormat(fmt_us, "µs", scales_itself=True),
    NS.unit: UnitFormat(lambda value: fmt_ms(value / 1e6), "ns", digits=0, scales_itself=True),
    TIME_NS.unit: UnitFormat(lambda value: f"{fmt_number(value / 1e6, 3)} ms", "ms", 1e-6, 3),
    PCT.unit: UnitFormat(fmt_pct, "%"),
    BYTES.unit: UnitFormat(fmt_bytes, "MiB", 1 / (1 << 20), scales_itself=True),
    COUNT.unit: UnitFormat(fmt_whole, "", digits=0),
    NUMBER.unit: UnitFormat(fmt_number, ""),
    MHZ.unit: UnitFormat(_with("MHz", 0), "MHz", digits=0),
    WATTS.unit: UnitFormat(_with("W", 0), "W", digits=0),
    CELSIUS.unit: UnitFormat(_with("°C", 0), "°C", digits=0),
    GBPS.unit: UnitFormat(_with("GB/s", 0), "GB/s", digits=0),
    TFLOPS.unit: UnitFormat(_with("TFLOP/s", 1), "TFLOP/s"),
    FLOP.unit: UnitFormat(fmt_flop, "TFLOP", 1e-12, 3, scales_itself=True),
}


def fmt_measure(value: float, measure: Measure) -> str:
    """A value as people read it, with the unit its column declares (``UNIT_FORMATS``): a time as ``fmt_ms``,
    bytes as ``fmt_bytes``, a share as '12.3%', a count as '1,204'."""
    return UNIT_FORMATS[measure.unit].text(value)


def fmt_signed(change: float, measure: Measure) -> str:
    """A change of a measure with its sign (a true minus): '+1.2 ms', '−32.0 MiB'; '±0' for none (for a time, under
    half a µs)."""
    if change == 0 or abs(change) < _NO_CHANGE.get(measure.unit, 0.0):
        return "±0"
    return ("+" if change > 0 else "−") + fmt_measure(abs(change), measure)


_NO_CHANGE = {MS.unit: 5e-4}


def table_cell(value: float, measure: Measure) -> str:
    """A value in a table of mixed columns: with its unit where the unit picks its own size (a time, bytes: the
    header names none, ``table_header``), else the number alone in the unit the header names."""
    return fmt_measure(value, measure) if UNIT_FORMATS[measure.unit].scales_itself else cell_format(measure)(value)


def table_header(label: str, measure: Measure) -> str:
    """The header of a ``table_cell`` column: 'time', 'SM %'."""
    unit = UNIT_FORMATS[measure.unit]
    return label if unit.scales_itself or not unit.symbol else f"{label} {unit.symbol}"


def fmt_fixed(value: float, measure: Measure, digits: int) -> str:
    """A value in its unit's table scale with ``digits`` decimals and the unit, where figures side by side must keep
    their resolution (a step with and without the profiler): '65.23 ms', '0.04 ms', '37.3%'."""
    unit = UNIT_FORMATS[measure.unit]
    text = cell_format(measure, digits)(float(value))
    return f"{text}%" if measure.unit == PCT.unit else f"{text} {unit.symbol}".rstrip()


def fmt_range(low: float, high: float, measure: Measure, digits: int | None = None) -> str:
    """A range of values of one measure, its unit written once where both ends have the same: '64.1–65.5 ms',
    '37.2–38.0%', '850.0 µs–1.2 ms'; with ``digits``, both ends as ``fmt_fixed`` writes them ('64.08–65.48 ms')."""
    def write(value: float) -> str:
        return fmt_measure(value, measure) if digits is None else fmt_fixed(value, measure, digits)

    first, last = write(low), write(high)
    unit = _UNIT_TAIL.search(last)
    tail = unit.group(0) if unit else ""
    return f"{first.removesuffix(tail) if tail and first.endswith(tail) else first}–{last}"


def cell_format(measure: Measure, digits: int | None = None) -> Callable[[Any], str]:
    """How a table column whose header names its declared unit (``unit_symbol``) writes a value: the number alone,
    scaled to that unit, with the unit's decimals or ``digits`` ('' for a missing value; a whole count of an
    unscaled unit as it is)."""
    unit = UNIT_FORMATS[measure.unit]
    decimals = unit.digits if digits is None else digits

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, int) and unit.scale == 1.0:
            return f"{value:,}"
        return fmt_number(float(value) * unit.scale, decimals)

    return cell


def unit_symbol(measure: Measure) -> str:
    """The unit a table's header names for a column of this measure ('ms', '%', 'MiB'; '' for a count)."""
    return UNIT_FORMATS[measure.unit].symbol


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
