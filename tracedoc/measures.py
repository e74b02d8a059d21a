"""What a number of the report measures: its unit, and which way is better (its polarity), declared with the column
that holds it (``report_tables``), as Perfetto's trace summary declares a value column's unit and polarity. The
check of a saved report, the renderers and the diff read the declaration; none of them guesses from a column's
name."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Better = Literal["lower", "higher"]


@dataclass(frozen=True)
class Measure:
    """A column's ``unit`` (one of UNITS) and ``better``: 'lower' or 'higher' when a change of it is an improvement
    one way (a step's time, a GPU's busy share), None when neither is (a count of launches, a size)."""

    unit: str
    better: Better | None = None

    def improved(self, change: float) -> bool | None:
        """Whether a change of this much is for the better (None: no polarity, or no change)."""
        if self.better is None or change == 0:
            return None
        return (change < 0) == (self.better == "lower")


# The units, each a measure without polarity. A duration in ms, µs or ns; TIME_NS a point in time (ns since the
# trace clock's origin); PCT a share in %; COUNT a number of things; NUMBER a plain number (a ratio, waves, an
# arithmetic intensity).
MS, US, NS, TIME_NS = Measure("ms"), Measure("us"), Measure("ns"), Measure("time_ns")
PCT, BYTES, COUNT, NUMBER = Measure("pct"), Measure("bytes"), Measure("count"), Measure("number")
MHZ, WATTS, CELSIUS = Measure("mhz"), Measure("w"), Measure("c")
GBPS, TFLOPS, FLOP = Measure("gb_per_s"), Measure("tflop_per_s"), Measure("flop")
UNITS: frozenset[str] = frozenset(m.unit for m in (MS, US, NS, TIME_NS, PCT, BYTES, COUNT, NUMBER, MHZ, WATTS,
                                                   CELSIUS, GBPS, TFLOPS, FLOP))


def lower(measure: Measure) -> Measure:
    """The measure, lower being better (a time, a waste)."""
    return replace(measure, better="lower")


def higher(measure: Measure) -> Measure:
    """The measure, higher being better (a share of peak, a throughput)."""
    return replace(measure, better="higher")
