"""Nsight Compute CSV exports (``ncu --import R --csv --page raw``) into launches.

The raw page has a header row (fixed columns such as "ID" and "Kernel Name", then one column per metric), a row
of units, and one row per profiled launch. Values are printed for the exporting machine's locale (thousands
separators, a decimal comma on some systems) and, without ``--print-units base``, scaled per column (``Gbyte``,
``us``, ``sector/ns``): both are undone here so the store holds the same base units as a ``.ncu-rep`` gives.
Columns are located by name, never by position (NVTX options and ncu versions add or rename fixed columns).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from pathlib import Path

from tracedoc.errors import InputError
from tracedoc.ingest.ncu_model import Launch, Metric, short_name

_HEADER_START = '"ID","Process ID","Process Name","Host Name"'
_RAW_HINT = "export the raw page: ncu --import REPORT.ncu-rep --csv --page raw --print-units base > REPORT.csv"
_MISSING = {"", "n/a", "no data", "N/A"}
# Columns every raw page has besides the metrics (older ncu versions print "Kernel Time" instead of some).
_FIXED = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC"}
_METRIC_NAME = re.compile(r"^[A-Za-z_][\w.:]*$")  # NVTX columns have spaces and slashes
_DIM = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
_DECIMAL_COMMA = re.compile(r"^-?[\d.]*\d,\d{1,2}$")
_DECIMAL_POINT = re.compile(r"^-?[\d,]*\d\.\d{1,2}$")

# Unit scaling ncu applies without --print-units base, to the base units a .ncu-rep stores.
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_IN_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
               "s": 1e9, "second": 1e9}
_SCALED = re.compile(r"^([KMGTP]?)(byte|hz)$")


def is_export(head: bytes) -> bool:
    """True when the first bytes are an ncu CSV export (any page), possibly after ``==PROF==`` log lines."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    for line in text.splitlines()[:50]:
        if line.startswith("=="):
            continue
        return line.startswith(_HEADER_START) and '"Kernel Name"' in line
    return False


def read(path: Path) -> list[Launch]:
    """Every launch of a raw-page export with its metrics in base units."""
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as f:
            rows = csv.reader(_without_log_lines(f))
            header = next(rows, None)
            if header is None:
                raise InputError(f"{path}: empty ncu CSV export")
            header[0] = header[0].lstrip("\ufeff")
            if "Metric Name" in header and "Section Name" in header:
                raise InputError(f"{path}: this is ncu's details page, which tracedoc does not read; {_RAW_HINT}")
            body = [r for r in rows if r]
    except csv.Error as exc:
        raise InputError(f"{path}: malformed ncu CSV ({exc})") from None
    if "ID" not in header or "Kernel Name" not in header:
        raise InputError(f"{path}: not an ncu raw-page CSV (no ID and Kernel Name columns); {_RAW_HINT}")
    units = body.pop(0) if body and body[0] and body[0][header.index("ID")] == "" else [""] * len(header)
    if not body:
        raise InputError(f"{path}: the ncu export holds no profiled kernel")
    if len(units) != len(header):
        raise InputError(f"{path}: truncated or malformed ncu CSV (its units row has {len(units)} of "
                         f"{len(header)} columns)")
    for i, row in enumerate(body, start=3):
        if len(row) != len(header):
            raise InputError(f"{path}: truncated or malformed ncu CSV (row {i} has {len(row)} of "
                             f"{len(header)} columns)")
    columns = {name: i for i, name in enumerate(header)}
    metric_cols = [(i, name, *_base_unit(units[i])) for i, name in enumerate(header)
                   if name not in _FIXED and _METRIC_NAME.match(name)]
    decimal_comma = _uses_decimal_comma(body, [i for i, _, unit, _ in metric_cols if unit == "%"])
    return [_launch(path, row, columns, metric_cols, decimal_comma) for row in body]


def _without_log_lines(lines: Iterator[str]) -> Iterator[str]:
    """The CSV lines, without the ``==PROF==``/``==WARNING==`` lines ncu mixes in when profiling live."""
    for line in lines:
        if not line.startswith("=="):
            yield line


def _launch(path: Path, row: list[str], columns: dict[str, int], metric_cols: list[tuple[int, str, str, float]],
            decimal_comma: bool) -> Launch:
    def field(name: str) -> str | None:
        i = columns.get(name)
        return row[i].strip() if i is not None else None

    launch_id = _int(field("ID"))
    if launch_id is None:
        raise InputError(f"{path}: ncu CSV row with a non-numeric ID ({field('ID')!r})")
    metrics = []
    for i, name, unit, factor in metric_cols:
        raw = row[i].strip()
        if raw in _MISSING:
            continue
        value = _number(raw, decimal_comma)
        if value is None and raw.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
            metrics.append(Metric(name, None, "", raw[:1000]))
        else:
            metrics.append(Metric(name, None if value is None else value * factor, unit, None))
    demangled = field("Kernel Name") or ""
    return Launch(launch_id=launch_id, name=short_name(demangled), demangled_name=demangled,
                  device=_int(field("Device")), compute_capability=field("CC"),
                  context=_int(field("Context")), stream=_int(field("Stream")),
                  grid=_dim(field("Grid Size")), block=_dim(field("Block Size")), metrics=metrics, rules=[])


def _base_unit(unit: str) -> tuple[str, float]:
    """The base unit of a column's printed unit and the factor that converts its values, e.g. Gbyte/s → byte/s."""
    num, sep, den = unit.strip().partition("/")
    factor = 1.0
    if num in _TIME_IN_NS:
        factor, num = _TIME_IN_NS[num], "ns"
    elif m := _SCALED.match(num):
        factor, num = _PREFIX[m.group(1)], m.group(2)
    if sep:
        if den in _TIME_IN_NS:
            factor, den = factor * 1e9 / _TIME_IN_NS[den], "s"
        elif m := _SCALED.match(den):
            factor, den = factor / _PREFIX[m.group(1)], m.group(2)
    return (f"{num}/{den}" if sep else num), factor


def _uses_decimal_comma(body: list[list[str]], percent_cols: list[int]) -> bool:
    """Whether numbers use a decimal comma (European locales), judged from the percentage columns."""
    comma = point = False
    for row in body:
        for i in percent_cols:
            v = row[i].strip()
            comma = comma or bool(_DECIMAL_COMMA.match(v))
            point = point or bool(_DECIMAL_POINT.match(v))
    return comma and not point


def _number(raw: str, decimal_comma: bool) -> float | None:
    """A printed number as float; None for text, NaN and infinity."""
    text = raw.replace(".", "").replace(",", ".") if decimal_comma else raw.replace(",", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _dim(raw: str | None) -> str | None:
    """'(x, y, z)' as 'x,y,z'; None when absent or all zero (ncu's placeholder for a launch it could not read)."""
    m = _DIM.match(raw or "")
    if not m or all(g == "0" for g in m.groups()):
        return None
    return ",".join(m.groups())


def _int(raw: str | None) -> int | None:
    try:
        return int((raw or "").replace(",", ""))
    except ValueError:
        return None
