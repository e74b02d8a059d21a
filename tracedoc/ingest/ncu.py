"""Nsight Compute: ``.ncu-rep`` reports (via the optional ``ncu-report`` package) and ncu raw-page CSV exports.

Both readers yield the same launches (ncu_model.Launch), written here to the ncu tables of schema_ncu.sql:
one row per profiled launch, every metric in base units, and ncu's stored rule results when the report has them.
The format is recognised by content: the report's magic bytes, or the CSV's fixed header columns.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tracedoc.errors import InputError
from tracedoc.ingest import ncu_csv, ncu_rep
from tracedoc.ingest.base import LoadResult
from tracedoc.ingest.ncu_model import Launch
from tracedoc.store import Store

FORMAT = "ncu"
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# Integer columns of ncu_kernels (schema_ncu.sql) and the largest value each holds.
_INT_COLUMNS = {"launch_id": _INT32_MAX, "device": _INT32_MAX, "registers_per_thread": _INT32_MAX,
                "context": _INT64_MAX, "stream": _INT64_MAX, "shared_memory_bytes": _INT64_MAX}
# Launch-configuration metrics the analyses read as whole numbers (BIGINT).
_COUNT_METRICS = ("launch__grid_size", "launch__block_size", "launch__sm_count",
                  "device__attribute_multiprocessor_count")
# Averages of a unit's throughput are at most about 100 % of its sustained peak; far beyond it is no measurement.
_MAX_PCT_OF_PEAK = 1000.0


def sniff(path: Path, head: bytes) -> bool:
    """True for an Nsight Compute report or an ncu CSV export."""
    return ncu_rep.is_report(head) or ncu_csv.is_export(head)


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one report or export into the ncu tables under ``source_id``."""
    with path.open("rb") as f:
        is_report = ncu_rep.is_report(f.read(4))
    launches = ncu_rep.read(path) if is_report else ncu_csv.read(path)
    _write(store, source_id, launches, path)
    tool = "Nsight Compute report (ncu_report)" if is_report else "Nsight Compute CSV export"
    return LoadResult(rank=None, world_size=None, event_count=len(launches), tool=tool)


def _write(store: Store, source_id: int, launches: list[Launch], path: Path) -> None:
    """Insert the launches, their metrics and rule results as Arrow tables (columnar, no per-row SQL)."""
    kernels = {k: [] for k in ("launch_id", "name", "demangled_name", "device", "device_name", "compute_capability",
                               "context", "stream", "grid", "block", "registers_per_thread", "shared_memory_bytes",
                               "duration_ns")}
    metrics = {k: [] for k in ("launch_id", "metric", "value", "unit", "text")}
    rules = {k: [] for k in ("launch_id", "rule_id", "rule_name", "section", "type", "title", "message",
                             "speedup_pct", "speedup_type")}
    for launch in launches:
        values = {m.name: m for m in launch.metrics}
        smem = [values[n].value for n in ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
                if n in values and values[n].value is not None]
        row = {
            "launch_id": launch.launch_id, "name": launch.name, "demangled_name": launch.demangled_name,
            "device": launch.device, "device_name": _text(values, "device__attribute_display_name"),
            "compute_capability": launch.compute_capability, "context": launch.context, "stream": launch.stream,
            "grid": launch.grid, "block": launch.block,
            "registers_per_thread": _int(values, "launch__registers_per_thread"),
            "shared_memory_bytes": int(sum(smem)) if smem else None,
            "duration_ns": _value(values, "gpu__time_duration.sum"),
        }
        _check(path, launch, row)
        for k, v in row.items():
            kernels[k].append(v)
        for m in launch.metrics:
            for k, v in (("launch_id", launch.launch_id), ("metric", m.name), ("value", m.value), ("unit", m.unit),
                         ("text", m.text)):
                metrics[k].append(v)
        for r in launch.rules:
            rules["launch_id"].append(launch.launch_id)
            for k in list(rules)[1:]:
                rules[k].append(getattr(r, k))
    con = store.con
    for table, columns in (("ncu_kernels", kernels), ("ncu_metrics", metrics), ("ncu_rule_results", rules)):
        arrow = pa.table({"source_id": pa.array([source_id] * len(columns["launch_id"]), pa.int32()),
                          **{k: pa.array(v) if v else pa.array(v, pa.null()) for k, v in columns.items()}})
        con.register("_ncu_rows", arrow)
        try:
            names = ", ".join(arrow.column_names)
            con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM _ncu_rows")
        finally:
            con.unregister("_ncu_rows")


def _check(path: Path, launch: Launch, row: dict) -> None:
    """Reject numbers no profiler writes — ids past their column's range, counts past 2^63, throughputs far past
    100 % of peak — with one line naming the launch, instead of an overflow deep in ingestion or analysis."""
    where = f"{path}: launch {row['launch_id']}" if 0 <= row["launch_id"] <= _INT32_MAX else f"{path}"
    for column, top in _INT_COLUMNS.items():
        value = row[column]
        if value is not None and not -top - 1 <= value <= top:
            raise InputError(f"{where}: {column.replace('_', ' ')} {value:.6g} is out of range (corrupt export?)")
    for m in launch.metrics:
        if m.value is None:
            continue
        if m.name in _COUNT_METRICS and not 0 <= m.value <= _INT64_MAX:
            raise InputError(f"{where}: {m.name} = {m.value:.6g} is out of range (corrupt export?)")
        if ".avg.pct_of_peak_sustained_" in m.name and abs(m.value) > _MAX_PCT_OF_PEAK:
            raise InputError(f"{where}: {m.name} = {m.value:.6g}% of peak is no measurement (corrupt export?)")


def _value(values: dict, name: str) -> float | None:
    m = values.get(name)
    return m.value if m is not None else None


def _int(values: dict, name: str) -> int | None:
    v = _value(values, name)
    return int(v) if v is not None else None


def _text(values: dict, name: str) -> str | None:
    m = values.get(name)
    return m.text if m is not None else None
