"""PyTorch NCCL flight-recorder dumps into the store: what each rank's collectives were doing when it dumped.

torch writes one dump per rank when a collective times out (``TORCH_NCCL_DUMP_ON_TIMEOUT``; a pickle named
``<prefix><rank>``), or on demand through ``_dump_nccl_trace()`` (pickle) and ``_dump_nccl_trace_json()`` (JSON).
A dump is a small dict (a ring buffer of at most ``TORCH_FR_BUFFER_SIZE`` entries), so it is read whole.

Dumps are untrusted. A pickle is read by an unpickler that refuses every global: only dicts, lists, tuples,
strings and numbers can be built, so nothing in the file can run. Every field is then checked against the shape
torch writes — schema versions "2.1" (torch 2.4), "2.4" (2.5–2.7), "2.9" (2.8), "2.10" (2.9–2.11) and whatever
else carries the same keys — and a missing or malformed field becomes NULL. JSON dumps differ from pickles only in
types (strings for ``pg_status`` values, lists for tuples, 0 for unset times, no stack frames).

What a dump can make the reader build is bounded by limits, not by what the file claims: a pickle can refer to one
record millions of times at two bytes per reference, or hold a tensor shape of 300,000 dimensions. A dump holds at
most ``TRACEDOC_MAX_FR_ENTRIES`` records (default 50,000; torch keeps 2,000 by default), each read with a bounded
amount of work (at most 64 stack frames kept, 64 dimensions per tensor shape), and at most
``TRACEDOC_MAX_FR_VALUES`` values (default 10,000,000): the elements of every list and dict of the dump, each
counted once, plus what the reader builds from lists of any length — tensor shapes and their dimensions, dtypes,
groups and their ranks — counted once per record that refers to them. The member ranks its process groups declare
(each group's distinct ranks, summed over its groups) are at most ``TRACEDOC_MAX_FR_RANKS`` (default 262,144: a
rank belongs to the default group of every rank and a few smaller ones), because the hang analyses and the report
hold a row per group member; and it declares at most ``TRACEDOC_MAX_FR_GROUPS`` groups (default 262,144, as many
as member ranks), counted in ``pg_config`` and ``pg_status`` as soon as the dump is parsed, before anything else is
read. A dump nests at most 64 levels deep (torch's nest 5). Strings are stored as valid
Unicode: lone surrogates (which pickles and JSON escapes can carry) become U+FFFD and C0/C1 control characters are
dropped. The rows go into the store as Arrow tables, one statement per table, whatever their number.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, TypeGuard

import pyarrow as pa

from tracedoc.errors import InputError, first_line
from tracedoc.ingest import arrow_values
from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.ingest.safe_pickle import PICKLE_MAGIC, Budget, check_nesting, env_limit, load_plain
from tracedoc.store import Store
from tracedoc.store.engine import scanning

FORMAT = "flight_recorder"

_DIGITS = re.compile(r"-?\d{1,18}")
_MAX_FRAMES = 64  # innermost Python frames kept per entry
_MAX_TEXT = 1000  # characters kept of any string from a dump
_MAX_DIMS = 64  # dimensions of one tensor shape
_MAX_DEPTH = 64  # nesting levels of a dump (torch's nest 5: dump, entries, entry, frames, frame)
_ENTRIES_VAR, _DEFAULT_MAX_ENTRIES = "TRACEDOC_MAX_FR_ENTRIES", 50_000
_VALUES_VAR, _DEFAULT_MAX_VALUES = "TRACEDOC_MAX_FR_VALUES", 10_000_000
_RANKS_VAR, _DEFAULT_MAX_RANKS = "TRACEDOC_MAX_FR_RANKS", 262_144
_GROUPS_VAR, _DEFAULT_MAX_GROUPS = "TRACEDOC_MAX_FR_GROUPS", 262_144
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")

_FRAME = pa.struct([("name", pa.string()), ("filename", pa.string()), ("line", pa.int32())])
_ENTRY_SCHEMA = pa.schema([
    ("source_id", pa.int32()), ("record_id", pa.int64()), ("pg_id", pa.int64()), ("pg_name", pa.string()),
    ("pg_desc", pa.string()), ("collective_seq_id", pa.int64()), ("p2p_seq_id", pa.int64()),
    ("op_id", pa.int64()), ("profiling_name", pa.string()), ("backend", pa.string()), ("op", pa.string()),
    ("peer", pa.string()), ("is_p2p", pa.bool_()), ("input_sizes", pa.list_(pa.list_(pa.int64()))),
    ("input_dtypes", pa.list_(pa.string())), ("output_sizes", pa.list_(pa.list_(pa.int64()))),
    ("output_dtypes", pa.list_(pa.string())), ("input_numel", pa.int64()), ("output_numel", pa.int64()),
    ("state", pa.string()), ("retired", pa.bool_()), ("time_created_ns", pa.int64()),
    ("time_discovered_started_ns", pa.int64()), ("time_discovered_completed_ns", pa.int64()),
    ("duration_ms", pa.float64()), ("timeout_ms", pa.int64()), ("thread_name", pa.string()),
    ("frames", pa.list_(_FRAME)),
])
_GROUP_SCHEMA = pa.schema([("source_id", pa.int32()), ("pg_name", pa.string()), ("pg_desc", pa.string()),
                           ("ranks", pa.list_(pa.int32()))])
_STATUS_SCHEMA = pa.schema([("source_id", pa.int32()), ("pg_id", pa.int64()), ("last_enqueued_seq", pa.int64()),
                            ("last_started_seq", pa.int64()), ("last_completed_seq", pa.int64())])


def sniff(path: Path, head: bytes) -> bool:
    """True for a pickle or JSON object that carries the flight recorder's top-level keys."""
    if PICKLE_MAGIC.match(head):
        return b"version" in head and (b"pg_config" in head or b"collective_seq_id" in head)
    text = head.lstrip()
    return (text[:1] == b"{" and b'"traceEvents"' not in head
            and (b'"pg_config"' in head or b'"collective_seq_id"' in head))


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one dump into fr_dumps, fr_process_groups, fr_pg_status and fr_entries under ``source_id``."""
    return _load(store, source_id, path.read_bytes(), path)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """Read a compressed dump from its stream as ``load`` reads a plain one: the dump is parsed whole either way,
    so it is gathered in memory (at most the format's ``max_bytes``: ingest bounds the stream) and never unpacked
    to disk."""
    return _load(store, source_id, b"".join(stream.chunks()), name)


def _load(store: Store, source_id: int, raw: bytes, path: Path) -> LoadResult:
    """Read the dump's bytes (``path``: the input as the user named it, for errors)."""
    dump, encoding = _read(raw, path)
    entries = dump.get("entries") or []
    if not isinstance(entries, list):
        raise InputError(f"{path}: malformed flight-recorder dump ('entries' is not a list of records)")
    max_entries = env_limit(_ENTRIES_VAR, _DEFAULT_MAX_ENTRIES)
    if len(entries) > max_entries:
        raise InputError(f"{path}: {len(entries):,} flight-recorder records, over the limit of {max_entries:,} "
                         f"(set {_ENTRIES_VAR} to read more)")
    max_groups = env_limit(_GROUPS_VAR, _DEFAULT_MAX_GROUPS)
    for key in ("pg_config", "pg_status"):
        declared = dump.get(key)
        if isinstance(declared, dict | list) and len(declared) > max_groups:
            raise InputError(f"{path}: {len(declared):,} process groups in its {key}, over the limit of "
                             f"{max_groups:,} (set {_GROUPS_VAR} to read more)")
    budget = Budget(path, env_limit(_VALUES_VAR, _DEFAULT_MAX_VALUES), _VALUES_VAR, "the flight-recorder dump",
                    "a value shared by many records counts once per record")
    check_nesting(dump, path, _MAX_DEPTH, "a flight-recorder dump", budget)
    if not all(isinstance(e, dict) for e in entries):
        raise InputError(f"{path}: malformed flight-recorder dump ('entries' is not a list of records)")
    rows = [_entry(e, source_id, budget) for e in entries]
    groups = _process_groups(dump.get("pg_config"), source_id, budget)
    status = _pg_status(dump.get("pg_status"), source_id, budget)
    version = _text(dump.get("version"))
    comm_lib = _text(dump.get("comm_lib_version") or dump.get("nccl_version"))
    backends = Counter(r["backend"] for r in rows if r["backend"])
    backend = backends.most_common(1)[0][0] if backends else None

    con = store.con
    _insert(con, "fr_process_groups", arrow_values.table(
        [dict(zip(_GROUP_SCHEMA.names, g)) for g in groups], _GROUP_SCHEMA))
    _insert(con, "fr_pg_status", arrow_values.table(
        [dict(zip(_STATUS_SCHEMA.names, r)) for r in status], _STATUS_SCHEMA))
    _insert(con, "fr_entries", arrow_values.table(rows, _ENTRY_SCHEMA))
    times = [t for r in rows for t in (r["time_created_ns"], r["time_discovered_started_ns"],
                                       r["time_discovered_completed_ns"]) if t is not None]
    record_ids = [r["record_id"] for r in rows if r["record_id"] is not None]
    con.execute("INSERT INTO fr_dumps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [source_id, encoding, version, comm_lib, backend, len(rows), min(record_ids, default=None),
                 max(times, default=None), any(r["frames"] for r in rows)])

    sizes = [len(g[3]) for g in groups if g[3]]
    tool = f"PyTorch flight recorder {version or '(no version)'} ({encoding}"
    tool += f", {backend or 'library'} {comm_lib})" if comm_lib else ")"
    rank = dump.get("rank")
    return LoadResult(rank=rank if _is_int(rank) and rank >= 0 else None, world_size=max(sizes, default=None),
                      event_count=len(rows), tool=tool if rows else f"{tool}, empty: no recorded collectives")


def _insert(con: Any, table: str, rows: pa.Table) -> None:
    """Insert an Arrow table's rows into ``table`` (by column name) in one statement: a dump may hold hundreds of
    thousands of groups, which row-by-row inserts took minutes over."""
    if not rows.num_rows:
        return
    with scanning(con, "_fr_rows_in", rows):
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _fr_rows_in")


def _read(raw: bytes, path: Path) -> tuple[dict[str, Any], str]:
    """The dump's bytes as a dict, and its encoding (pickle | json)."""
    encoding = "pickle" if PICKLE_MAGIC.match(raw) else "json"
    if encoding == "pickle":
        dump = load_plain(raw, path, "a flight-recorder dump", "flight-recorder pickle")
    else:
        dump = _parse_json(raw, path)
    if not isinstance(dump, dict) or not ({"entries", "pg_config"} & dump.keys()):
        raise InputError(f"{path}: not a flight-recorder dump (no entries or pg_config at the top level)")
    return dump, encoding


def _parse_json(raw: bytes, path: Path) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, integers past Python's digit limit
        detail = first_line(exc)[:120]
        raise InputError(f"{path}: truncated or malformed flight-recorder JSON ({detail})") from None


def _entry(e: dict[str, Any], source_id: int, budget: Budget) -> dict[str, Any]:
    """One ring-buffer record as a row of fr_entries; fields of the wrong type become NULL."""
    name = _text(e.get("profiling_name"))
    backend, _, rest = (name or "").partition(":")
    op, _, peer = rest.partition(" ")
    group = e.get("process_group")
    group = group if isinstance(group, list | tuple) else ()
    is_p2p = e.get("is_p2p")
    if not isinstance(is_p2p, bool):  # older dumps: send/recv are the point-to-point operations
        is_p2p = op in ("send", "recv") if op else None
    in_sizes, out_sizes = _sizes(e.get("input_sizes"), budget), _sizes(e.get("output_sizes"), budget)
    return {
        "source_id": source_id, "record_id": _int(e.get("record_id")), "pg_id": _int(e.get("pg_id")),
        "pg_name": _text(group[0]) if len(group) > 0 else None,
        "pg_desc": _text(group[1]) if len(group) > 1 else None,
        "collective_seq_id": _int(e.get("collective_seq_id")), "p2p_seq_id": _int(e.get("p2p_seq_id")),
        "op_id": _int(e.get("op_id")), "profiling_name": name,
        "backend": backend if rest else None, "op": op or None, "peer": peer or None, "is_p2p": is_p2p,
        "input_sizes": in_sizes, "input_dtypes": _strings(e.get("input_dtypes"), budget),
        "output_sizes": out_sizes, "output_dtypes": _strings(e.get("output_dtypes"), budget),
        "input_numel": _numel(in_sizes), "output_numel": _numel(out_sizes),
        "state": _text(e.get("state")), "retired": e.get("retired") if isinstance(e.get("retired"), bool) else None,
        "time_created_ns": _time(e.get("time_created_ns")),
        "time_discovered_started_ns": _time(e.get("time_discovered_started_ns")),
        "time_discovered_completed_ns": _time(e.get("time_discovered_completed_ns")),
        "duration_ms": _float(e.get("duration_ms")),
        "timeout_ms": _int(e.get("timeout_ms")), "thread_name": _text(e.get("thread_name")),
        "frames": _frames(e.get("frames")),
    }


def _process_groups(config: Any, source_id: int,
                    budget: Budget) -> list[tuple[int, str | None, str | None, list[int] | None]]:
    """pg_config: {name: {name, desc, ranks: "[0, 1]"}} (older dumps: {name: ranks})."""
    if not isinstance(config, dict):
        return []
    rows = []
    members = _Members(budget.path)
    for key, info in config.items():
        if isinstance(info, dict):
            name, desc, ranks = info.get("name", key), info.get("desc"), info.get("ranks")
        else:
            name, desc, ranks = key, None, info
        budget.spend(3)
        ranks = _ranks(ranks, budget)
        members.add(ranks)
        rows.append((source_id, _text(name), _text(desc), ranks))
    return rows


class _Members:
    """Counts the member ranks a dump's groups declare (each group's distinct ranks); past TRACEDOC_MAX_FR_RANKS
    the dump is refused: every member becomes rows of the hang analyses and of the report."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.limit = env_limit(_RANKS_VAR, _DEFAULT_MAX_RANKS)
        self.count = 0

    def add(self, ranks: list[int] | None) -> None:
        self.count += len(set(ranks)) if ranks else 0
        if self.count > self.limit:
            raise InputError(f"{self.path}: the flight-recorder dump's process groups declare over {self.limit:,} "
                             f"member ranks (set {_RANKS_VAR} to read more)")


def _pg_status(status: Any, source_id: int,
               budget: Budget) -> list[tuple[int, int | None, int | None, int | None, int | None]]:
    """pg_status: {pg_id: {last_enqueued_collective, last_started_collective, last_completed_collective}}.

    −1 means none and becomes NULL.
    """
    if not isinstance(status, dict):
        return []
    budget.spend(4 * len(status))
    rows = []
    for pg_id, s in status.items():
        if isinstance(s, dict):
            seqs = [_int(s.get(k)) for k in ("last_enqueued_collective", "last_started_collective",
                                             "last_completed_collective")]
            enqueued, started, completed = (v if v is not None and v >= 0 else None for v in seqs)
            rows.append((source_id, _int(pg_id), enqueued, started, completed))
    return rows


def _ranks(value: Any, budget: Budget) -> list[int] | None:
    """Global ranks of a group: a string such as "[0, 1]" in dumps, or a list."""
    if isinstance(value, str):
        budget.spend(len(value) // 2)
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return None
    if isinstance(value, list | tuple):
        budget.spend(len(value))
        if all(_is_int(r) and -(2**31) <= r < 2**31 for r in value):
            return list(value)
    return None


def _sizes(value: Any, budget: Budget) -> list[list[int]] | None:
    """Tensor shapes: a list of lists of ints, or NULL; a shape of over _MAX_DIMS dimensions is refused."""
    if not isinstance(value, list | tuple):
        return None
    budget.spend(len(value))
    out = []
    for shape in value:
        if not isinstance(shape, list | tuple):
            return None
        if len(shape) > _MAX_DIMS:
            raise InputError(f"{budget.path}: a tensor shape of {len(shape):,} dimensions in a flight-recorder "
                             f"record (at most {_MAX_DIMS})")
        budget.spend(len(shape))
        if not all(_is_int(d) for d in shape):
            return None
        out.append([int(d) for d in shape])
    return out


def _numel(sizes: list[list[int]] | None) -> int | None:
    if sizes is None:
        return None
    total = sum(math.prod(shape) for shape in sizes)
    return total if total < 2**63 else None


def _strings(value: Any, budget: Budget) -> list[str] | None:
    if not isinstance(value, list | tuple):
        return None
    budget.spend(len(value))
    if not all(type(v) is str for v in value):
        return None
    return [_clean(v) for v in value]


def _frames(value: Any) -> list[dict[str, Any]] | None:
    """Python stack at enqueue, innermost first: [{name, filename, line}]."""
    if not isinstance(value, list | tuple):
        return None
    kept = value[:_MAX_FRAMES]
    return [{"name": _text(f.get("name")), "filename": _text(f.get("filename")), "line": _int32(f.get("line"))}
            for f in kept if isinstance(f, dict)]


def _is_int(value: Any) -> TypeGuard[int]:
    """An int that fits BIGINT (bool is not an int here)."""
    return type(value) is int and -(2**63) <= value < 2**63


def _int(value: Any) -> int | None:
    """An int, or a string of one (JSON dumps write pg_status that way); NULL otherwise."""
    if type(value) is int:
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value)
    return None


def _int32(value: Any) -> int | None:
    v = _int(value)
    return v if v is not None and -(2**31) <= v < 2**31 else None


def _float(value: Any) -> float | None:
    """A finite float (an int is taken as one); NULL otherwise."""
    if _is_int(value):
        return float(value)
    return value if type(value) is float and math.isfinite(value) else None


def _time(value: Any) -> int | None:
    """A timestamp in ns; unset ones are None in pickles and 0 in JSON dumps."""
    v = _int(value)
    return v if v else None


def _text(value: Any) -> str | None:
    if type(value) is str:
        return _clean(value)
    return str(value) if _is_int(value) else None


def _clean(text: str) -> str:
    """At most _MAX_TEXT characters of valid Unicode: lone surrogates become U+FFFD, C0/C1 control characters
    are dropped."""
    text = text[:_MAX_TEXT]
    if text.isascii() and text.isprintable():
        return text
    return _CONTROLS.sub("", arrow_values.LONE_SURROGATES.sub("\ufffd", text))
