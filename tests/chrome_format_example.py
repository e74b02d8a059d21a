"""A Chrome-trace JSON timeline format built on the shared reader (``tracedoc.ingest.chrome.chrome_trace``), as a new
producer's format would be (docs/ARCHITECTURE.md, "A Chrome-trace JSON timeline format"): its ``EventFormat``
(the fields read of each event, the SQL that stores them) and one line for each of ``load``, ``load_many`` and
``load_stream``. It stores every complete event ('X') as host activity of kind 'other'; tests/test_chrome_trace.py
declares it as a format and reads real traces with it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracedoc.ingest.base import ByteStream, LoadResult
from tracedoc.ingest.chrome import chrome_trace
from tracedoc.store import Store

FORMAT = "chrome_example"

_TS_NS = "CAST(round(ts * 1000) AS BIGINT)"
_DUR_NS = "CAST(round(greatest(coalesce(dur, 0), 0) * 1000) AS BIGINT)"


def _finish(store: Store, sources: list[chrome_trace.Events]) -> list[LoadResult]:
    return [LoadResult(None, None, events.count, "a Chrome trace") for events in sources]


def _no_rank(meta: dict[str, Any]) -> int | None:
    return None


EVENTS = chrome_trace.EventFormat(
    title="Chrome trace",
    columns="{ph: 'VARCHAR', name: 'VARCHAR', pid: 'VARCHAR', tid: 'VARCHAR', ts: 'DOUBLE', dur: 'DOUBLE'}",
    normalize_sql=f"""
        INSERT INTO cpu_activity
        SELECT source_id, rank, TRY_CAST(pid AS BIGINT), TRY_CAST(tid AS BIGINT), 'other', name, {_TS_NS},
               {_DUR_NS}, NULL, NULL
        FROM _raw WHERE ph = 'X' AND ts IS NOT NULL""",
    unconvertible=f"(ts IS NOT NULL AND TRY_{_TS_NS} IS NULL) OR TRY_{_DUR_NS} IS NULL",
    rank=_no_rank,
    finish=_finish,
)


def sniff(path: Path, head: bytes) -> bool:
    return chrome_trace.sniff(head)


def load(store: Store, source_id: int, path: Path, workdir: Path) -> LoadResult:
    return chrome_trace.load_many(store, [(source_id, path)], workdir, EVENTS)[0]


def load_many(store: Store, sources: Sequence[tuple[int, Path]], workdir: Path,
              started: Callable[[int], None] | None = None) -> list[LoadResult]:
    return chrome_trace.load_many(store, sources, workdir, EVENTS, started)


def load_stream(store: Store, source_id: int, stream: ByteStream, workdir: Path, name: Path) -> LoadResult:
    return chrome_trace.load_stream(store, source_id, stream, workdir, name, EVENTS)
