"""A store some of whose analysis objects are given instead of computed.

On the client, the per-rank objects (a rank's comm kernels, its per-step work, its attribution, the views its
rules read) come from the workers as tables; the analysis modules run as they do on one machine, statement by
statement, except the statements that would build a given object again from events the client does not have. On
a worker, a rank's collectives as the client lined them up are given the same way.
"""

from __future__ import annotations

from pathlib import Path

from tracedoc.limits import Limits
from tracedoc.store import Store, modules
from tracedoc.store.engine import duckdb


class SummaryStore(Store):
    """A Store whose ``provided`` objects exist already: modules skip the statements that create them."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path | None = None,
                 provided: set[str] | None = None, limits: Limits = Limits()) -> None:
        super().__init__(con, path, limits)
        self.provided: set[str] = set(provided or ())

    def applies(self, module: str) -> bool:
        """As a store's, or when the ranks handed back rows of an object ``module`` makes: a summary store holds the
        ranks' analyses, not the events (allocator events, operator shapes) that make a module apply."""
        if super().applies(module):
            return True
        given = sorted(modules.created_objects(module, self.con) & self.provided)
        return bool(given) and bool(self.scalar(
            "SELECT count(*) > 0 FROM duckdb_tables() WHERE table_name IN (SELECT unnest($names || $rows)) "
            "AND estimated_size > 0", {"names": given, "rows": [f"{name}__rows" for name in given]}))

    def include(self, module: str) -> None:
        """Run ``module`` after its includes, once, leaving out the statements that create a provided object."""
        modules.include(self.con, self._included, module, self.limits.memory_bytes, self.provided, self.applies,
                        self.views_as_tables)


def summary_connection(limits: Limits) -> duckdb.DuckDBPyConnection:
    """An in-memory database with the store's schema (its tables empty) for the client's summaries or a worker's
    batch, under the run's ``limits`` as every store."""
    from tracedoc.store.store import connect, schema_files

    con = connect(":memory:", limits)
    for schema in schema_files():
        con.execute(schema.read_text())
    return con
