"""The report's tables as polars DataFrames, for notebooks and scripts: ``report.frames["attribution"]``.

One frame per table the report carries: ``findings`` (one row per finding, its scope flattened), ``attribution``
(every GPU's time by rank, device, step, cause and detail, ms), ``efficiency`` (MFU, MBU per rank and step, the
peak's fields as peak_gpu, peak_dtype, …), then each other part of the report made of rows where the report has
them (tracedoc.report_tables.SECTIONS: ``operators``, its kernels as text; ``memory``, its nested fields as polars
structs and lists), and each of ``report.metrics`` (``gpu_idle``, ``top_kernels``, ...: ms and %).
``frame.to_pandas()`` gives pandas (with pandas installed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tracedoc.report_tables import SECTIONS

if TYPE_CHECKING:
    import polars as pl

    from tracedoc.report import Report

SCOPE_FIELDS = ("rank", "device", "stream", "kernel", "step", "pg", "seq")
# The columns of the two tables whose shape the report fixes, so that they have them even without rows
# (polars type names; the metrics' columns come from their rows).
SCHEMAS = {
    "findings": {"number": "Int64", "rule": "String", "severity": "String", "title": "String",
                 "impact_ms": "Float64", "impact_pct": "Float64", "rank": "Int64", "device": "Int64",
                 "stream": "Int64", "kernel": "String", "step": "Int64", "pg": "String", "seq": "Int64",
                 "part_of": "Int64", "message": "String"},
    "attribution": {"rank": "Int64", "device": "Int64", "step": "Int64", "cause": "String", "detail": "String",
                    "ms": "Float64"},
}


class Frames(Mapping[str, "pl.DataFrame"]):
    """The report's tables by name, each built as a DataFrame when asked for."""

    def __init__(self, report: Report) -> None:
        self._report = report

    def _rows(self) -> dict[str, list[dict[str, Any]]]:
        report = self._report
        rows = {"findings": finding_rows(report), "attribution": report.attribution}
        if report.efficiency:
            rows["efficiency"] = efficiency_rows(report)
        for key in _ROW_PARTS:
            if part := getattr(report, key):
                rows[key] = _FLAT.get(key, list)(part)
        return {**rows, **report.metrics}

    def __getitem__(self, name: str) -> pl.DataFrame:
        rows = self._rows()
        if name not in rows:
            raise KeyError(f"{name!r}: the report has no such table (it has {', '.join(rows)})")
        return frame(rows[name], SCHEMAS.get(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())

    def __repr__(self) -> str:
        return "Frames(" + ", ".join(f"{name}: {len(rows)} rows" for name, rows in self._rows().items()) + ")"


# The parts of the report made of rows (tracedoc.report_tables), after attribution, each as a frame; and the
# function that flattens what a frame would hold badly.
_ROW_PARTS = [s.key for s in SECTIONS if "." not in s.key and s.key not in ("attribution", "window")]


def frame(rows: list[dict[str, Any]], schema: dict[str, str] | None = None) -> pl.DataFrame:
    """Rows as a DataFrame: with ``schema`` (column: polars type name) of those columns and types, else each
    column's type read from every row (ints and floats mixed: floats)."""
    import polars as pl

    if schema is not None:
        return pl.from_dicts(rows, schema={name: getattr(pl, kind) for name, kind in schema.items()})
    return pl.from_dicts(rows, infer_schema_length=None) if rows else pl.DataFrame()


def finding_rows(report: Report) -> list[dict[str, Any]]:
    """One row per finding, numbered as ranked: rule, severity, title, saving, the scope's fields, part_of."""
    return [{"number": i, "rule": f.rule, "severity": f.severity, "title": f.title, "impact_ms": f.impact_ms,
             "impact_pct": f.impact_pct, **{k: getattr(f.scope, k) for k in SCOPE_FIELDS}, "part_of": f.part_of,
             "message": f.message} for i, f in enumerate(report.findings, 1)]


def efficiency_rows(report: Report) -> list[dict[str, Any]]:
    """The efficiency rows with their peak flattened (peak_gpu, peak_device_name, peak_dtype, peak_tflops,
    peak_gbps, peak_source)."""
    return [{**{k: v for k, v in r.items() if k != "peak"}, **{f"peak_{k}": v for k, v in r["peak"].items()}}
            for r in report.efficiency]


def operator_rows(report: Report) -> list[dict[str, Any]]:
    """The operator view, each op's kernels as one text: 'name ×count (ms)', most time first."""
    return operator_rows_of(report.operators)


def operator_rows_of(operators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator view's rows, each op's kernels as one text: 'name ×count (ms)', most time first."""
    return [{**{k: v for k, v in o.items() if k != "kernels"},
             "kernels": "; ".join(f"{k['name']} ×{k['count']} ({k['ms']} ms)" for k in o["kernels"])}
            for o in operators]


_FLAT: dict[str, Any] = {"operators": operator_rows_of}
