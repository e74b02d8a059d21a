-- trace.window: the analysed time window of each rank.
--
-- With ProfilerStep annotations the window runs from the first step's start to the later of the last step's end
-- and the last GPU activity's end (the GPU finishes queued work after the host closed the step). Without steps
-- it spans every recorded activity. All times in ns.

-- One row per source: the window analyses measure over.
CREATE OR REPLACE TEMP TABLE trace_windows AS
WITH step_span AS (
    SELECT source_id, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) AS end_ns, count(*) AS step_count
    FROM steps GROUP BY source_id
),
gpu_span AS (
    SELECT source_id, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) AS end_ns
    FROM gpu_activity WHERE kind <> 'sync' GROUP BY source_id
),
cpu_span AS (
    SELECT source_id, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) AS end_ns FROM cpu_activity GROUP BY source_id
)
SELECT
    s.source_id,                                                   -- the input file
    s.rank,                                                        -- its rank
    coalesce(st.start_ns, least(g.start_ns, c.start_ns)) AS start_ns,  -- window start, ns
    CASE WHEN st.start_ns IS NOT NULL THEN greatest(st.end_ns, coalesce(g.end_ns, st.end_ns))
         ELSE greatest(g.end_ns, c.end_ns) END AS end_ns,          -- window end, ns
    coalesce(st.step_count, 0) AS step_count                       -- ProfilerStep annotations in the window
FROM sources s
LEFT JOIN step_span st USING (source_id)
LEFT JOIN gpu_span g USING (source_id)
LEFT JOIN cpu_span c USING (source_id);

-- The window's length per source, ns.
CREATE OR REPLACE TEMP VIEW trace_wall AS
SELECT source_id, rank, start_ns, end_ns, end_ns - start_ns AS wall_ns, step_count FROM trace_windows;
