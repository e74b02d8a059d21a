"""What tracedoc wrote earlier, given back to it in place of traces (by `serve` and `diff`): a saved JSON report or
a cached store. Each is checked here, and what is not one is a one-line InputError.

A saved report is a file like any other input: it may have been edited, cut or written by something else. Before
anything reads it, its JSON is parsed strictly (no NaN or Infinity) and its shape is checked against the report's
contract (schema 1): the types of every field the renderers and the diff read, and, in the rows of its parts, of
the columns declared as measures (``report_tables``: a number, or a point in time as an integer of ns) or named
as keys (``rank``, ``step``: an integer; ``name``, ``kernel``: text). Every other value must be a plain JSON
scalar.

A saved report's strings are as untrusted as a trace's names, and the renderers print words of the report's own
(titles, causes, summary lines) as they are: so every string read here, keys included, has its control and
bidirectional characters written visibly and its line breaks folded (``words.sanitize.visible_strings``) before
any renderer, the diff or the dashboard sees it, in every format: no escape sequence reaches a terminal, and no
string starts a Markdown heading or table row of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracedoc import strict_json
from tracedoc.errors import InputError, first_line
from tracedoc.judge.rule import load_rules, mark_kinds
from tracedoc.limits import Limits
from tracedoc.measures import TIME_NS
from tracedoc.report import REPORT_SCHEMA, SEVERITIES, Report, Scope
from tracedoc.report_tables import EFFICIENCY, SECTIONS, SPAN, SUMMARY, WHAT_IF, Measures
from tracedoc.store import Store
from tracedoc.words.sanitize import visible_strings

_HEAD_BYTES = 1 << 20


def looks_like_report(path: Path) -> bool:
    """A tracedoc JSON report (or diff) names its findings near the top; a PyTorch trace has traceEvents."""
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES)
    return (b'"findings"' in head or b'"kind": "diff"' in head) and b'"traceEvents"' not in head


def read_report(path: Path) -> Report:
    """The report saved at ``path`` (`tracedoc analyze --format json`), once its shape is checked, its strings
    with their control characters made visible."""
    try:
        data = strict_json.loads(path.read_bytes())
        if isinstance(data, dict) and data.get("kind") == "diff":
            raise InputError(f"{path}: a tracedoc diff, not a report; give a report or the traces instead")
        check_report(data)
        report = Report.from_dict(visible_strings(data, one_line=True))
        mark_kinds(report.findings, load_rules())  # a saved report names its rules: the built-in ones say its kinds
        return report
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InputError(f"{path}: not a tracedoc JSON report ({first_line(exc)})") from None


# Value kinds: what a field may hold (None is allowed wherever the kind's name ends in '?').
_INT, _NUM, _STR = "an integer", "a number", "text"
_TIME = "an integer of ns"  # a point in time: ns since the trace's clock's origin, of any size
_SCALARS = (str, int, float, bool, type(None))
# Larger than any time, share or count a report holds (1e15 ms is 31,000 years): arithmetic on it stays finite.
_MAX_NUMBER = 1e15
# Keys by name: these names an integer or text, wherever they are (the numbers are declared as measures).
_INT_NAMES = {"rank", "step", "device", "stream", "seq", "finding", "part_of", "launches", "kernels", "ranks",
              "waiting_for_rank", "events"}
_STR_NAMES = {"name", "kernel", "category", "grid", "block", "reason", "cause", "detail", "rule", "pg", "backend",
              "path", "format", "next", "basis", "severity", "title", "message", "fix", "unit"}
# What each row of the summary's lists must name: the input that is missing, the cycle set aside and the one judged.
_SUMMARY_ROWS_REQUIRE = {"missing_ranks": ("path",), "set_aside": ("path", "judged")}
_FINDING_FIELDS = {"rule": _STR, "severity": _STR, "title": _STR, "message": _STR, "impact_ms": _NUM,
                   "impact_pct": _NUM, "fix": _STR}
_SCOPE_FIELDS = {name: _STR if name in ("kernel", "pg") else _INT for name in Scope.__dataclass_fields__}


def check_report(data: Any) -> None:
    """Raise ValueError naming the first field of ``data`` (a parsed report) that the report's contract does not
    allow: so that a malformed saved report is bad input, never a failure deep in a renderer or the diff."""
    _expect(isinstance(data, dict), "the report", "an object")
    if "schema" in data:
        _expect(data["schema"] == REPORT_SCHEMA, "schema", f"{REPORT_SCHEMA} (this tracedoc's report schema)")
    for key in ("inputs", "findings"):
        _expect(isinstance(data.get(key), list), key, "a list")
    for key in ("summary", "metrics"):
        _expect(isinstance(data.get(key, {}), dict), key, "an object")
    _expect(isinstance(data.get("what_if", []), list), "what_if", "a list")
    for i, item in enumerate(data["inputs"]):
        _check_row(item, f"inputs[{i}]", required=("path", "format"))
    _check_summary(data["summary"])
    for i, finding in enumerate(data["findings"]):
        _check_finding(finding, f"findings[{i}]")
    for i, row in enumerate(data.get("attribution", []) if isinstance(data.get("attribution"), list) else []):
        _check_row(row, f"attribution[{i}]", _MEASURED["attribution"], required=("cause", "ms"))
    for i, row in enumerate(data.get("what_if", [])):
        _check_row(row, f"what_if[{i}]", _measured(WHAT_IF))
    for name, rows in data.get("metrics", {}).items():
        _expect(isinstance(rows, list), f"metrics.{name}", "a list")
        for i, row in enumerate(rows):
            _check_row(row, f"metrics.{name}[{i}]", _MEASURED.get(f"metrics.{name}", {}))
    for key, shape in _PARTS.items():
        if key in data:
            _check_part(data[key], key, shape, _MEASURED[key])


def _measured(declared: Measures) -> dict[str, str]:
    """The kind of value each declared measure holds: a point in time, or a number."""
    return {name: _TIME if measure == TIME_NS else _NUM for name, measure in declared}


# The kinds of the measures of each part of the report (tracedoc.report_tables), by the part's key.
_MEASURED = {**{s.key: _measured(tuple(m for t in s.tables for m in t.measures)) for s in SECTIONS},
             "efficiency": _measured(EFFICIENCY)}
# The report's parts beside its metrics (tracedoc.report_tables.SECTIONS, and efficiency): a list of rows, or one
# object (window).
_LIST, _OBJECT, _TEXTS = "a list of objects", "an object", "a list of text"
_PARTS = {**{s.key: _OBJECT if s.key == "window" else _LIST for s in SECTIONS if "." not in s.key},
          "efficiency": _LIST}
# Fields of those parts that are no measures or must be whole numbers: nested rows (LIST of STRUCT, a STRUCT) and
# scalars.
_PART_KINDS = {"top_sites": _LIST, "by_role": _LIST, "growth_sites": _LIST, "ooms": _LIST, "kernels": _LIST,
               "ranks": _LIST, "recorded_with": _TEXTS,
               "peak_at": _OBJECT, "unprofiled": _OBJECT, "fragmentation": _OBJECT, "peak": _OBJECT,
               "steady_steps": _INT, "allocations": _INT, "blocks": _INT, "site": _STR, "op": _STR, "role": _STR}


def _check_part(value: Any, where: str, shape: str, measured: dict[str, str]) -> None:
    """A part of the report, or a nested field of one: a list of objects or an object (None allowed for a nested
    object), each field nested as ``_PART_KINDS`` says or a scalar of the kind its declaration (``measured``) or
    its name as a key says."""
    if shape == _LIST:
        _expect(isinstance(value, list), where, "a list")
        for i, row in enumerate(value):
            _check_part(row, f"{where}[{i}]", _OBJECT, measured)
        return
    if value is None and "." in where:
        return
    _expect(isinstance(value, dict), where, "an object")
    for key, field_value in value.items():
        kind = _PART_KINDS.get(key, _kind_of(key, measured))
        if kind in (_LIST, _OBJECT):
            _check_part(field_value, f"{where}.{key}", kind, measured)
        elif kind == _TEXTS:
            _expect(isinstance(field_value, list) and all(isinstance(v, str) for v in field_value),
                    f"{where}.{key}", _TEXTS)
        else:
            _check_value(field_value, f"{where}.{key}", kind)


def _check_summary(summary: dict[str, Any]) -> None:
    for key, value in summary.items():
        if key in _SUMMARY_ROWS_REQUIRE and value is not None:
            _expect(isinstance(value, list), f"summary.{key}", "a list")
            for i, row in enumerate(value):
                _check_row(row, f"summary.{key}[{i}]", required=_SUMMARY_ROWS_REQUIRE[key])
        elif key == "thresholds" and value is not None:  # --set: {rule: {threshold: number}}
            _expect(isinstance(value, dict), "summary.thresholds", "an object of rules")
            for rule, values in value.items():
                _expect(isinstance(values, dict), f"summary.thresholds.{rule}", "an object of thresholds")
                for name, number in values.items():
                    _check_value(number, f"summary.thresholds.{rule}.{name}", _NUM, optional=False)
        else:
            _check_value(value, f"summary.{key}", _kind_of(key, _SUMMARY))


def _check_finding(finding: Any, where: str) -> None:
    _expect(isinstance(finding, dict), where, "an object")
    for key, kind in _FINDING_FIELDS.items():
        _check_value(finding.get(key), f"{where}.{key}", kind, optional=False)
    _expect(finding["severity"] in SEVERITIES, f"{where}.severity", " or ".join(SEVERITIES))
    scope = finding.get("scope", {})
    _expect(isinstance(scope, dict), f"{where}.scope", "an object")
    for key, value in scope.items():
        _expect(key in _SCOPE_FIELDS, f"{where}.scope.{key}", f"one of {', '.join(_SCOPE_FIELDS)}")
        _check_value(value, f"{where}.scope.{key}", _SCOPE_FIELDS[key])
    _check_value(finding.get("part_of"), f"{where}.part_of", _INT)
    if finding.get("span") is not None:
        _check_row(finding["span"], f"{where}.span", _SPAN, required=("start_ms", "dur_ms"))
    for key in ("references", "drawn_from"):
        items = finding.get(key, [])
        _expect(isinstance(items, list) and all(isinstance(v, str) for v in items), f"{where}.{key}",
                "a list of text")
    evidence = finding.get("evidence", [])
    _expect(isinstance(evidence, list), f"{where}.evidence", "a list")
    for i, item in enumerate(evidence):
        _check_row(item, f"{where}.evidence[{i}]", required=("name",))
        _expect(not isinstance(item.get("value"), bool), f"{where}.evidence[{i}].value", "a number or text")


def _check_row(row: Any, where: str, measured: dict[str, str] | None = None, required: tuple[str, ...] = ()) -> None:
    """A row of a table in the report: an object of JSON scalars, each of the kind its declaration (``measured``)
    or its name as a key says."""
    _expect(isinstance(row, dict), where, "an object")
    for key in required:
        _expect(row.get(key) is not None, f"{where}.{key}", "present")
    for key, value in row.items():
        _check_value(value, f"{where}.{key}", _kind_of(key, measured or {}))


def _kind_of(name: str, measured: dict[str, str]) -> str | None:
    """The kind of value a column or key of this name holds (None: any JSON scalar): an integer or text for a
    key's name, else as declared."""
    if name in _INT_NAMES:
        return _INT
    if name in _STR_NAMES:
        return _STR
    return measured.get(name)


_SUMMARY, _SPAN = _measured(SUMMARY), _measured(SPAN)


def _check_value(value: Any, where: str, kind: str | None, optional: bool = True) -> None:
    if value is None:
        _expect(optional, where, "present")
        return
    if kind in (_INT, _NUM):
        ok = (isinstance(value, int if kind == _INT else int | float) and not isinstance(value, bool)
              and abs(value) <= _MAX_NUMBER)
        kind = f"{kind} of at most {_MAX_NUMBER:.0e} in size"
    elif kind == _TIME:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == _STR:
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, _SCALARS)
    _expect(ok, where, kind or "a plain value (text, number, true, false or null)")


def _expect(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise ValueError(f"{where} should be {what}")


def open_complete_store(path: Path, limits: Limits | None = None) -> Store:
    """The cached store at ``path``, opened (for the caller to close) once known to be complete, under ``limits``
    (None: those the environment sets)."""
    from tracedoc.store.engine import duckdb
    try:
        store = Store.open(path, Limits.from_env() if limits is None else limits)
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a tracedoc store ({first_line(exc)})") from None
    if not store.is_complete():
        store.close()
        raise InputError(f"{path}: an incomplete tracedoc store (its ingestion did not finish)")
    return store
