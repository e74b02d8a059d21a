"""Nsight Compute CSV exports (``ncu --import R --csv --page raw``) into launch tables.

The raw page has a header row (fixed columns such as "ID" and "Kernel Name", then one column per metric), a row
of units, and one row per profiled launch. Values are printed for the exporting machine's locale (thousands
separators, a decimal comma on some systems) and, without ``--print-units base``, scaled per column (``Gbyte``,
``us``, ``sector/ns``): both are undone here so the store holds the same base units as a ``.ncu-rep`` gives.
Columns are located by name, never by position (NVTX options and ncu versions add or rename fixed columns).

An export can hold millions of launch × metric values in a few MB of gzip, so it is read columnar: a cleaned copy
(valid UTF-8, without ncu's ``==PROF==`` log lines) is parsed by Arrow's CSV reader into string columns, and each
metric column is converted with Arrow's compute functions into rows of (launch, metric, value, unit, text), handed
to the writer in batches. No Python object is made per value; memory stays a few times the export's size.
"""

from __future__ import annotations

import codecs
import csv
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from tracedoc.errors import InputError, first_line
from tracedoc.ingest.arrow_values import array, scalar
from tracedoc.ingest.ncu.ncu_model import KERNEL_SCHEMA, LaunchTables, check_fixed, short_name
from tracedoc.ingest.near_misses import NCU_HEADER_START, RAW_HINT

_HEADER_LINE = re.compile("^" + re.escape(NCU_HEADER_START), re.MULTILINE)
_HEAD_LINES = 2000  # of the first bytes, the lines in which the header is looked for
_MISSING = {"", "n/a", "no data", "N/A"}
# Columns every raw page has besides the metrics (older ncu versions print "Kernel Time" instead of some).
_FIXED = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
          "Block Size", "Grid Size", "Device", "CC"}
_METRIC_NAME = re.compile(r"^[A-Za-z_][\w.:]*$")  # NVTX columns have spaces and slashes
_DIM = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
_DECIMAL_COMMA = re.compile(r"^-?[\d.]*\d,\d{1,2}$")
_DECIMAL_POINT = re.compile(r"^-?[\d,]*\d\.\d{1,2}$")
_NUMBER = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"  # what float() reads, but nan and inf
_INTEGER = r"^[+-]?[0-9]+$"
_INT64_DIGITS = 18  # up to this many digits an integer surely fits 64 bits
_MAX_DIGITS = 4000  # of an integer converted exactly (Python refuses text of more than 4,300 digits)
_NON_FINITE = ["nan", "inf", "infinity"]
_NULL_TEXT = scalar(None, pa.string())
_RAGGED = re.compile(r"Expected (?P<expected>\d+) columns, got (?P<got>\d+)")  # Arrow's error
_LOG_LINES = re.compile(r"^==[^\n]*(?:\n|$)", re.MULTILINE)
_CHUNK = 4 << 20
_BLOCK = 8 << 20  # bytes Arrow's CSV reader parses at a time (a row must fit in one)
_BATCH_ROWS = 1 << 20  # metric rows handed to the writer at a time

# Unit scaling ncu applies without --print-units base, to the base units a .ncu-rep stores.
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_IN_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
               "s": 1e9, "second": 1e9}
_SCALED = re.compile(r"^([KMGTP]?)(byte|hz)$")


def is_export(head: bytes) -> bool:
    """True when the first bytes hold the header of ncu's raw page as CSV: at their start, or after what ncu and the
    profiled program print before it when it profiles live (``ncu --csv --page raw ./app > kernels.csv``). The
    details page and the per-kernel summary are not read (``near_misses`` names them)."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    for line in text.splitlines()[:_HEAD_LINES]:
        if line.startswith(NCU_HEADER_START):
            return '"Kernel Name"' in line and '"Metric Name"' not in line
    return False


def read(path: Path, workdir: Path) -> LaunchTables:
    """Every launch of a raw-page export with its metrics in base units, as tables (the metrics produced in
    batches as the writer takes them)."""
    clean, quotes = _cleaned(path, workdir)
    try:
        header, second = _first_rows(clean, path)
        _check_header(header, path)
        id_at = header.index("ID")
        if second is None and not _ends_a_line(clean):  # a header cut short, which Arrow cannot even skip
            raise InputError(f"{path}: truncated ncu CSV (it ends inside its header)")
        if second is not None and len(second) != len(header) and second[id_at:id_at + 1] == [""]:
            raise InputError(f"{path}: truncated or malformed ncu CSV (its units row "
                             f"{_width(len(second), len(header))})")
        table = _parse(clean, path, len(header))
        if quotes % 2:  # Arrow reads a quote left open at the end as a value cut short, without an error
            raise InputError(f"{path}: truncated or malformed ncu CSV (a quoted value is not closed)")
    finally:
        clean.unlink(missing_ok=True)
    cells = table.columns
    units = [""] * len(header)
    if table.num_rows and cells[id_at][0].as_py() == "":
        units = [c[0].as_py() for c in cells]
        cells = [c.slice(1) for c in cells]
    del table  # the columns go one by one once converted
    count = len(cells[0]) if cells else 0
    if not count:
        raise InputError(f"{path}: the ncu export holds no profiled kernel")
    metric_cols = [(i, name, *_base_unit(units[i])) for i, name in enumerate(header)
                   if name not in _FIXED and _METRIC_NAME.match(name)]
    decimal_comma = _uses_decimal_comma([cells[i] for i, _, unit, _ in metric_cols if unit == "%"])
    kernels = _kernels(path, cells, {name: i for i, name in enumerate(header)}, count)
    return LaunchTables(count, kernels, _metric_batches(kernels.column("launch_id").combine_chunks(), cells,
                                                        metric_cols, decimal_comma))


def _cleaned(path: Path, workdir: Path) -> tuple[Path, int]:
    """A copy of the export in valid UTF-8 (bytes that are not become U+FFFD), from its header on (before it, what
    ncu and the profiled program print when it profiles live) and without the ``==PROF==``/``==WARNING==`` lines
    ncu mixes in; NUL bytes are refused. Read in chunks.
    Also the count of its '"' characters: ncu quotes every value and doubles a quote inside one, so an odd count
    is a value whose closing quote is missing (a file cut inside its last value)."""
    out = workdir / f"ncu-export-{path.name[-60:]}.csv"
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = bytearray()
    first, header_seen = True, False
    quotes = 0
    with path.open("rb") as src, out.open("wb") as dst:
        while True:
            chunk = src.read(_CHUNK)
            pending += chunk
            cut = pending.rfind(b"\n") + 1 if chunk else len(pending)
            lines = bytes(pending[:cut])
            del pending[:cut]
            if b"\x00" in lines:
                out.unlink(missing_ok=True)
                raise InputError(f"{path}: malformed ncu CSV (line contains NUL)")
            text = decoder.decode(lines, final=not chunk)
            if first and text:
                text, first = text.lstrip("\ufeff"), False
            if not header_seen:
                header = _HEADER_LINE.search(text)
                text, header_seen = ("", False) if header is None else (text[header.start():], True)
            if text.startswith("==") or "\n==" in text:
                text = _LOG_LINES.sub("", text)
            quotes += text.count('"')
            dst.write(text.encode("utf-8"))
            if not chunk:
                return out, quotes


def _first_rows(clean: Path, path: Path) -> tuple[list[str], list[str] | None]:
    """The header row and the row after it (None when there is none), as the csv module reads them."""
    try:
        with clean.open(encoding="utf-8", newline="") as f:
            rows = (row for row in csv.reader(f) if row)
            header = next(rows, None)
            if header is None:
                raise InputError(f"{path}: empty ncu CSV export")
            return header, next(rows, None)
    except csv.Error as exc:
        raise InputError(f"{path}: malformed ncu CSV ({exc})") from None


def _check_header(header: list[str], path: Path) -> None:
    """Refuse CSV that is not a raw page."""
    if "ID" not in header or "Kernel Name" not in header:
        raise InputError(f"{path}: not an ncu raw-page CSV (no ID and Kernel Name columns); {RAW_HINT}")


def _parse(clean: Path, path: Path, width: int) -> pa.Table:
    """Every row after the header as string columns; a row of another width is refused.

    Arrow's own error names a ragged row's width; an ``invalid_row_handler`` would hand Arrow a Python function,
    whose last reference Arrow's worker threads may drop after the read returns, which aborts a process ending
    then (on bad input, at once)."""
    names = [f"c{i}" for i in range(width)]
    try:
        return pa_csv.read_csv(
            clean, read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1, block_size=_BLOCK),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()),
                                                  strings_can_be_null=False))
    except pa.ArrowException as exc:  # ArrowInvalid among them
        if ragged := _RAGGED.search(str(exc)):
            raise InputError(f"{path}: truncated or malformed ncu CSV (a row "
                             f"{_width(int(ragged['got']), int(ragged['expected']))})") from None
        raise InputError(f"{path}: malformed ncu CSV ({first_line(exc)})") from None


def _ends_a_line(clean: Path) -> bool:
    """Whether the file's last byte is a line break."""
    with clean.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _width(got: int, expected: int) -> str:
    """How a row's width differs from the header's: 'has 3 of 5 columns', or 'has 7 columns, the header 5'."""
    return f"has {got} of {expected} columns" if got < expected else f"has {got} columns, the header {expected}"


def _kernels(path: Path, cells: list[pa.ChunkedArray], columns: dict[str, int], count: int) -> pa.Table:
    """One row per launch: its id (refused when not a number), names, device, context, stream, grid and block."""
    def column(name: str) -> pa.Array | None:
        i = columns.get(name)
        return None if i is None else pc.utf8_trim_whitespace(cells[i]).combine_chunks()

    raw_ids = column("ID")
    if raw_ids is None:
        raise InputError(f"{path}: ncu CSV without an ID column")
    ids = _integers(path, raw_ids, "launch_id", None)
    if (bad := pc.index(pc.is_null(ids), scalar(True, pa.bool_())).as_py()) >= 0:
        raise InputError(f"{path}: ncu CSV row with a non-numeric ID ({raw_ids[bad].as_py()!r})")
    demangled = column("Kernel Name")
    distinct = pc.unique(demangled)
    names = pc.take(array([short_name(n) for n in distinct.to_pylist()], pa.string()),
                    pc.index_in(demangled, value_set=distinct))
    return pa.table({
        "row": _arange(count).cast(pa.int32()), "launch_id": ids, "name": names, "demangled_name": demangled,
        "device": _integers(path, column("Device"), "device", ids, count),
        "compute_capability": _or_nulls(column("CC"), count),
        "context": _integers(path, column("Context"), "context", ids, count),
        "stream": _integers(path, column("Stream"), "stream", ids, count),
        "grid": _dims(column("Grid Size"), count), "block": _dims(column("Block Size"), count),
    }, schema=KERNEL_SCHEMA)


def _arange(n: int) -> pa.Array:
    """0, 1, … n − 1 as int64, made by Arrow (no Python int per element)."""
    one = scalar(1, pa.int64())
    return pc.subtract(pc.cumulative_sum(pa.repeat(one, n)), one)


def _or_nulls(values: pa.Array | None, count: int) -> pa.Array:
    """The column, or nulls where the export has none."""
    return pa.nulls(count, pa.string()) if values is None else values


def _whole(text: str) -> int:
    """The integer a value of 19 digits or more writes (a sign, then digits); past Python's limit on converting
    text (4,300 digits, leading zeros counted), a number as far out of every column's range."""
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-").lstrip("0") or "0"
    return sign * (int(digits) if len(digits) <= _MAX_DIGITS else 10 ** _MAX_DIGITS)


def _integers(path: Path, raw: pa.Array | None, what: str, ids: pa.Array | None, count: int = 0) -> pa.Array:
    """Integers written with or without thousands separators as int64 (null for other text, or where the export
    has no such column); one past 64 bits is refused in one line naming its launch (``ids``; None: these are the
    ids)."""
    if raw is None:
        return pa.nulls(count, pa.int64())
    text = pc.replace_substring(raw, ",", "")
    whole = pc.match_substring_regex(text, _INTEGER)
    long = pc.and_(whole, pc.greater(pc.utf8_length(pc.utf8_ltrim(text, "+-0")), scalar(_INT64_DIGITS, pa.int32())))
    for i in pc.indices_nonzero(long).to_pylist():  # rare: 19 digits or more
        value = _whole(text[i].as_py())
        if ids is None:
            check_fixed(path, value, {})
        else:
            check_fixed(path, ids[i].as_py(), {what: value})
    whole = pc.and_(whole, pc.invert(long))
    return pc.cast(pc.if_else(whole, text, _NULL_TEXT), pa.int64())


def _dims(raw: pa.Array | None, count: int) -> pa.Array:
    """'(x, y, z)' as 'x,y,z'; null when absent or all zero (ncu's placeholder for a launch it could not read)."""
    if raw is None:
        return pa.nulls(count, pa.string())
    parts = pc.extract_regex(raw, r"^\(\s*(?P<x>\d+)\s*,\s*(?P<y>\d+)\s*,\s*(?P<z>\d+)\s*\)$")
    joined = pc.binary_join_element_wise(*(pc.struct_field(parts, [i]) for i in range(3)), scalar(",", pa.string()))
    return pc.if_else(pc.equal(joined, scalar("0,0,0", pa.string())), _NULL_TEXT, joined)


@dataclass
class _Column:
    """Metric columns converted: per launch (and column) its kind (_ABSENT, _NUMBER_KIND or _TEXT), its value in
    base units (null for text, NaN and infinity) and, where any of them holds text metrics, the text."""

    kinds: pa.Array
    values: pa.Array
    texts: pa.Array | None

    def slice(self, start: int, length: int) -> _Column:
        return _Column(self.kinds.slice(start, length), self.values.slice(start, length),
                       None if self.texts is None else self.texts.slice(start, length))


_ABSENT, _NUMBER_KIND, _TEXT = 0, 1, 2


def _kind(kind: int) -> pa.Scalar:
    """A kind as the int8 scalar the kinds' column holds."""
    return scalar(kind, pa.int8())

_GROUP_BYTES = 256 << 20  # strings converted at once (well under the 2 GiB a string array holds)


def _metric_batches(ids: pa.Array, cells: list[pa.ChunkedArray | None],
                    metric_cols: list[tuple[int, str, str, float]], decimal_comma: bool) -> Iterator[pa.Table]:
    """The metrics as rows (launch_id, metric, value, unit, text), launch by launch, a batch of about _BATCH_ROWS
    at a time. The columns are converted once, a group at a time (their strings let go), then the rows of a block
    of launches are interleaved from the columns with one ``take``."""
    converted = _converted(cells, metric_cols, decimal_comma, len(ids))
    if not converted:
        return
    names = array([name for _, name, _, _ in metric_cols], pa.string())
    units = array([unit for _, _, unit, _ in metric_cols] + [""], pa.string())  # the last: text metrics'
    per_block = max(1, _BATCH_ROWS // len(converted))
    for start in range(0, len(ids), per_block):
        yield _block(ids, converted, names, units, start, min(per_block, len(ids) - start))


def _converted(cells: list[pa.ChunkedArray | None], metric_cols: list[tuple[int, str, str, float]],
               decimal_comma: bool, count: int) -> list[_Column]:
    """Every metric column converted, columns laid end to end in groups of about _BATCH_ROWS values (and at most
    _GROUP_BYTES of text) so that each compute function runs once a group, not once a column."""
    out: list[_Column] = []
    group: list[tuple[pa.ChunkedArray, float]] = []
    size = 0
    for i, _, _, factor in metric_cols:
        raw, cells[i] = cells[i], None
        assert raw is not None, "each metric column is converted once"
        group.append((raw, factor))
        size += raw.nbytes
        if len(group) * count >= _BATCH_ROWS or size >= _GROUP_BYTES:
            out += _convert_group(group, decimal_comma, count)
            group, size = [], 0
    if group:
        out += _convert_group(group, decimal_comma, count)
    return out


def _convert_group(group: list[tuple[pa.ChunkedArray, float]], decimal_comma: bool, count: int) -> list[_Column]:
    """Columns converted together, handed back one by one (slices of the group's arrays)."""
    raw = pc.utf8_trim_whitespace(pa.concat_arrays([chunk for column, _ in group for chunk in column.chunks]))
    factors = pa.concat_arrays([pa.repeat(scalar(factor, pa.float64()), count) for _, factor in group])
    converted = _convert(raw, factors, decimal_comma)
    return [converted.slice(k * count, count) for k in range(len(group))]


def _convert(raw: pa.Array, factors: pa.Array, decimal_comma: bool) -> _Column:
    """Metric strings as kinds, values in base units (times ``factors``) and texts (their first 1,000 characters):
    a number has its value and unit; NaN and infinity no value but the unit; other text is a text metric."""
    present = pc.invert(pc.is_in(raw, value_set=array(sorted(_MISSING), pa.string())))
    text = (pc.replace_substring(pc.replace_substring(raw, ".", ""), ",", ".") if decimal_comma
            else pc.replace_substring(raw, ",", ""))
    number = pc.cast(pc.if_else(pc.match_substring_regex(text, _NUMBER), text, _NULL_TEXT), pa.float64())
    finite = pc.fill_null(pc.is_finite(number), scalar(False, pa.bool_()))
    non_finite = pc.is_in(pc.utf8_lower(pc.utf8_ltrim(raw, "+-")), value_set=array(_NON_FINITE, pa.string()))
    is_text = pc.and_(present, pc.invert(pc.or_(finite, non_finite)))
    kinds = pc.if_else(present, pc.if_else(is_text, _kind(_TEXT), _kind(_NUMBER_KIND)), _kind(_ABSENT))
    values = pc.if_else(finite, pc.multiply(number, factors), scalar(None, pa.float64()))
    texts = None
    if pc.any(is_text).as_py():
        texts = pc.if_else(is_text, pc.utf8_slice_codeunits(raw, 0, 1000), _NULL_TEXT)
    return _Column(kinds, values, texts)


def _block(ids: pa.Array, columns: list[_Column], names: pa.Array, units: pa.Array, start: int,
           n: int) -> pa.Table:
    """The metric rows of launches start … start + n - 1, launch by launch, each launch's metrics in column order:
    the columns' slices laid end to end, taken in row order (row r's metric j is at j·n + r)."""
    width = len(columns)
    k = _arange(n * width)
    row = pc.divide(k, scalar(width, pa.int64()))
    col = pc.subtract(k, pc.multiply(row, scalar(width, pa.int64())))
    order = pc.add(pc.multiply(col, scalar(n, pa.int64())), row)
    kinds = pc.take(pa.concat_arrays([c.kinds.slice(start, n) for c in columns]), order)
    keep = pc.not_equal(kinds, _kind(_ABSENT))
    kept_col = pc.filter(col, keep).cast(pa.int32())
    is_text = pc.equal(pc.filter(kinds, keep), _kind(_TEXT))
    if any(c.texts is not None for c in columns):
        texts = pc.filter(pc.take(pa.concat_arrays(
            [c.texts.slice(start, n) if c.texts is not None else pa.nulls(n, pa.string()) for c in columns]),
            order), keep)
    else:
        texts = pa.nulls(len(kept_col), pa.string())
    return pa.table({
        "launch_id": pc.filter(pc.take(ids, pc.add(row, scalar(start, pa.int64()))), keep),
        "metric": pa.DictionaryArray.from_arrays(kept_col, names),
        "value": pc.filter(pc.take(pa.concat_arrays([c.values.slice(start, n) for c in columns]), order), keep),
        "unit": pa.DictionaryArray.from_arrays(pc.if_else(is_text, scalar(len(names), pa.int32()), kept_col), units),
        "text": texts,
    })


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


def _uses_decimal_comma(percent_cols: list[pa.Array]) -> bool:
    """Whether numbers use a decimal comma (European locales), judged from the percentage columns."""
    comma = any(pc.any(pc.match_substring_regex(c, _DECIMAL_COMMA.pattern)).as_py() for c in percent_cols)
    point = any(pc.any(pc.match_substring_regex(c, _DECIMAL_POINT.pattern)).as_py() for c in percent_cols)
    return comma and not point
