"""Triton's Proton profiler traces (``proton.start(name, data="trace")``: Chrome-trace JSON, ``<name>.chrome_trace``)
into the store, through the shared reader of Chrome-trace event arrays (``chrome_trace``).

A Proton trace holds GPU kernels and nothing of the host: one complete event ('X', category 'kernel') per kernel
run, its time in µs from the first kernel, and in ``args.call_stack`` the Proton scopes open when it was launched
(``["ROOT", "step_3", kernel name]``). It names no device, stream, process or rank: every kernel is stored as
device 0 of rank 0, on the stream of its lane (``tid``), with no correlation to a launch. It records no operator
shapes, no host ranges or calls, no memory events and no job size.

Steps are the scopes' windows in time. Proton's scopes are per thread, so kernels launched from another thread
(autograd's backward thread) carry whatever scope that thread last saw: in a training loop of
``with proton.scope(f"step_{i}")`` most kernels of every step say ``step_0``. A step is therefore not its scope's
kernels but the window from its scope's first kernel to the next step scope's first kernel (the last step: to
the last kernel under any step scope), and every kernel that starts in the window belongs to the step
(``trace.steps`` places work by its GPU start where a trace records no launches). The step scopes are the
scopes of one name with a number at its end (``step_3``; as ``trace.steps`` groups host ranges), seen at least
three times; of several such names, the one with the most.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.ingest.chrome import chrome_trace
from tracedoc.ingest.nccl import nccl_kernel
from tracedoc.store import Store

FORMAT = "proton"

# Every Proton event names the scopes it ran under, outermost first, from ROOT; no other producer writes this.
_CALL_STACK = re.compile(rb'"call_stack"\s*:\s*\[\s*"ROOT"')
# What Kineto's header holds and Proton's never does: a '.chrome_trace' file with these is not Proton's.
_KINETO_HEADER = re.compile(rb'"(?:schemaVersion|deviceProperties|distributedInfo)"\s*:')

_COLUMNS = ("{ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', tid: 'VARCHAR', ts: 'DOUBLE', dur: 'DOUBLE', "
            "args: 'STRUCT(call_stack VARCHAR[])'}")
_TS_NS = "CAST(round(ts * 1000) AS BIGINT)"  # Proton writes µs with ns decimals
_DUR_NS = "CAST(round(greatest(coalesce(dur, 0), 0) * 1000) AS BIGINT)"

_NORMALIZE_SQL = f"""
-- Each kernel's scopes (call_stack between ROOT and the kernel), until the step windows are made (_finish).
CREATE TEMP TABLE IF NOT EXISTS _proton_scopes (source_id INTEGER, rank INTEGER, ts_ns BIGINT, end_ns BIGINT,
                                               scope VARCHAR);

INSERT INTO gpu_activity
SELECT source_id, rank, 0, coalesce(TRY_CAST(tid AS BIGINT), 0), 'kernel',
       CASE WHEN {nccl_kernel("name")} THEN 'communication' ELSE 'compute' END,
       name, {_TS_NS}, {_DUR_NS}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM _raw WHERE ph = 'X' AND lower(cat) = 'kernel' AND ts IS NOT NULL;

INSERT INTO _proton_scopes
SELECT source_id, rank, ts_ns, ts_ns + dur_ns, unnest(args.call_stack[2:len(args.call_stack) - 1])
FROM (SELECT source_id, rank, args, {_TS_NS} AS ts_ns, {_DUR_NS} AS dur_ns
      FROM _raw WHERE ph = 'X' AND lower(cat) = 'kernel' AND ts IS NOT NULL AND len(args.call_stack) > 2);
"""

# {source_ids}: the sources just read. The step scopes of each source (scopes of one name but for a number at its
# end, seen at least 3 times; of several such names, the one seen most often, then the one over the most kernels)
# and each one's window: from its first kernel to the next one's first, the last to the end of the last kernel
# under any of them.
_FINISH_SQL = r"""
INSERT INTO steps
WITH numbered AS (
    SELECT source_id, rank, scope, regexp_replace(scope, '\s*#?\s*[0-9]+$', ' #') AS family,
           TRY_CAST(regexp_extract(scope, '([0-9]+)$', 1) AS INTEGER) AS step,
           min(ts_ns) AS first_ns, max(end_ns) AS last_ns, count(*) AS kernels
    FROM _proton_scopes
    WHERE source_id IN ({source_ids}) AND regexp_matches(scope, '[0-9]+$')
    GROUP BY source_id, rank, scope
),
families AS (
    SELECT source_id, family, count(*) AS scopes, sum(kernels) AS kernels, max(last_ns) AS last_ns
    FROM numbered WHERE step IS NOT NULL GROUP BY source_id, family HAVING count(*) >= 3
),
chosen AS (
    SELECT source_id, arg_max(family, (scopes, kernels, family)) AS family,
           arg_max(last_ns, (scopes, kernels, family)) AS last_ns
    FROM families GROUP BY source_id
)
SELECT source_id, rank, step, first_ns,
       coalesce(lead(first_ns) OVER (PARTITION BY source_id ORDER BY first_ns, step), c.last_ns) - first_ns,
       scope
FROM numbered n JOIN chosen c USING (source_id, family)
WHERE n.step IS NOT NULL;

DROP TABLE IF EXISTS _proton_scopes;
"""


def sniff(path: Path, head: bytes) -> bool:
    """A Chrome trace whose events name their Proton scopes from ROOT (``args.call_stack``), or one that Proton
    named (``.chrome_trace``) without Kineto's header: Kineto's traces are read by ``kineto``."""
    if not chrome_trace.sniff(head):
        return False
    if _CALL_STACK.search(head):
        return True
    named = ".chrome_trace" in path.name.lower()
    return named and not _KINETO_HEADER.search(head)


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    """Read one trace file (plain JSON) into the store's tables under ``source_id``."""
    return load_many(store, [(source_id, path)], workdir)[0]


def load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path,
              started: Callable[[int], None] | None = None) -> list[LoadResult]:
    """Read plain trace files into the store, each under its source id (``chrome_trace.load_many``)."""
    return chrome_trace.load_many(store, sources, workdir, PROTON, started)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    """Read a trace as its bytes stream in (a gzip or xz file as it unpacks; ``chrome_trace.load_stream``)."""
    return chrome_trace.load_stream(store, source_id, stream, workdir, name, PROTON)


def _finish(store: Store, sources: list[chrome_trace.Events]) -> list[LoadResult]:
    """Once all events of these sources are in: the step windows of their scopes."""
    chrome_trace.execute_finish(store, sources, _FINISH_SQL)
    return [LoadResult(None, None, events.count, "Triton Proton profiler (trace)") for events in sources]


def _no_rank(meta: dict[str, Any]) -> int | None:
    """A Proton trace names no rank."""
    return None


PROTON = chrome_trace.EventFormat(
    title="Proton trace",
    columns=_COLUMNS,
    normalize_sql=_NORMALIZE_SQL,
    unconvertible=f"(ts IS NOT NULL AND TRY_{_TS_NS} IS NULL) OR TRY_{_DUR_NS} IS NULL",
    rank=_no_rank,
    finish=_finish,
)
