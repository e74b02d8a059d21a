"""Nsight Compute reports (``.ncu-rep``) into launches, through NVIDIA's ``ncu-report`` package (optional extra).

``ncu_report`` loads a truncated report without complaint (it just returns fewer launches or launches without
metrics), so the file's container is checked first: the magic ``NVR\\0``, a size-prefixed file header, then
blocks of [u32 header size][BlockHeader protobuf][payload], where the block header's field 5 is the payload size
and field 2 the number of profile results in it. A complete report ends exactly at the end of its last block.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any, BinaryIO

from tracedoc.errors import InputError
from tracedoc.ingest.compressed import unpacked_name
from tracedoc.ingest.ncu.ncu_model import Launch, Metric, RuleResult

MAGIC = b"NVR\x00"
_PAYLOAD_SIZE_FIELD = 5
_RESULT_COUNT_FIELD = 2
_MESSAGE_TYPES = {0: "none", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP_TYPES = {1: "local", 2: "global"}
_VALUE_KIND_UNKNOWN = 0  # groups and breakdowns: no value of their own
_VALUE_KIND_STRING = 2
# Entries that are not measurements of the launch: lists of metric names and PM-sampling series (which the CSV
# export leaves out as well).
_NOT_MEASUREMENTS = ("group:", "breakdown:", "pmsampling:")


def is_report(head: bytes) -> bool:
    """True when the first bytes are an Nsight Compute report."""
    return head[:4] == MAGIC


def read(path: Path) -> list[Launch]:
    """Every profiled launch of the report with all its metrics and ncu's stored rule results."""
    expected = count_results(path)
    ncu_report = _import_ncu_report(path)
    try:
        context = ncu_report.load_report(str(path))
        actions = [rng.action_by_idx(j) for i in range(context.num_ranges())
                   for rng in [context.range_by_idx(i)] for j in range(rng.num_actions())]
        if len(actions) != expected:
            raise InputError(f"{path}: corrupt report ({expected} profile results in the file, ncu_report read "
                             f"{len(actions)})")
        if not actions:
            raise InputError(f"{path}: the report holds no profiled kernel")
        return [_launch(ncu_report, launch_id, action) for launch_id, action in enumerate(actions)]
    except InputError:
        raise
    except Exception as exc:  # the native library raises assorted types for unreadable files
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise InputError(f"{path}: ncu_report cannot read this report ({reason})") from None


def count_results(path: Path) -> int:
    """Walk the report's blocks to the end of the file; return the number of profile results it holds.

    Only the block headers are read (seeking over the payloads), so a large report costs little here.
    """
    corrupt = InputError(f"{path}: truncated or corrupt Nsight Compute report")
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            if f.read(4) != MAGIC:
                raise corrupt
            pos = 8 + _u32(f, corrupt)
            results = 0
            while pos < size:
                f.seek(pos)
                header_size = _u32(f, corrupt)
                header = f.read(header_size)
                if len(header) != header_size:
                    raise corrupt
                try:
                    fields = _varint_fields(header)
                except (IndexError, ValueError):
                    raise corrupt from None
                results += fields.get(_RESULT_COUNT_FIELD, 0)
                pos += 4 + header_size + fields.get(_PAYLOAD_SIZE_FIELD, 0)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if pos != size:
        raise corrupt
    return results


def _u32(f: BinaryIO, error: InputError) -> int:
    raw = f.read(4)
    if len(raw) != 4:
        raise error
    return struct.unpack("<I", raw)[0]


def _varint_fields(buf: bytes) -> dict[int, int]:
    """The integer (varint) fields of a protobuf message; other wire types are skipped."""
    fields: dict[int, int] = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields[number], i = _varint(buf, i)
        elif wire == 2:
            length, i = _varint(buf, i)
            i += length
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > len(buf):
            raise ValueError("field past the end of the message")
    return fields


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i
        if shift > 63:
            raise ValueError("varint too long")


def _import_ncu_report(path: Path, compression: str | None = None) -> Any:
    """NVIDIA's ncu_report module; without it, one line naming ``path`` as the user gave it and a command that
    exports the report as a CSV tracedoc reads without it (unpacking a gzip or xz ``compression`` first)."""
    try:
        import ncu_report
    except ImportError:
        report = unpacked_name(path) if compression else path  # x.ncu-rep.xz unpacks beside itself to x.ncu-rep
        unpack = f"{'xz' if compression == 'xz' else 'gzip'} -dk {path} && " if compression else ""
        raise InputError(f"{path}: reading .ncu-rep needs NVIDIA's ncu-report package: pip install "
                         f"'tracedoc[ncu]' (or export a CSV: {unpack}ncu --import {report} --csv --page raw "
                         f"--print-units base > {report.with_suffix('').name}.csv)") from None
    return ncu_report


def check_readable(name: Path, compression: str) -> None:
    """Before a compressed report is unpacked: refuse it, naming the user's file, when ncu_report is missing."""
    _import_ncu_report(name, compression)


def _launch(ncu_report: Any, launch_id: int, action: Any) -> Launch:
    metrics = [m for m in (_metric(action, name) for name in action.metric_names()) if m is not None]
    values = {m.name: m.value for m in metrics}
    major, minor = values.get("device__attribute_compute_capability_major"), \
        values.get("device__attribute_compute_capability_minor")
    return Launch(
        launch_id=launch_id, name=action.name(), demangled_name=action.name(ncu_report.IAction.NameBase_DEMANGLED),
        device=_int(values.get("device__attribute_device_index")),
        compute_capability=f"{major:.0f}.{minor:.0f}" if major is not None and minor is not None else None,
        context=_int(values.get("launch__context_id")), stream=_int(values.get("launch__stream_id")),
        grid=_dim(values, "launch__grid_dim"), block=_dim(values, "launch__block_dim"),
        metrics=metrics, rules=[_rule(r) for r in action.rule_results()])


def _metric(action: Any, name: str) -> Metric | None:
    if name.startswith(_NOT_MEASUREMENTS):
        return None
    m = action.metric_by_name(name)
    if m is None or m.kind() == _VALUE_KIND_UNKNOWN:
        return None
    if m.kind() == _VALUE_KIND_STRING:
        text = m.as_string()
        return Metric(name, None, "", text[:1000]) if text else None
    value = m.as_double()
    return Metric(name, value if math.isfinite(value) else None, m.unit(), None)


def _rule(result: Any) -> RuleResult:
    message = result.rule_message() if result.has_rule_message() else {}
    speedup = result.speedup_estimation() if result.has_speedup_estimation() else None
    return RuleResult(rule_id=result.rule_identifier(), rule_name=result.name(), section=result.section_identifier(),
                      type=_MESSAGE_TYPES.get(message.get("type", 0), "none"), title=message.get("title", ""),
                      message=message.get("message", ""),
                      speedup_pct=speedup["speedup"] if speedup else None,
                      speedup_type=_SPEEDUP_TYPES.get(speedup["type"]) if speedup else None)


def _dim(values: dict[str, float | None], prefix: str) -> str | None:
    parts = [_int(values.get(f"{prefix}_{axis}")) for axis in "xyz"]
    return None if any(p is None for p in parts) or not any(parts) else ",".join(str(p) for p in parts)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
