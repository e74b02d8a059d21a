"""The report's tables: each one a ``<group>_report_<name>`` view of an analysis module, which renames and converts
the measures for people (ms, µs, %, GB/s), read here in the report's row order.

The order lives in the declaration, not in the view: DuckDB keeps no view's ORDER BY for the query that selects
from it. A view may carry columns that only order its rows (``order_only``); they are left out of the report."""

from __future__ import annotations

from typing import Any, NamedTuple

from tracedoc.store import Store
from tracedoc.units import report_number


class ReportTable(NamedTuple):
    """One table of the report: the analysis ``module`` that makes its ``view``, the rows' ``order`` (an ORDER BY
    over the view's columns) and the view's columns that only order them."""

    module: str
    view: str
    order: str
    order_only: tuple[str, ...] = ()
    whole_numbers: bool = False


def report_rows(store: Store, table: ReportTable) -> list[dict[str, Any]]:
    """The table's rows in its order, numbers as the report carries them (``report_value``), nested rows (STRUCT,
    LIST) included."""
    store.include(table.module)
    columns = f"* EXCLUDE ({', '.join(table.order_only)})" if table.order_only else "*"
    return [{k: report_value(v, table.whole_numbers) for k, v in row.items()}
            for row in store.query(f"SELECT {columns} FROM {table.view} ORDER BY {table.order}")]


def report_value(value: Any, whole_numbers: bool = False) -> Any:
    """A value of a report view as the report carries it: numbers as ``report_number`` gives them, through STRUCTs
    (dicts) and LISTs; ``whole_numbers``: a float that is a whole number (≥ 1 in size) as an int (bytes)."""
    if isinstance(value, dict):
        return {k: report_value(v, whole_numbers) for k, v in value.items()}
    if isinstance(value, list):
        return [report_value(v, whole_numbers) for v in value]
    number = report_number(value)
    if whole_numbers and isinstance(number, float) and number.is_integer() and abs(number) >= 1:
        return int(number)
    return number
