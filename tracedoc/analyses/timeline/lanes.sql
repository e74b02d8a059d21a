-- timeline.lanes: what the dashboard's timeline draws, one lane per row, and the queries it runs per view.
--
-- Per rank, top to bottom: a lane of profiler steps; the host's ranges (NVTX ranges and PyTorch record_function
-- annotations), one lane per nesting depth; per host thread, its outermost operators, CUDA runtime and driver
-- calls and OS calls (nsys), a lane each; then one lane per GPU device and stream.
-- Times in ns on each trace's own clock (ranks recorded on one host share it, Nsight Systems reports are put on UTC);
-- time zero is the report's: the first activity recorded (trace.window), of the earliest rank. The macros read only the view's time range,
-- so a view costs a scan of the intervals in view (the tables are sorted by time) and returns either the
-- intervals themselves (a zoomed-in view) or one row per lane, category and pixel column span, never the trace;
-- wide views read the work binned in advance (timeline.bins).
-- include: trace.window

-- Time zero of the timeline, ns: the first activity recorded (the earliest over the ranks), so that start-up and
-- warm-up steps before the analysed window are drawn at positive times too.
CREATE OR REPLACE TEMP TABLE timeline_zero AS
SELECT coalesce(min(capture_start_ns), 0) AS zero_ns FROM trace_windows;

-- What the timeline draws of the host: ranges (lane group 1), operators (2), CUDA runtime and driver calls (3) and
-- OS calls (4), profiler steps excepted (they have their own lane).
CREATE OR REPLACE TEMP VIEW timeline_host AS
SELECT rowid AS id, rank, tid, name, ts_ns, dur_ns,
       CASE WHEN kind = 'annotation' THEN 1 WHEN kind IN ('op', 'python') THEN 2
            WHEN kind IN ('runtime', 'driver') THEN 3 ELSE 4 END AS lane_group,
       CASE WHEN kind = 'annotation' THEN 'range' WHEN kind IN ('op', 'python') THEN 'cpu op'
            WHEN kind IN ('runtime', 'driver') THEN 'cuda api' ELSE 'os call' END AS category
FROM cpu_activity
WHERE kind IN ('annotation', 'op', 'python', 'runtime', 'driver', 'os') AND name NOT LIKE 'ProfilerStep#%';

-- Ranges with their nesting depth among the thread's ranges: how many are open when it starts, from one sweep over
-- starts (+1) and ends (-1) in time order (at equal times: ends, then starts, the longer first, then the ends of
-- empty ones). Ranges are few (the user's NVTX and record_function ranges); every depth is kept.
CREATE OR REPLACE TEMP TABLE timeline_ranges AS
WITH ranges AS (
    SELECT * FROM timeline_host WHERE lane_group = 1
),
edges AS (
    SELECT id, rank, tid, ts_ns AS t, 1 AS delta, 1 AS turn, -dur_ns AS tie FROM ranges
    UNION ALL
    SELECT id, rank, tid, ts_ns + dur_ns, -1, CASE WHEN dur_ns = 0 THEN 2 ELSE 0 END, 0 FROM ranges
),
swept AS (
    SELECT id, delta, sum(delta) OVER (PARTITION BY rank, tid ORDER BY t, turn, tie, id
                                       ROWS UNBOUNDED PRECEDING) - 1 AS depth
    FROM edges
)
SELECT r.rank, r.tid, greatest(s.depth, 0) AS depth, r.category, r.name, r.ts_ns, r.dur_ns
FROM ranges r JOIN swept s ON s.id = r.id AND s.delta = 1;

-- Operators, API and OS calls: the outermost of each thread only (what the program called; the operators' own
-- calls and the API calls they make are there in the trace, and in Perfetto), i.e. those no earlier interval of
-- the thread's lane group still covers when they start.
CREATE OR REPLACE TEMP TABLE timeline_calls AS
SELECT rank, tid, lane_group, category, name, ts_ns, dur_ns
FROM (SELECT *, max(ts_ns + dur_ns) OVER (PARTITION BY rank, tid, lane_group ORDER BY ts_ns, dur_ns DESC, id
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered_until
      FROM timeline_host WHERE lane_group > 1)
WHERE covered_until IS NULL OR covered_until <= ts_ns;

-- Every interval the timeline can draw, with what places it in a lane: lane_group 0 steps, 1 ranges, 2 operators,
-- 3 CUDA API calls, 4 OS calls, 5 GPU activity (tid, device and stream -1 where they do not apply). OS calls are
-- drawn for the threads that also run ranges, operators or API calls (not for helper threads that only wait).
CREATE OR REPLACE TEMP VIEW timeline_intervals AS
SELECT rank, 0 AS lane_group, -1 AS tid, 0 AS depth, -1 AS device, -1 AS stream, 'step' AS category,
       CASE WHEN warmup THEN 'warm-up: ' ELSE '' END || name AS name, ts_ns, dur_ns
FROM trace_steps
UNION ALL
SELECT rank, 1, tid, depth, -1, -1, category, name, ts_ns, dur_ns FROM timeline_ranges
UNION ALL
SELECT rank, lane_group, tid, 0, -1, -1, category, name, ts_ns, dur_ns FROM timeline_calls
WHERE lane_group < 4 OR (rank, tid) IN (SELECT rank, tid FROM timeline_calls WHERE lane_group < 4
                                        UNION SELECT rank, tid FROM timeline_ranges)
UNION ALL
SELECT rank, 5, -1, 0, device, stream, category, name, ts_ns, dur_ns
FROM gpu_activity;

-- The lanes, numbered from 0 (top): per rank, steps, ranges (by thread, then depth), each host thread's lanes
-- (threads with the most intervals first), then GPU devices and streams. mark: steps and ranges, drawn as
-- rectangles with their names whenever there are few enough in view. label: e.g. 'rank 0 · GPU 1 · stream 7',
-- 'rank 0 · ranges, depth 1', 'rank 0 · thread 517 · CUDA API'; the GPU's syncs that CUPTI ties to no stream (an
-- event's or the context's: stream id 2³² − 1, an unsigned −1) are 'rank 0 · GPU 1 · no stream (event and context
-- syncs)'.
CREATE OR REPLACE TEMP TABLE timeline_lanes AS
WITH keys AS (
    SELECT rank, lane_group, tid, depth, device, stream, count(*) AS intervals
    FROM timeline_intervals GROUP BY ALL
),
threads AS (
    SELECT rank, tid, sum(intervals) AS intervals, count(DISTINCT tid) OVER (PARTITION BY rank) AS threads
    FROM keys WHERE lane_group BETWEEN 1 AND 4 GROUP BY rank, tid
),
ranged AS (  -- threads with ranges, per rank: the thread is named only when more than one has them
    SELECT rank, count(DISTINCT tid) AS range_threads FROM keys WHERE lane_group = 1 GROUP BY rank
)
SELECT row_number() OVER (ORDER BY k.rank, CASE WHEN k.lane_group <= 1 THEN k.lane_group ELSE 2 END,
                                   CASE WHEN k.lane_group BETWEEN 2 AND 4 THEN -t.intervals END, k.tid,
                                   k.lane_group, k.depth, k.device, k.stream) - 1 AS lane,
       k.rank, k.lane_group, k.tid, k.depth, k.device, k.stream, k.lane_group <= 1 AS mark,
       'rank ' || k.rank || CASE
           WHEN k.lane_group = 0 THEN ' · steps'
           WHEN k.lane_group = 1 THEN CASE WHEN r.range_threads > 1 THEN ' · thread ' || k.tid ELSE '' END
                                      || ' · ranges' || CASE WHEN k.depth > 0 THEN ', depth ' || k.depth ELSE '' END
           WHEN k.lane_group = 2 THEN ' · thread ' || k.tid || ' · ops'
           WHEN k.lane_group = 3 THEN ' · thread ' || k.tid || ' · CUDA API'
           WHEN k.lane_group = 4 THEN ' · thread ' || k.tid || ' · OS calls'
           ELSE ' · GPU ' || k.device || ' · ' || CASE WHEN k.stream = 4294967295
                                                         THEN 'no stream (event and context syncs)'
                                                         ELSE 'stream ' || k.stream END END AS label
FROM keys k LEFT JOIN threads t USING (rank, tid) LEFT JOIN ranged r USING (rank);

-- The names drawn, each once (the intervals hold a name_id).
CREATE OR REPLACE TEMP TABLE timeline_names AS
SELECT row_number() OVER () AS name_id, name FROM (SELECT DISTINCT name FROM timeline_intervals);

-- The intervals with their lane, category, name_id and end (ns), sorted by start so that a view's time range
-- skips most of the table: steps and ranges (timeline_marks, few) apart from the rest (timeline_work).
CREATE OR REPLACE TEMP TABLE timeline_marks AS
SELECT l.lane, i.category, n.name_id, i.ts_ns, i.ts_ns + i.dur_ns AS end_ns
FROM timeline_intervals i JOIN timeline_lanes l USING (rank, lane_group, tid, depth, device, stream)
JOIN timeline_names n USING (name)
WHERE l.mark ORDER BY i.ts_ns;

-- The other intervals (GPU work, host calls), as timeline_marks.
CREATE OR REPLACE TEMP TABLE timeline_work AS
SELECT l.lane, i.category, n.name_id, i.ts_ns, i.ts_ns + i.dur_ns AS end_ns
FROM timeline_intervals i JOIN timeline_lanes l USING (rank, lane_group, tid, depth, device, stream)
JOIN timeline_names n USING (name)
WHERE NOT l.mark ORDER BY i.ts_ns;

-- The intervals of table ``tbl`` (timeline_marks or timeline_work) overlapping the view [x0_ns, x1_ns), at most
-- ``most``: lane, category, name, ts_ns, end_ns.
CREATE OR REPLACE TEMP MACRO timeline_in_view(tbl, x0_ns, x1_ns, most) AS TABLE
SELECT e.lane, e.category, n.name, e.ts_ns, e.end_ns
FROM (SELECT * FROM query_table(tbl) WHERE ts_ns < x1_ns AND end_ns > x0_ns LIMIT most) e
JOIN timeline_names n USING (name_id);

-- The view [x0_ns, x1_ns) of table ``tbl`` in pixel columns px_ns wide: per lane, category and the columns c0..c1
-- in which intervals (clipped to the view) start and end, how many there are and the sums of their clipped starts
-- and ends (ns after x0_ns). From them the busy time of every column follows exactly: an interval covers the rest
-- of its first column, every column between and the start of its last.
CREATE OR REPLACE TEMP MACRO timeline_binned(tbl, x0_ns, x1_ns, px_ns) AS TABLE
WITH clipped AS (
    SELECT lane, category, greatest(ts_ns, x0_ns) - x0_ns AS s, least(end_ns, x1_ns) - x0_ns AS e
    FROM query_table(tbl) WHERE ts_ns < x1_ns AND end_ns > x0_ns
)
SELECT lane, category, s // px_ns AS c0, greatest(s // px_ns, (e - 1) // px_ns) AS c1, count(*) AS intervals,
       sum(s) AS sum_s, sum(e) AS sum_e
FROM clipped GROUP BY ALL;
