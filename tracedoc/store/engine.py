"""DuckDB as tracedoc imports it: its compiled engine alone where DuckDB ships it as a module of its own
(``_duckdb``), the whole ``duckdb`` package only where a connection scans Python objects or builds a relation.

``import duckdb`` also runs the package's Python layer (relations built as SQL text, the scans of Arrow tables and
readers): about 0.2 s of CPU at start-up, a sixth of a small trace's whole run, which a run that executes SQL and
fetches rows never uses. A connection made from the engine gains that layer as soon as the package is imported
(``with_python_objects``), so both kinds of caller share connections. Where DuckDB has no separate engine module,
both are the package.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
else:
    try:
        duckdb = importlib.import_module("_duckdb")
    except ImportError:  # a DuckDB whose compiled engine lives inside the package
        duckdb = importlib.import_module("duckdb")


def with_python_objects() -> None:
    """Import the whole ``duckdb`` package, before a connection builds a relation (``sql``) or scans a Python
    object: the engine alone has neither."""
    importlib.import_module("duckdb")


@contextmanager
def scanning(con: duckdb.DuckDBPyConnection, name: str, data: Any) -> Iterator[None]:
    """``data`` (an Arrow table, record batch reader or C stream) readable as the view ``name`` on ``con`` while the
    block runs, and no longer after it, however it ends: every Arrow object tracedoc hands DuckDB goes through here."""
    with_python_objects()
    con.register(name, data)
    try:
        yield
    finally:
        con.unregister(name)
