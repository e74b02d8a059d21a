"""A store some of whose analysis objects are given instead of computed.

On the client, the per-rank objects (a rank's comm kernels, its per-step work, its attribution, the views its
rules read) come from the workers as tables; the analysis modules run as they do on one machine, statement by
statement, except the statements that would build a given object again from events the client does not have. On
a worker, a rank's collectives as the client lined them up are given the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from tracedoc.errors import TracedocError, first_line
from tracedoc.store import Store
from tracedoc.store.modules import module_file

_INCLUDE = re.compile(r"^--\s*include:\s*([\w.]+)\s*$", re.MULTILINE)
# A statement's text may begin with the comments before it (DuckDB 2.0.1's extract_statements keeps them).
_CREATES = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
                      r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|MACRO|FUNCTION)\s+"
                      r"(?:IF\s+NOT\s+EXISTS\s+)?([\w.]+)", re.IGNORECASE | re.DOTALL)


class SummaryStore(Store):
    """A Store whose ``provided`` objects exist already: modules skip the statements that create them."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None = None,
                 provided: set[str] | None = None) -> None:
        super().__init__(con, path)
        self.provided: set[str] = set(provided or ())

    def include(self, module: str) -> None:
        """Run ``module`` after its includes, once, leaving out the statements that create a provided object."""
        if module in self._included:
            return
        sql = module_file(module).read_text()
        for dep in _INCLUDE.findall(sql):
            self.include(dep)
        try:
            for statement in duckdb.extract_statements(sql):
                if created_object(statement.query) not in self.provided:
                    self.con.execute(statement.query)
        except duckdb.Error as exc:
            raise TracedocError(f"analysis module {module} failed: {first_line(exc)}") from exc
        self._included.add(module)


def created_object(statement: str) -> str | None:
    """The object a CREATE statement makes (its name), else None."""
    m = _CREATES.match(statement)
    return m.group(1) if m else None


def summary_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory database with the store's schema (its tables empty) for the client's summaries."""
    from tracedoc.store.store import no_progress_bar, schema_files

    con = duckdb.connect(":memory:")
    no_progress_bar(con)
    for schema in schema_files():
        con.execute(schema.read_text())
    return con
