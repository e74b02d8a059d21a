"""`--format perfetto`: the input's timeline with tracedoc's findings and time attribution as tracks of their own, for
ui.perfetto.dev, Perfetto's trace_processor and chrome://tracing.

Format: the Chrome JSON trace event format (an array of events), which Perfetto opens by its content. It needs no
library: DuckDB writes the events straight from the store, with no Python object per event, as fast as it reads
them. (Perfetto's own protobuf TrackEvent format is richer, but would need the protobuf runtime and an object per
event in Python.) Its one constraint, that slices on one thread nest, holds by construction: GPU work per stream
and host activity per thread as the profilers recorded it, attribution segments that never overlap, and one
thread per finding.

Processes and threads (``pid``/``tid`` are tracedoc's numbers, not the traced program's, so that ranks recorded on
different hosts never collide): per input with a timeline, ``rank R · host`` (one thread per host thread: its
operators, runtime/driver calls, annotation and NVTX ranges, nested as recorded), ``rank R · GPU D`` (one thread
per stream: kernels, copies and memsets; beside it the stream's synchronization records, which span the work they
wait for, and work overlapping the stream's earlier work) and ``rank R · tracedoc`` (its profiler steps, the time
attribution of each GPU, one slice per stretch of one cause, and one thread per finding about the rank, over the
time range the finding is about); findings about the whole job go to ``tracedoc · all ranks``. A flow (an arrow
in Perfetto) goes from each runtime or driver call to the GPU work it launched, matched on the correlation id.
Times are µs after the earliest event (ns kept as three decimals).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tracedoc import strict_json
from tracedoc.errors import InputError
from tracedoc.render.base import Renderer
from tracedoc.report import Report
from tracedoc.store import Store
from tracedoc.store.store import sql_literal
from tracedoc.words.findings import finding_span, scope_text

# pid = PID_STRIDE * (source_id + 1) + role (+ device for GPUs); the whole job's findings have ALL_RANKS_PID.
PID_STRIDE = 1000
HOST, GPU, TRACEDOC = 1, 100, 900
ALL_RANKS_PID = 1
# tids of the tracedoc process: steps, the attribution of GPU d (ATTRIBUTION + d), finding n (FINDING + n)
STEPS_TID, ATTRIBUTION_TID, FINDING_TID = 1, 10, 100_000
# tid of a GPU process: its stream; OVERLAP_TID + stream for work overlapping earlier work of the stream,
# SYNC_TID + stream for its synchronization records
OVERLAP_TID, SYNC_TID = 500_000_000, 1_000_000_000

_EVENTS = """
CREATE OR REPLACE TEMP TABLE perfetto_zero AS
SELECT least((SELECT min(ts_ns) FROM gpu_activity), (SELECT min(ts_ns) FROM cpu_activity),
             (SELECT min(ts_ns) FROM trace_steps)) AS zero_ns;

CREATE OR REPLACE TEMP MACRO perfetto_us(ns) AS (ns - (SELECT zero_ns FROM perfetto_zero)) / 1000.0;

-- GPU activity with its thread: its stream's; the stream's synchronization records (waits that span the work they
-- wait for) on a thread beside it; and work that starts before earlier work of its stream ended (the profilers'
-- rounding, or work the driver overlapped) on a third, since slices of one thread must nest.
CREATE OR REPLACE TEMP VIEW perfetto_gpu AS
SELECT *, CASE WHEN kind = 'sync' THEN $sync_tid + stream
               WHEN ts_ns < max(ts_ns + dur_ns) OVER (PARTITION BY source_id, device, stream, kind = 'sync'
                                                      ORDER BY ts_ns, dur_ns DESC
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
               THEN $overlap_tid + stream ELSE stream END AS tid
FROM gpu_activity;

CREATE OR REPLACE TEMP VIEW perfetto_sources AS
SELECT s.source_id, s.rank FROM sources s
WHERE s.source_id IN (SELECT source_id FROM gpu_activity UNION SELECT source_id FROM cpu_activity);

-- The attribution's segments with their names, joined where one cause and detail runs on (intervals.merge).
CREATE OR REPLACE TEMP VIEW perfetto_attribution_segments AS
SELECT {'lane': c.k, 'step': c.step, 'cause': c.cause, 'detail': coalesce(c.detail, n.name)} AS k, c.s, c.e
FROM attribution_segment_causes c LEFT JOIN attribution_named n ON n.k = c.k AND n.s = c.s
UNION ALL
SELECT {'lane': k, 'step': step, 'cause': cause, 'detail': detail}, s, e FROM attribution_outside;
CREATE OR REPLACE TEMP VIEW perfetto_attribution AS
SELECT l.source_id, l.device, m.k.step AS step, m.k.cause AS cause, m.k.detail AS detail, m.s, m.e
FROM intervals_merge('perfetto_attribution_segments') m JOIN attribution_lanes l ON l.k = m.k.lane;

-- Launch → GPU work: each runtime or driver call and the GPU work with its correlation id, as a flow (Chrome
-- JSON flow events: 's' on the call, 'f' bound to the enclosing slice on the GPU, one id per pair), so that
-- Perfetto draws an arrow from the launch to its kernel or copy.
CREATE OR REPLACE TEMP VIEW perfetto_flows AS
SELECT r.source_id, r.tid AS host_tid, r.ts_ns AS launch_ns, g.device, g.tid AS gpu_tid, g.ts_ns AS gpu_ns,
       (r.source_id + 1) * 1000000000000 + r.correlation_id AS id
FROM cpu_activity r JOIN perfetto_gpu g
  ON g.source_id = r.source_id AND g.correlation_id = r.correlation_id AND g.kind <> 'sync'
WHERE r.kind IN ('runtime', 'driver') AND r.correlation_id IS NOT NULL;

CREATE OR REPLACE TEMP VIEW perfetto_slices AS
SELECT 'process_name' AS name, '__metadata' AS cat, 'M' AS ph, 0.0 AS ts, 0.0 AS dur,
       $stride * (source_id + 1) + $host AS pid, 0 AS tid,
       json_object('name', 'rank ' || rank || ' · host') AS args
FROM perfetto_sources
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, $stride * (source_id + 1) + $host, tid,
       json_object('name', 'thread ' || tid)
FROM (SELECT DISTINCT source_id, tid FROM cpu_activity)
UNION ALL
SELECT 'process_name', '__metadata', 'M', 0.0, 0.0, $stride * (source_id + 1) + $gpu + device, 0,
       json_object('name', 'rank ' || any_value(rank) || ' · GPU ' || device)
FROM gpu_activity GROUP BY source_id, device
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, $stride * (source_id + 1) + $gpu + device, tid,
       json_object('name', 'stream ' || stream || CASE WHEN tid >= $sync_tid THEN ' · syncs'
                                                       WHEN tid >= $overlap_tid THEN ' · overlapping' ELSE '' END)
FROM (SELECT DISTINCT source_id, device, stream, tid FROM perfetto_gpu)
UNION ALL
SELECT 'process_name', '__metadata', 'M', 0.0, 0.0, $stride * (source_id + 1) + $tracedoc, 0,
       json_object('name', 'rank ' || rank || ' · tracedoc')
FROM perfetto_sources
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, $stride * (source_id + 1) + $tracedoc, $steps_tid,
       json_object('name', 'steps')
FROM (SELECT DISTINCT source_id FROM trace_steps)
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, $stride * (source_id + 1) + $tracedoc,
       $attribution_tid + device, json_object('name', 'time attribution · GPU ' || device)
FROM attribution_lanes
UNION ALL
SELECT name, kind, 'X', perfetto_us(ts_ns), dur_ns / 1000.0, $stride * (source_id + 1) + $host, tid,
       json_object('kind', kind, 'correlation_id', correlation_id)
FROM cpu_activity
UNION ALL
SELECT name, kind, 'X', perfetto_us(ts_ns), dur_ns / 1000.0, $stride * (source_id + 1) + $gpu + device, tid,
       json_object('kind', kind, 'category', category, 'correlation_id', correlation_id, 'bytes', bytes,
                   'grid', grid, 'block', block)
FROM perfetto_gpu
UNION ALL
SELECT CASE WHEN warmup THEN 'warm-up step ' ELSE 'step ' END || step, 'step', 'X', perfetto_us(ts_ns),
       dur_ns / 1000.0, $stride * (source_id + 1) + $tracedoc, $steps_tid, json_object('step', step, 'warmup', warmup)
FROM trace_steps
UNION ALL
SELECT cause, 'attribution', 'X', perfetto_us(s), (e - s) / 1000.0,
       $stride * (source_id + 1) + $tracedoc, $attribution_tid + device,
       json_object('cause', cause, 'detail', detail, 'step', step)
FROM perfetto_attribution
UNION ALL
SELECT name, cat, ph, ts, dur, pid, tid, args FROM perfetto_findings;

CREATE OR REPLACE TEMP VIEW perfetto_events AS
SELECT name, cat, ph, ts, dur, pid, tid, args, NULL::BIGINT AS id, NULL::VARCHAR AS bp FROM perfetto_slices
UNION ALL
-- both ends of each flow from one pass over the launches and their work
SELECT 'launch', 'launch', p.ph, perfetto_us(CASE p.ph WHEN 's' THEN launch_ns ELSE gpu_ns END), NULL,
       $stride * (source_id + 1) + CASE p.ph WHEN 's' THEN $host ELSE $gpu + device END,
       CASE p.ph WHEN 's' THEN host_tid ELSE gpu_tid END, '{}', id, CASE p.ph WHEN 'f' THEN 'e' END
FROM perfetto_flows CROSS JOIN (VALUES ('s'), ('f')) p(ph);
"""


class PerfettoRenderer(Renderer):
    """The trace for Perfetto as one string, from the report's cached store (`tracedoc analyze --format perfetto`
    writes it to the file straight from the store it analysed, without this)."""

    name = "perfetto"
    extension = ".perfetto.json"

    def render(self, report: Report) -> str:
        if report.store_path is None or not report.store_path.is_file():
            raise InputError("a Perfetto trace is written from the report's store, and this report has none (made "
                             "without the cache, on a Dask cluster, or loaded from JSON): run tracedoc analyze "
                             "--format perfetto on the inputs")
        with Store.open(report.store_path) as store, tempfile.TemporaryDirectory(prefix="tracedoc-perfetto-") as tmp:
            path = Path(tmp) / "trace.json"
            write_trace(store, report, path)
            return path.read_text()


def write_trace(store: Store, report: Report, path: Path) -> None:
    """Write the Perfetto trace of ``store`` and ``report`` to ``path``; InputError when the store holds no
    timeline (an Nsight Compute report, flight-recorder dumps, GPU health records)."""
    if report.summary.get("basis") != "timeline":
        formats = ", ".join(sorted({i.format for i in report.inputs})) or "none"
        raise InputError(f"no timeline to write: a Perfetto trace needs PyTorch or Nsight Systems traces (the inputs "
                         f"are {formats})")
    store.include("attribution.time")
    store.include("intervals.merge")
    store.con.execute("CREATE OR REPLACE TEMP TABLE perfetto_findings (name VARCHAR, cat VARCHAR, ph VARCHAR, "
                      "ts DOUBLE, dur DOUBLE, pid BIGINT, tid BIGINT, args JSON)")
    params = {"stride": PID_STRIDE, "host": HOST, "gpu": GPU, "tracedoc": TRACEDOC, "steps_tid": STEPS_TID,
              "attribution_tid": ATTRIBUTION_TID, "sync_tid": SYNC_TID, "overlap_tid": OVERLAP_TID}
    sql = _EVENTS
    for name, value in sorted(params.items(), key=lambda kv: -len(kv[0])):  # numbers of ours, not input
        sql = sql.replace(f"${name}", str(int(value)))
    store.con.execute(sql)
    rows = finding_events(store, report)
    if rows:
        store.con.executemany("INSERT INTO perfetto_findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    store.con.execute(f"COPY (SELECT * FROM perfetto_events) TO {sql_literal(str(path))} (FORMAT json, ARRAY true)")


def finding_events(store: Store, report: Report) -> list[tuple[Any, ...]]:
    """Each finding as a slice on a thread of its own, over the time it is about (finding_span)."""
    zero = store.scalar("SELECT zero_ns FROM perfetto_zero")
    if zero is None:
        return []
    sources = {r["rank"]: r["source_id"] for r in store.query("SELECT source_id, rank FROM perfetto_sources")}
    window_rows = store.query("SELECT * FROM trace_windows")
    windows = {r["source_id"]: (r["start_ns"], r["end_ns"]) for r in window_rows}
    origins = {r["source_id"]: r["capture_start_ns"] for r in window_rows}
    steps = {(r["source_id"], r["step"]): (r["ts_ns"], r["ts_ns"] + r["dur_ns"])
             for r in store.query("SELECT source_id, step, ts_ns, dur_ns FROM trace_steps")}
    rows: list[tuple[Any, ...]] = []
    named: set[int] = set()
    for number, finding in enumerate(report.findings, 1):
        source = sources.get(finding.scope.rank)
        own_steps = {step: span for (s, step), span in steps.items() if s == source}
        span = finding_span(finding, windows.get(source), own_steps, 1e6, origins.get(source)) \
            if source is not None else None
        if span is None:  # the whole job (or a rank without a timeline): every window
            if not windows:
                continue
            span, pid = (min(w[0] for w in windows.values()), max(w[1] for w in windows.values())), ALL_RANKS_PID
        else:
            pid = PID_STRIDE * (source + 1) + TRACEDOC
        if pid == ALL_RANKS_PID and pid not in named:
            named.add(pid)
            rows.append(("process_name", "__metadata", "M", 0.0, 0.0, pid, 0,
                         strict_json.dumps({"name": "tracedoc · all ranks"})))
        tid = FINDING_TID + number
        rows.append(("thread_name", "__metadata", "M", 0.0, 0.0, pid, tid,
                     strict_json.dumps({"name": f"finding #{number} · {finding.rule}"})))
        args = {"rule": finding.rule, "severity": finding.severity, "where": scope_text(finding.scope.to_dict()),
                "impact_ms": finding.impact_ms, "impact_pct": finding.impact_pct, "message": finding.message,
                "fix": finding.fix, "part_of": finding.part_of}
        rows.append((f"#{number} {finding.title}", f"finding,{finding.severity}", "X", (round(span[0]) - zero) / 1000.0,
                     (span[1] - span[0]) / 1000.0, pid, tid, strict_json.dumps(args)))
    return rows
