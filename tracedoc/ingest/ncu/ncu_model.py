"""What the two Nsight Compute readers (``.ncu-rep`` and CSV) produce: profiled launches with their metrics, as
Arrow tables (``LaunchTables``) that the writer stores. The report reader builds ``Launch`` objects first (NVIDIA's
API hands out one metric at a time) and turns them into tables; the CSV reader builds the tables column by column.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tracedoc.errors import InputError
from tracedoc.ingest import arrow_values


@dataclass
class Metric:
    """One metric of one launch, in ncu's base unit; text metrics carry ``text`` and no value."""

    name: str
    value: float | None
    unit: str
    text: str | None


@dataclass
class RuleResult:
    """One message of ncu's own guided analysis, as stored in the report."""

    rule_id: str
    rule_name: str
    section: str
    type: str
    title: str
    message: str
    speedup_pct: float | None
    speedup_type: str | None


@dataclass
class Launch:
    """One profiled kernel launch."""

    launch_id: int
    name: str
    demangled_name: str
    device: int | None
    compute_capability: str | None
    context: int | None
    stream: int | None
    grid: str | None
    block: str | None
    metrics: list[Metric] = field(default_factory=list)
    rules: list[RuleResult] = field(default_factory=list)


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Integer columns of ncu_kernels (schema_ncu.sql) and the largest value each holds.
INT_COLUMNS = {"launch_id": INT32_MAX, "device": INT32_MAX, "registers_per_thread": INT32_MAX,
               "context": INT64_MAX, "stream": INT64_MAX, "shared_memory_bytes": INT64_MAX}

# One row per launch: ``row`` is its position in the report (a corrupt export may repeat a launch id). The fixed
# columns of ncu_kernels that come from the report itself.
KERNEL_SCHEMA = pa.schema([("row", pa.int32()), ("launch_id", pa.int64()), ("name", pa.string()),
                           ("demangled_name", pa.string()), ("device", pa.int64()),
                           ("compute_capability", pa.string()), ("context", pa.int64()), ("stream", pa.int64()),
                           ("grid", pa.string()), ("block", pa.string())])
# One row per metric of a launch, launch by launch and each launch's metrics in their order.
METRIC_SCHEMA = pa.schema([("launch_id", pa.int64()), ("metric", pa.string()), ("value", pa.float64()),
                           ("unit", pa.string()), ("text", pa.string())])
RULE_SCHEMA = pa.schema([("launch_id", pa.int64()), ("rule_id", pa.string()), ("rule_name", pa.string()),
                         ("section", pa.string()), ("type", pa.string()), ("title", pa.string()),
                         ("message", pa.string()), ("speedup_pct", pa.float64()), ("speedup_type", pa.string())])


@dataclass
class LaunchTables:
    """Profiled launches as Arrow tables: ``kernels`` (KERNEL_SCHEMA), ``metrics`` as batches in order
    (METRIC_SCHEMA's columns; made one batch at a time as the writer takes them, so that a large export is never
    whole in memory as rows) and ncu's rule results (RULE_SCHEMA)."""

    count: int
    kernels: pa.Table
    metrics: Iterable[pa.Table]
    rules: pa.Table = field(default_factory=lambda: arrow_values.table((), RULE_SCHEMA))


def launch_tables(launches: Sequence[Launch]) -> LaunchTables:
    """The tables of launches read as objects (``.ncu-rep``)."""
    kernels = [{"row": row, "launch_id": launch.launch_id, "name": launch.name,
                "demangled_name": launch.demangled_name, "device": launch.device,
                "compute_capability": launch.compute_capability, "context": launch.context, "stream": launch.stream,
                "grid": launch.grid, "block": launch.block} for row, launch in enumerate(launches)]
    metrics = [{"launch_id": launch.launch_id, "metric": m.name, "value": m.value, "unit": m.unit, "text": m.text}
               for launch in launches for m in launch.metrics]
    rules = [{"launch_id": launch.launch_id, **vars(r)} for launch in launches for r in launch.rules]
    return LaunchTables(len(launches), arrow_values.table(kernels, KERNEL_SCHEMA),
                        [arrow_values.table(metrics, METRIC_SCHEMA)], arrow_values.table(rules, RULE_SCHEMA))


def check_fixed(path: Path, launch_id: int, values: dict[str, int | None]) -> None:
    """Refuse a launch id or a fixed integer column (device, context, stream) past its column's range before it
    meets a typed array: one line naming the launch."""
    for column, value in {"launch_id": launch_id, **values}.items():
        top = INT_COLUMNS[column]
        if value is not None and not -top - 1 <= value <= top:
            raise InputError(out_of_range(path, launch_id, column, value))


def out_of_range(path: Path, launch_id: float | None, column: str, value: float) -> str:
    """The one-line error for a column's value no profiler writes."""
    where = f"{path}: launch {launch_id:.0f}" if launch_id is not None and 0 <= launch_id <= INT32_MAX else f"{path}"
    return f"{where}: {column.replace('_', ' ')} {_shown(value)} is out of range (corrupt export?)"


_FLOAT_MAX = int(sys.float_info.max)


def _shown(value: float) -> str:
    """A number for a message, in six digits; an integer past a float's range (a corrupt export can write hundreds
    of digits) as that."""
    if isinstance(value, int) and abs(value) > _FLOAT_MAX:
        return "of more than 308 digits"
    return f"{value:.6g}"


_ANONYMOUS = re.compile(r"\((anonymous namespace|unnamed namespace)\)")


def short_name(demangled: str) -> str:
    """The bare function name of a demangled kernel signature.

    'void at::<unnamed>::foo_kernel<float, 4>(int, T3)' → 'foo_kernel'; 'nvjet_sm90_tst_…' stays as it is.
    Template arguments and parameter lists are skipped by bracket depth, so nested lambdas and '>>' do not confuse it.
    """
    text = _ANONYMOUS.sub("anonymous", demangled.strip())
    top: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(" and depth == 0 and top and "".join(top).strip():
            break  # the parameter list of the function itself
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth > 0:
            depth -= 1
        elif depth == 0:
            top.append(ch)
    words = "".join(top).split()
    name = words[-1].split("::")[-1] if words else ""
    return name or demangled[:200]
