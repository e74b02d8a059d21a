-- export.perfetto: the events of the Perfetto trace (tracedoc.export.perfetto writes them as Chrome JSON).
--
-- The input's timeline with tracedoc's findings and time attribution as tracks of their own. Processes and
-- threads (pid/tid are tracedoc's numbers, not the traced program's, so that ranks recorded on different hosts
-- never collide): per input with a timeline, 'rank R · host' (one thread per host thread), 'rank R · GPU D' (one
-- thread per stream; beside it the stream's synchronization records and work overlapping the stream's earlier
-- work) and 'rank R · tracedoc' (its steps, the attribution of each GPU, and one thread per finding about the
-- rank). Slices of one thread nest, as the format needs. Times in µs after the earliest event (ns kept as three
-- decimals).
-- views stay views
-- include: attribution.time
-- include: intervals.merge
-- include: trace.steps

-- The pid of a source's process of one role (export_perfetto_host(), export_perfetto_gpu(device),
-- export_perfetto_tracedoc()).
CREATE OR REPLACE TEMP MACRO export_perfetto_pid(source_id, role) AS 1000 * (source_id + 1) + role;
-- The role of a source's host process.
CREATE OR REPLACE TEMP MACRO export_perfetto_host() AS 1;
-- The role of a source's GPU process, one per device.
CREATE OR REPLACE TEMP MACRO export_perfetto_gpu(device) AS 100 + device;
-- The role of a source's tracedoc process (steps, attribution, findings).
CREATE OR REPLACE TEMP MACRO export_perfetto_tracedoc() AS 900;
-- The tid of the steps' thread in the tracedoc process.
CREATE OR REPLACE TEMP MACRO export_perfetto_steps_tid() AS 1;
-- The tid of a GPU's attribution thread in the tracedoc process.
CREATE OR REPLACE TEMP MACRO export_perfetto_attribution_tid(device) AS 10 + device;
-- The tid, in a GPU process, of work that overlaps earlier work of its stream.
CREATE OR REPLACE TEMP MACRO export_perfetto_overlap_tid(stream) AS 500000000 + stream;
-- The tid, in a GPU process, of a stream's synchronization records.
CREATE OR REPLACE TEMP MACRO export_perfetto_sync_tid(stream) AS 1000000000 + stream;

-- The trace's zero: its earliest event (ns).
CREATE OR REPLACE TEMP TABLE export_perfetto_zero AS
SELECT least((SELECT min(ts_ns) FROM gpu_activity), (SELECT min(ts_ns) FROM cpu_activity),
             (SELECT min(ts_ns) FROM trace_steps)) AS zero_ns;

-- A time in ns as the trace's µs after its zero.
CREATE OR REPLACE TEMP MACRO export_perfetto_us(ns) AS (ns - (SELECT zero_ns FROM export_perfetto_zero)) / 1000.0;

-- GPU activity with its thread: its stream's; the stream's synchronization records (waits that span the work they
-- wait for) on a thread beside it; and work that starts before earlier work of its stream ended (the profilers'
-- rounding, or work the driver overlapped) on a third, since slices of one thread must nest.
CREATE OR REPLACE TEMP VIEW export_perfetto_gpu AS
SELECT *, CASE WHEN kind = 'sync' THEN export_perfetto_sync_tid(stream)
               WHEN ts_ns < max(ts_ns + dur_ns) OVER (PARTITION BY source_id, device, stream, kind = 'sync'
                                                      ORDER BY ts_ns, dur_ns DESC
                                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
               THEN export_perfetto_overlap_tid(stream) ELSE stream END AS tid
FROM gpu_activity;

-- The sources with a timeline: source_id, rank.
CREATE OR REPLACE TEMP VIEW export_perfetto_sources AS
SELECT s.source_id, s.rank FROM sources s
WHERE s.source_id IN (SELECT source_id FROM gpu_activity UNION SELECT source_id FROM cpu_activity);

-- The attribution's segments with their names, joined where one cause and detail runs on (intervals.merge).
CREATE OR REPLACE TEMP VIEW export_perfetto_attribution_segments AS
SELECT {'lane': c.k, 'step': c.step, 'cause': c.cause, 'detail': coalesce(c.detail, n.name)} AS k, c.s, c.e
FROM attribution_segment_causes c LEFT JOIN attribution_named n ON n.k = c.k AND n.s = c.s
UNION ALL
SELECT {'lane': k, 'step': step, 'cause': cause, 'detail': detail}, s, e FROM attribution_outside;
-- The attribution's slices per source and device: step, cause, detail, s and e (ns).
CREATE OR REPLACE TEMP VIEW export_perfetto_attribution AS
SELECT l.source_id, l.device, m.k.step AS step, m.k.cause AS cause, m.k.detail AS detail, m.s, m.e
FROM intervals_merge('export_perfetto_attribution_segments') m JOIN attribution_lanes l ON l.k = m.k.lane;

-- Launch → GPU work: each runtime or driver call and the GPU work with its correlation id, as a flow (Chrome
-- JSON flow events: 's' on the call, 'f' bound to the enclosing slice on the GPU, one id per pair), so that
-- Perfetto draws an arrow from the launch to its kernel or copy.
CREATE OR REPLACE TEMP VIEW export_perfetto_flows AS
SELECT r.source_id, r.tid AS host_tid, r.ts_ns AS launch_ns, g.device, g.tid AS gpu_tid, g.ts_ns AS gpu_ns,
       (r.source_id + 1) * 1000000000000 + r.correlation_id AS id
FROM cpu_activity r JOIN export_perfetto_gpu g
  ON g.source_id = r.source_id AND g.correlation_id = r.correlation_id AND g.kind <> 'sync'
WHERE r.kind IN ('runtime', 'driver') AND r.correlation_id IS NOT NULL;

-- The findings as slices (Chrome JSON fields), each over the time it is about: tracedoc.export.perfetto writes
-- them from the report.
CREATE OR REPLACE TEMP TABLE export_perfetto_findings (name VARCHAR, cat VARCHAR, ph VARCHAR, ts DOUBLE,
                                                       dur DOUBLE, pid BIGINT, tid BIGINT, args JSON);

-- Every named process and thread and every slice (Chrome JSON fields: name, cat, ph, ts and dur in µs, pid, tid,
-- args): host activity, GPU activity, steps, attribution, findings.
CREATE OR REPLACE TEMP VIEW export_perfetto_slices AS
SELECT 'process_name' AS name, '__metadata' AS cat, 'M' AS ph, 0.0 AS ts, 0.0 AS dur,
       export_perfetto_pid(source_id, export_perfetto_host()) AS pid, 0 AS tid,
       json_object('name', 'rank ' || rank || ' · host') AS args
FROM export_perfetto_sources
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, export_perfetto_pid(source_id, export_perfetto_host()), tid,
       json_object('name', 'thread ' || tid)
FROM (SELECT DISTINCT source_id, tid FROM cpu_activity)
UNION ALL
SELECT 'process_name', '__metadata', 'M', 0.0, 0.0, export_perfetto_pid(source_id, export_perfetto_gpu(device)), 0,
       json_object('name', 'rank ' || any_value(rank) || ' · GPU ' || device)
FROM gpu_activity GROUP BY source_id, device
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, export_perfetto_pid(source_id, export_perfetto_gpu(device)), tid,
       json_object('name', CASE WHEN stream = 4294967295 THEN 'no stream (event and context syncs)'  -- CUPTI's none
                                ELSE 'stream ' || stream END
                           || CASE WHEN tid >= export_perfetto_sync_tid(0) THEN ' · syncs'
                                                       WHEN tid >= export_perfetto_overlap_tid(0) THEN ' · overlapping'
                                                       ELSE '' END)
FROM (SELECT DISTINCT source_id, device, stream, tid FROM export_perfetto_gpu)
UNION ALL
SELECT 'process_name', '__metadata', 'M', 0.0, 0.0, export_perfetto_pid(source_id, export_perfetto_tracedoc()), 0,
       json_object('name', 'rank ' || rank || ' · tracedoc')
FROM export_perfetto_sources
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, export_perfetto_pid(source_id, export_perfetto_tracedoc()),
       export_perfetto_steps_tid(), json_object('name', 'steps')
FROM (SELECT DISTINCT source_id FROM trace_steps)
UNION ALL
SELECT 'thread_name', '__metadata', 'M', 0.0, 0.0, export_perfetto_pid(source_id, export_perfetto_tracedoc()),
       export_perfetto_attribution_tid(device), json_object('name', 'time attribution · GPU ' || device)
FROM attribution_lanes
UNION ALL
SELECT name, kind, 'X', export_perfetto_us(ts_ns), dur_ns / 1000.0,
       export_perfetto_pid(source_id, export_perfetto_host()), tid,
       json_object('kind', kind, 'correlation_id', correlation_id)
FROM cpu_activity
UNION ALL
SELECT name, kind, 'X', export_perfetto_us(ts_ns), dur_ns / 1000.0,
       export_perfetto_pid(source_id, export_perfetto_gpu(device)), tid,
       json_object('kind', kind, 'category', category, 'correlation_id', correlation_id, 'bytes', bytes,
                   'grid', grid, 'block', block)
FROM export_perfetto_gpu
UNION ALL
SELECT CASE WHEN warmup THEN 'warm-up step ' ELSE 'step ' END || step, 'step', 'X', export_perfetto_us(ts_ns),
       dur_ns / 1000.0, export_perfetto_pid(source_id, export_perfetto_tracedoc()), export_perfetto_steps_tid(),
       json_object('step', step, 'warmup', warmup)
FROM trace_steps
UNION ALL
SELECT cause, 'attribution', 'X', export_perfetto_us(s), (e - s) / 1000.0,
       export_perfetto_pid(source_id, export_perfetto_tracedoc()), export_perfetto_attribution_tid(device),
       json_object('cause', cause, 'detail', detail, 'step', step)
FROM export_perfetto_attribution
UNION ALL
SELECT name, cat, ph, ts, dur, pid, tid, args FROM export_perfetto_findings;

-- The trace's events, in the order they are written: the slices, then both ends of each launch flow ('s' on the
-- call, 'f' on the GPU work, with its id and bp 'e'), from one pass over the launches and their work.
CREATE OR REPLACE TEMP VIEW export_perfetto_events AS
SELECT name, cat, ph, ts, dur, pid, tid, args, NULL::BIGINT AS id, NULL::VARCHAR AS bp FROM export_perfetto_slices
UNION ALL
SELECT 'launch', 'launch', p.ph, export_perfetto_us(CASE p.ph WHEN 's' THEN launch_ns ELSE gpu_ns END), NULL,
       export_perfetto_pid(source_id, CASE p.ph WHEN 's' THEN export_perfetto_host()
                                           ELSE export_perfetto_gpu(device) END),
       CASE p.ph WHEN 's' THEN host_tid ELSE gpu_tid END, '{}', id, CASE p.ph WHEN 'f' THEN 'e' END
FROM export_perfetto_flows CROSS JOIN (VALUES ('s'), ('f')) p(ph);
