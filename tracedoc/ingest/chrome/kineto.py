"""PyTorch profiler traces (Kineto Chrome-trace JSON) into the store, through the shared reader of Chrome-trace
event arrays (``chrome_trace``); gzip and xz files are read as they unpack.

What is Kineto's own: the fields read of each event (``_COLUMNS``), each event's kind decided as it is read
(``_KIND``), the SQL that normalises them into the store's tables (``_NORMALIZE_CHUNK_SQL``, per group of parts),
and what is done once all events are in (flow-linked correlations, steps, devices and the header's facts:
``_finish``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracedoc.ingest.base import ByteStream, LoadResult, Recording
from tracedoc.ingest.chrome import chrome_trace, kineto_memory
from tracedoc.ingest.nccl import nccl_kernel
from tracedoc.store import Store

if TYPE_CHECKING:
    import duckdb  # only for types: DuckDB is imported where a store is used (a cached report needs none)

FORMAT = "torch"

_DIGITS = re.compile(r"-?[0-9]{1,18}")

# Fields read from each event's "args"; everything is read as text and cast in SQL, so a trace that writes a
# number as a string (or the reverse) still loads.
_ARGS_TYPE = (
    'STRUCT("device" VARCHAR, "stream" VARCHAR, "correlation" VARCHAR, "External id" VARCHAR, '
    '"bytes" VARCHAR, "registers per thread" VARCHAR, "shared memory" VARCHAR, '
    '"Collective name" VARCHAR, "grid" JSON, "block" JSON, '
    # record_param_comms (collective calls): process group and message sizes
    '"Process Group Name" VARCHAR, "Process Group Description" VARCHAR, "Group size" VARCHAR, "dtype" VARCHAR, '
    '"In msg nelems" VARCHAR, "Out msg nelems" VARCHAR, "In split size" VARCHAR, "Out split size" VARCHAR, '
    # record_shapes=True: operators' input shapes and types
    '"Input Dims" JSON, "Input type" JSON, "Concrete Inputs" JSON)'
)
_COLUMNS = (
    "{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', "
    f"ts: 'DOUBLE', dur: 'DOUBLE', id: 'VARCHAR', args: '{_ARGS_TYPE}'}}"
)


def sniff(path: Path, head: bytes) -> bool:
    """True when the first bytes (decompressed) look like a chrome trace: an object with a ``traceEvents`` array, or
    an array of events."""
    return chrome_trace.sniff(head)


# What a trace's first bytes tell of the process that wrote it (``recording``), as the profiler writes them: the
# header before the events, with distributedInfo's rank before its process groups, then the events, each starting
# with its phase, category, name, pid, tid and ts. A file written otherwise tells nothing, and is read as before.
_EVENTS_KEY = b'"traceEvents"'
_HEADER_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]{0,4096}?"rank"\s*:\s*([0-9]{1,9})\s*[,}]')
_HOST_EVENT = re.compile(
    rb'\{\s*"ph"\s*:\s*"X"\s*,\s*"cat"\s*:\s*"(?:cpu_op|user_annotation|python_function|cuda_runtime|cuda_driver)"'
    rb'\s*,\s*"name"\s*:\s*"(?:[^"\\]|\\.){0,4096}"\s*,\s*"pid"\s*:\s*([0-9]{1,10})\s*,\s*"tid"\s*:\s*[^,{}]{1,64}'
    rb',\s*"ts"\s*:\s*([0-9]{1,17}(?:\.[0-9]{1,9})?)\s*[,}]')


def recording(head: bytes) -> Recording | None:
    """The process that wrote the trace (the pid of its first host event), the rank its header names and when
    that event started, from the file's first bytes; None where they do not say (tracedoc.ingest.cycles)."""
    events = head.find(_EVENTS_KEY)
    if events < 0:
        return None
    event = _HOST_EVENT.search(head, events)
    if event is None:
        return None
    rank = _HEADER_RANK.search(head, 0, events)
    return Recording(int(event.group(1)), None if rank is None else int(rank.group(1)), float(event.group(2)))


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one trace file (plain JSON) into the store's tables under ``source_id``."""
    return load_many(store, [(source_id, path)], workdir)[0]


def load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path,
              started: Callable[[int], None] | None = None) -> list[LoadResult]:
    """Read plain trace files into the store, each under its source id, their parts parsed together
    (``chrome_trace.load_many``); ``started(i)`` is told as the i-th begins."""
    return chrome_trace.load_many(store, sources, workdir, KINETO, started)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """Read a trace as its bytes stream in (a gzip or xz file as it unpacks; ``chrome_trace.load_stream``)."""
    return chrome_trace.load_stream(store, source_id, stream, workdir, name, KINETO)


def _finish(store: Store, sources: list[chrome_trace.Events]) -> list[LoadResult]:
    """What is done once all events of these sources are in: flow-linked correlations, steps, devices."""
    chrome_trace.execute_finish(store, sources, _FINISH_SQL)
    results = []
    for events in sources:
        _insert_devices(store.con, events.source_id, events.meta)
        _insert_header(store.con, events.source_id, events.meta)
        kineto_memory.record_clock(store.con, events.source_id, events.meta)
        rank, world_size = _distributed(events.meta)
        results.append(LoadResult(rank, world_size, events.count, _tool(events.meta)))
    return results


def _rank(meta: dict[str, Any]) -> int | None:
    return _distributed(meta)[0]


_TS_NS = "CAST(round(ts * 1000) AS BIGINT)"  # Kineto times are microseconds with nanosecond decimals
_DUR_NS = "CAST(round(greatest(coalesce(dur, 0), 0) * 1000) AS BIGINT)"


def _try(cast: str) -> str:
    """A conversion above that gives NULL instead of failing."""
    return "TRY_" + cast


# What each event is, decided once as it is read (``EventFormat.derived``), so that each INSERT below picks its rows
# by one small column: the kind of a timed event ('X' with a time) of a GPU category (gpu_activity's kind) or of a
# host one (cpu_activity's; 'other' for any category not named here), or a flow's end; NULL for every other event,
# for the profiler's own spans ('Trace'), flows' starts and GPU categories tracedoc does not read (gpu_*, e.g.
# gpu_user_annotation). An ENUM, stored as its code: its test costs a fifth of a text comparison's, and a range of
# codes stays a filter (an IN list of six or more values is planned as a join, which reorders the rows).
_GPU_KINDS = ("kernel", "memcpy", "memset", "sync")
_HOST_KINDS = ("op", "runtime", "driver", "annotation", "python", "other")
_KIND_TYPE = "ENUM({})".format(", ".join(f"'{kind}'" for kind in (*_GPU_KINDS, *_HOST_KINDS, "flow_end")))
_ON_GPU = f"enum_code(kind) < {len(_GPU_KINDS)}"
_ON_HOST = f"enum_code(kind) BETWEEN {len(_GPU_KINDS)} AND {len(_GPU_KINDS) + len(_HOST_KINDS) - 1}"
_KIND = f"""CAST(CASE
    WHEN ph = 'X' AND ts IS NOT NULL THEN CASE lower(cat)
        WHEN 'kernel' THEN 'kernel'
        WHEN 'gpu_memcpy' THEN 'memcpy' WHEN 'memcpy' THEN 'memcpy'
        WHEN 'gpu_memset' THEN 'memset' WHEN 'memset' THEN 'memset'
        WHEN 'cuda_sync' THEN 'sync'
        WHEN 'cpu_op' THEN 'op' WHEN 'operator' THEN 'op'
        WHEN 'cuda_runtime' THEN 'runtime' WHEN 'runtime' THEN 'runtime'
        WHEN 'cuda_driver' THEN 'driver'
        WHEN 'user_annotation' THEN 'annotation'
        WHEN 'python_function' THEN 'python'
        WHEN 'trace' THEN NULL WHEN 'ac2g' THEN NULL
        ELSE CASE WHEN lower(cat) NOT LIKE 'gpu\\_%' ESCAPE '\\' THEN 'other' END
    END
    WHEN ph = 'f' AND cat = 'ac2g' THEN 'flow_end'
END AS {_KIND_TYPE}) AS kind"""

_NORMALIZE_CHUNK_SQL = f"""
CREATE TEMP TABLE IF NOT EXISTS _flow_end (source_id INTEGER, pid BIGINT, tid BIGINT, ts_ns BIGINT,
                                         correlation_id BIGINT);

INSERT INTO gpu_activity
SELECT
    source_id, rank,
    coalesce(TRY_CAST(args."device" AS INTEGER), TRY_CAST(pid AS INTEGER)),
    coalesce(TRY_CAST(args."stream" AS BIGINT), TRY_CAST(tid AS BIGINT)),
    kind,
    CASE
        WHEN kind <> 'kernel' THEN kind
        WHEN args."Collective name" IS NOT NULL THEN 'communication'
        WHEN {nccl_kernel("name")} THEN 'communication'
        ELSE 'compute'
    END,
    name, {_TS_NS}, {_DUR_NS},
    TRY_CAST(args."correlation" AS BIGINT),
    TRY_CAST(args."bytes" AS BIGINT),
    CASE WHEN kind = 'memcpy' THEN nullif(regexp_extract(name, 'Memcpy ([A-Za-z]+)', 1), '') END,
    CASE WHEN kind <> 'memcpy' THEN NULL
         WHEN name ILIKE '%pageable%' THEN 'pageable'
         WHEN name ILIKE '%pinned%' THEN 'pinned' END,
    CASE WHEN kind = 'kernel' THEN array_to_string(TRY_CAST(args."grid" AS BIGINT[]), ',') END,
    CASE WHEN kind = 'kernel' THEN array_to_string(TRY_CAST(args."block" AS BIGINT[]), ',') END,
    TRY_CAST(args."registers per thread" AS INTEGER),
    TRY_CAST(args."shared memory" AS BIGINT),
    args."Collective name"
FROM _raw
WHERE {_ON_GPU};

INSERT INTO cpu_activity
SELECT
    source_id, rank, TRY_CAST(pid AS BIGINT), TRY_CAST(tid AS BIGINT), kind, name, {_TS_NS}, {_DUR_NS},
    TRY_CAST(args."correlation" AS BIGINT),
    TRY_CAST(args."External id" AS BIGINT)
FROM _raw
WHERE {_ON_HOST};

-- Flow events ('ac2g') link a runtime call (phase s) to the GPU activity it issued (phase f) by id. Kept for
-- GPU activity that carries no 'correlation' argument of its own (older traces).
INSERT INTO _flow_end
SELECT source_id, TRY_CAST(pid AS BIGINT), TRY_CAST(tid AS BIGINT), {_TS_NS}, TRY_CAST(id AS BIGINT)
FROM _raw WHERE kind = 'flow_end';

-- Timed events of categories tracedoc does not analyse, counted per category and process (schema_torch.sql).
INSERT INTO torch_other_events
SELECT source_id, cat, pid, count(*), sum({_DUR_NS})
FROM _raw
WHERE kind = 'other' AND lower(cat) <> 'overhead'
GROUP BY ALL;

-- Operators' input shapes and types, where the trace was recorded with record_shapes=True (schema_torch.sql).
INSERT INTO op_shapes
SELECT source_id, rank, TRY_CAST(args."External id" AS BIGINT), name, {_TS_NS},
       CAST(args."Input Dims" AS VARCHAR), CAST(args."Input type" AS VARCHAR),
       CAST(args."Concrete Inputs" AS VARCHAR)
FROM _raw
WHERE kind = 'op' AND args."Input Dims" IS NOT NULL;

-- Collective calls with their process group and sizes (schema_ranks.sql).
INSERT INTO collective_calls
SELECT source_id, rank, TRY_CAST(tid AS BIGINT), {_TS_NS}, {_DUR_NS},
       TRY_CAST(args."External id" AS BIGINT), args."Collective name", args."Process Group Name",
       args."Process Group Description", TRY_CAST(args."Group size" AS INTEGER), args."dtype",
       TRY_CAST(args."In msg nelems" AS BIGINT), TRY_CAST(args."Out msg nelems" AS BIGINT),
       args."In split size", args."Out split size"
FROM _raw WHERE ph = 'X' AND name = 'record_param_comms' AND ts IS NOT NULL;
"""

# {source_ids}: the sources just read.
_FINISH_SQL = """
UPDATE gpu_activity g SET correlation_id = f.correlation_id
FROM _flow_end f
WHERE g.source_id = f.source_id AND g.correlation_id IS NULL
  AND f.pid = g.device AND f.tid = g.stream AND f.ts_ns = g.ts_ns;

DROP TABLE IF EXISTS _flow_end;

-- ProfilerStep#N annotations mark the steps (a step may be recorded more than once: keep its whole extent).
INSERT INTO steps
SELECT source_id, rank, step, min(ts_ns), max(ts_ns + dur_ns) - min(ts_ns), 'ProfilerStep#' || step
FROM (
    SELECT source_id, rank, TRY_CAST(split_part(name, '#', 2) AS INTEGER) AS step, ts_ns, dur_ns
    FROM cpu_activity
    WHERE source_id IN ({source_ids}) AND name LIKE 'ProfilerStep#%'
)
WHERE step IS NOT NULL
GROUP BY source_id, rank, step;
"""

KINETO = chrome_trace.EventFormat(
    title="PyTorch profiler trace",
    columns=_COLUMNS,
    normalize_sql=_NORMALIZE_CHUNK_SQL,
    unconvertible=f"(ts IS NOT NULL AND {_try(_TS_NS)} IS NULL) OR {_try(_DUR_NS)} IS NULL",
    rank=_rank,
    finish=_finish,
    # distributedInfo after the events: these rows, normalized before it was seen, get the trace's rank
    ranked_tables=("collective_calls", "memory_events"),
    also_read=kineto_memory.read,  # profile_memory=True: the allocator's events, read from the parts a second time
    also_read_when=kineto_memory.PRESENT,
    derived=_KIND,
)


def _distributed(meta: dict[str, Any]) -> tuple[int | None, int | None]:
    """Rank and world size from ``distributedInfo``, when the trace has it. A world of one names no rank of a job:
    a single-GPU run that set up a process group (vLLM's, say) is a run of its own, as one without it is."""
    info = meta.get("distributedInfo")
    if not isinstance(info, dict):
        return None, None
    rank, world_size = _count(info.get("rank")), _count(info.get("world_size"))
    return (None if world_size == 1 else rank), world_size


def _count(value: Any) -> int | None:
    """A rank or world size: an integer, or a string of ASCII digits, in [0, 2^31); None for anything else
    (str.isdigit would take '²', which int() refuses)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31:
        return value
    return None


def _insert_devices(con: duckdb.DuckDBPyConnection, source_id: int, meta: dict[str, Any]) -> None:
    """GPUs from the trace header's ``deviceProperties``."""
    props = meta.get("deviceProperties")
    if not isinstance(props, list):
        return
    rows = []
    for p in props:
        if not isinstance(p, dict):
            continue
        major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        rows.append((source_id, _int(p.get("id")), _str(p.get("name")), cc,
                     _int(p.get("totalGlobalMem")), _int(p.get("numSms"))))
    if rows:
        con.executemany("INSERT INTO devices VALUES (?, ?, ?, ?, ?, ?)", rows)


def _insert_header(con: duckdb.DuckDBPyConnection, source_id: int, meta: dict[str, Any]) -> None:
    """The header's facts about the job's devices: how many GPUs deviceProperties lists (an empty list: the
    profiler saw none), and the process groups' backend."""
    props = meta.get("deviceProperties")
    info = meta.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, dict) else None
    con.execute("INSERT INTO torch_headers VALUES (?, ?, ?)",
                [source_id, len(props) if isinstance(props, list) else None, _str(backend)])


def _tool(meta: dict[str, Any]) -> str:
    """A short description of what wrote the trace."""
    parts = ["torch.profiler"]
    if "schemaVersion" in meta:
        parts.append(f"schema {_str(meta['schemaVersion'])}")
    if "cuda_runtime_version" in meta:
        parts.append(f"CUDA runtime {_str(meta['cuda_runtime_version'])}")
    if "hip_runtime_version" in meta:
        parts.append(f"HIP runtime {_str(meta['hip_runtime_version'])}")
    return ", ".join(parts)


def _int(value: Any) -> int | None:
    """A header number as a 64-bit integer; None when it is not one (header values are untrusted)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63:
        return value
    return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)[:200]
