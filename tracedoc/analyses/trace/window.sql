-- trace.window: the window each source is judged over (its steady state), and what the trace recorded around it.
--
-- With steps (trace.steps), the window holds the steady steps: it starts when the first steady step's work can
-- start on the GPU (the step's start on the host, or, when work launched before it still runs then, that work's
-- end; at the latest the step's own first work) and ends at the later of the last step's end on the host and the
-- end of the GPU work launched in the steps. Without steps, a cudaProfilerStart/Stop pair on the host bounds it
-- (the range a capture was meant to hold); without either, it runs from the first to the last GPU work (a trace
-- without GPU work: its host activity), unless that span is mostly a CUDA graph capture (cudaStreamBeginCapture
-- to cudaStreamEndCapture on the host: kernels recorded, not run), a one-off phase with no steady state to judge:
-- then the window is empty and the whole trace lies before it. What lies before the window (start-up: CUDA and NCCL initialisation,
-- module loading, graph capture; warm-up steps; work queued before the first step) and after it is recorded, and
-- attributed (attribution.time), but never judged. All times in ns.
-- hands back: trace_windows, trace_wall
-- include: trace.steps

-- One row per source. start_ns/end_ns: the window; capture_start_ns/capture_end_ns: everything recorded;
-- first_step_ns: the first step's start on the host (warm-up steps included; NULL without steps); step_count:
-- steady steps in the window; kind: 'steps' | 'capture_range' | 'whole_trace' | 'graph_capture' (one-off: empty);
-- graph_capture_ns: host time inside CUDA graph captures within the span of the GPU work.
CREATE OR REPLACE TEMP TABLE trace_windows AS
WITH gpu AS (
    SELECT source_id, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) AS end_ns
    FROM gpu_activity WHERE kind IN ('kernel', 'memcpy', 'memset') GROUP BY source_id
),
recorded AS (
    SELECT source_id, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) AS end_ns
    FROM (SELECT source_id, ts_ns, dur_ns FROM gpu_activity WHERE kind <> 'sync'
          UNION ALL SELECT source_id, ts_ns, dur_ns FROM cpu_activity)
    GROUP BY source_id
),
profiler_range AS (  -- the last start before the first stop after it, per source
    SELECT source_id, max(ts_ns + dur_ns) FILTER (WHERE name = 'cudaProfilerStart') AS start_ns,
           min(ts_ns) FILTER (WHERE name = 'cudaProfilerStop') AS end_ns
    FROM cpu_activity WHERE kind IN ('runtime', 'driver') AND name IN ('cudaProfilerStart', 'cudaProfilerStop')
    GROUP BY source_id
),
graph_captures AS (  -- from each BeginCapture to the next EndCapture of its thread (CUDA and HIP names)
    SELECT b.source_id, sum(least(e.ts_ns + e.dur_ns, g.end_ns) - greatest(b.ts_ns, g.start_ns)) AS ns
    FROM (SELECT * FROM cpu_activity WHERE kind IN ('runtime', 'driver') AND name LIKE '%StreamBeginCapture%') b
    ASOF JOIN (SELECT * FROM cpu_activity WHERE kind IN ('runtime', 'driver') AND name LIKE '%StreamEndCapture%') e
      ON e.source_id = b.source_id AND e.tid = b.tid AND e.ts_ns >= b.ts_ns
    JOIN gpu g ON g.source_id = b.source_id
    WHERE least(e.ts_ns + e.dur_ns, g.end_ns) > greatest(b.ts_ns, g.start_ns)
    GROUP BY b.source_id
),
steady AS (  -- the steady steps' span and count, and the first step's start (warm-up steps included)
    SELECT source_id, min(ts_ns) FILTER (WHERE NOT warmup) AS first_ns,
           max(ts_ns + dur_ns) FILTER (WHERE NOT warmup) AS last_ns, count(*) FILTER (WHERE NOT warmup) AS steps,
           min(ts_ns) AS first_step_ns
    FROM trace_steps GROUP BY source_id
),
work AS (  -- GPU work of sources with steps, with when the host launched it (NULL: before the trace)
    SELECT w.source_id, w.ts_ns, w.end_ns, w.launch_ns,
           w.launch_ns >= s.first_ns AND w.launch_ns < s.last_ns AS in_steps
    FROM trace_step_work w JOIN steady s USING (source_id)
),
own AS (
    SELECT source_id, min(ts_ns) FILTER (WHERE in_steps) AS first_work_ns,
           max(end_ns) FILTER (WHERE in_steps) AS last_work_ns
    FROM work GROUP BY source_id
),
earlier AS (  -- work launched before the first steady step (or before the trace) that runs before its own work
    SELECT w.source_id, max(w.end_ns) AS end_ns
    FROM work w JOIN steady s USING (source_id) JOIN own o USING (source_id)
    WHERE (w.launch_ns IS NULL OR w.launch_ns < s.first_ns) AND w.ts_ns < o.first_work_ns
    GROUP BY w.source_id
),
bounds AS (
    SELECT src.source_id, src.rank, r.start_ns AS capture_start_ns, r.end_ns AS capture_end_ns,
           CASE WHEN st.steps > 0 THEN 'steps'
                WHEN p.end_ns > p.start_ns THEN 'capture_range'
                WHEN gc.ns >= 0.5 * (g.end_ns - g.start_ns) THEN 'graph_capture'
                ELSE 'whole_trace' END AS kind,
           CASE WHEN st.steps > 0
                    THEN least(coalesce(o.first_work_ns, st.first_ns),
                               greatest(st.first_ns, coalesce(e.end_ns, st.first_ns)))
                WHEN p.end_ns > p.start_ns THEN p.start_ns
                WHEN gc.ns >= 0.5 * (g.end_ns - g.start_ns) THEN g.end_ns
                ELSE coalesce(g.start_ns, r.start_ns) END AS start_ns,
           CASE WHEN st.steps > 0 THEN greatest(st.last_ns, coalesce(o.last_work_ns, st.last_ns))
                WHEN p.end_ns > p.start_ns THEN p.end_ns
                ELSE coalesce(g.end_ns, r.end_ns) END AS end_ns,
           coalesce(st.steps, 0) AS step_count, coalesce(gc.ns, 0) AS graph_capture_ns,
           st.first_step_ns
    FROM sources src
    LEFT JOIN recorded r USING (source_id)
    LEFT JOIN gpu g USING (source_id)
    LEFT JOIN profiler_range p USING (source_id)
    LEFT JOIN steady st USING (source_id)
    LEFT JOIN own o USING (source_id)
    LEFT JOIN earlier e USING (source_id)
    LEFT JOIN graph_captures gc USING (source_id)
)
SELECT source_id,                                                          -- the input (or rank of one)
       rank,                                                               -- its rank
       start_ns,                                                           -- window start, ns
       end_ns,                                                             -- window end, ns
       step_count,                                                         -- steady steps in the window
       kind,                                                 -- steps | capture_range | whole_trace | graph_capture
       least(capture_start_ns, start_ns) AS capture_start_ns,              -- first recorded activity, ns
       greatest(capture_end_ns, end_ns) AS capture_end_ns,                 -- end of the last one, ns
       first_step_ns,                                                      -- first step's host start, ns
       graph_capture_ns                                                    -- host time in graph captures, ns
FROM bounds;

-- A trace that is nothing but a one-off phase (a CUDA graph capture): source_id, rank, phase, phase_ns (its host
-- time), span_ns (everything the trace recorded), phase_pct (phase_ns of span_ns).
CREATE OR REPLACE TEMP VIEW trace_one_off AS
SELECT source_id, rank, 'a CUDA graph capture' AS phase, graph_capture_ns AS phase_ns,
       capture_end_ns - capture_start_ns AS span_ns,
       100.0 * graph_capture_ns / nullif(capture_end_ns - capture_start_ns, 0) AS phase_pct
FROM trace_windows WHERE kind = 'graph_capture';

-- The window's length per source, ns.
CREATE OR REPLACE TEMP VIEW trace_wall AS
SELECT source_id, rank, start_ns, end_ns, end_ns - start_ns AS wall_ns, step_count FROM trace_windows;

-- The report's window per source that has one, with how its steps were found (trace_step_method). Columns:
-- source_id, rank, kind, start_ns, end_ns, step_count, method, detail, warmup_steps.
CREATE OR REPLACE TEMP VIEW trace_report_windows AS
SELECT w.source_id, w.rank, w.kind, w.start_ns, w.end_ns, w.step_count, m.method, m.detail, m.warmup_steps
FROM trace_windows w JOIN trace_step_method m USING (source_id) WHERE w.start_ns IS NOT NULL;
