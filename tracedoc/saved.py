"""What tracedoc wrote earlier, given back to it in place of traces (by `serve` and `diff`): a saved JSON report or
a cached store. Each is checked here, and what is not one is a one-line InputError."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from tracedoc.errors import InputError, first_line
from tracedoc.report import Report
from tracedoc.store import Store

_HEAD_BYTES = 1 << 20


def looks_like_report(path: Path) -> bool:
    """A tracedoc JSON report (or diff) names its findings near the top; a PyTorch trace has traceEvents."""
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES)
    return (b'"findings"' in head or b'"kind": "diff"' in head) and b'"traceEvents"' not in head


def read_report(path: Path) -> Report:
    """The report saved at ``path`` (`tracedoc analyze --format json`)."""
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("kind") == "diff":
            raise InputError(f"{path}: a tracedoc diff, not a report; give a report or the traces instead")
        return Report.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InputError(f"{path}: not a tracedoc JSON report ({first_line(exc)})") from None


def open_complete_store(path: Path) -> Store:
    """The cached store at ``path``, opened (for the caller to close) once known to be complete."""
    try:
        store = Store.open(path)
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a tracedoc store ({first_line(exc)})") from None
    if not store.is_complete():
        store.close()
        raise InputError(f"{path}: an incomplete tracedoc store (its ingestion did not finish)")
    return store
