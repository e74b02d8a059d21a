-- nvtx.projection: the user's NVTX ranges projected onto the GPU.
--
-- Each GPU activity is attributed to the innermost user NVTX range that was open on the thread that launched it,
-- when it launched it (the CUDA call with the activity's correlation id gives thread and time). Each GPU idle gap's
-- time is split among the user ranges the host was in during the gap: on the thread that launched the work that
-- ended the gap, the innermost user range at each instant of the gap, each range getting its overlap with the gap
-- (a gap that starts as 'optimizer' ends and lasts through 'checkpoint' is checkpoint's). User ranges are NVTX
-- ranges other than framework operator ranges (PyTorch emit_nvtx's 'aten::…'); nesting is recomputed among them, so an operator range never hides the user's range around it.
-- Times in ns. It applies only where the inputs have NVTX ranges (Nsight Systems exports): nvtx.idle gives its
-- readers an empty nvtx_idle_by_device elsewhere.
-- reads: nvtx_ranges
-- include: gpu.idle
-- include: trace.launches

-- User ranges with their nesting depth among the thread's user ranges, and their parent (the innermost user
-- range open on the thread when they started; NULL at depth 0).
CREATE OR REPLACE TEMP TABLE nvtx_user_ranges AS
WITH r AS MATERIALIZED (
    SELECT row_number() OVER (ORDER BY source_id, pid, tid, ts_ns, dur_ns DESC) AS range_id,
           source_id, rank, pid, tid, name, ts_ns, ts_ns + dur_ns AS end_ns
    FROM nvtx_ranges WHERE NOT coalesce(is_op, false) AND name IS NOT NULL AND dur_ns > 0
),
edges AS (
    SELECT range_id, source_id, pid, tid, ts_ns AS t, 1 AS delta, 1 AS ord FROM r
    UNION ALL
    SELECT range_id, source_id, pid, tid, end_ns, -1, 0 FROM r
),
depths AS (
    SELECT range_id, delta,
           sum(delta) OVER (PARTITION BY source_id, pid, tid ORDER BY t, ord, range_id ROWS UNBOUNDED PRECEDING)
               - 1 AS depth
    FROM edges
),
ranged AS MATERIALIZED (
    SELECT r.*, d.depth FROM r JOIN depths d ON d.range_id = r.range_id AND d.delta = 1
)
SELECT c.*, p.range_id AS parent_id
FROM ranged c
ASOF LEFT JOIN ranged p
  ON p.source_id = c.source_id AND p.pid = c.pid AND p.tid = c.tid AND p.depth = c.depth - 1 AND p.ts_ns <= c.ts_ns;

-- Which user range is innermost on a thread from time t on: a range's start makes it current, its end makes its
-- parent current again. One row per (thread, t): the last change at that instant wins.
CREATE OR REPLACE TEMP TABLE nvtx_thread_states AS
SELECT source_id, pid, tid, t, range_id FROM (
    SELECT source_id, pid, tid, ts_ns AS t, range_id, 1 AS ord, depth FROM nvtx_user_ranges
    UNION ALL
    SELECT source_id, pid, tid, end_ns, parent_id, 0, depth FROM nvtx_user_ranges
)
QUALIFY row_number() OVER (PARTITION BY source_id, pid, tid, t ORDER BY ord DESC, depth DESC) = 1;

-- The CUDA call behind each correlation id of GPU work (trace.launches: its first call's thread and time), for the
-- sources that have user ranges at all (the only ones read below), and the innermost user range open on that thread
-- then (range_id; NULL when none). The range is found per launch, not per work item (fewer rows to sort for the
-- ASOF join: a launch's work items share its thread and time).
CREATE OR REPLACE TEMP TABLE nvtx_launches AS
SELECT l.source_id, l.correlation_id, l.pid, l.tid, l.launch_ns, s.range_id
FROM (SELECT * FROM trace_launches WHERE source_id IN (SELECT source_id FROM nvtx_user_ranges)) l
ASOF LEFT JOIN nvtx_thread_states s
  ON s.source_id = l.source_id AND s.pid = l.pid AND s.tid = l.tid AND s.t <= l.launch_ns;

-- GPU work inside the window, per device and the innermost user range open on the thread that launched it when it
-- launched it (range_id), for the sources that have user ranges at all: activity_count and gpu_ns (Σ duration).
-- Summed here rather than kept a row per work item (a million on a long export, read only to be summed).
CREATE OR REPLACE TEMP TABLE nvtx_range_work AS
SELECT w.source_id, any_value(w.rank) AS rank, w.device, l.range_id, count(*) AS activity_count,
       sum(w.dur_ns) AS gpu_ns
FROM gpu_work w
JOIN nvtx_launches l ON l.source_id = w.source_id AND l.correlation_id = w.correlation_id
WHERE w.source_id IN (SELECT source_id FROM nvtx_user_ranges) AND l.range_id IS NOT NULL
GROUP BY w.source_id, w.device, l.range_id;

-- Each thread's innermost user range from seg_start until the next change (seg_end; NULL: to the trace's end;
-- range_id NULL where no user range is open).
CREATE OR REPLACE TEMP TABLE nvtx_thread_segments AS
SELECT source_id, pid, tid, t AS seg_start, lead(t) OVER (PARTITION BY source_id, pid, tid ORDER BY t) AS seg_end,
       range_id
FROM nvtx_thread_states;

-- Idle gaps with the thread that launched the work ending the gap, for the sources that have user ranges at all.
-- A gap whose launch is unknown (the gap after a device's last work, work launched before the trace) is in no
-- thread's range and has no row.
CREATE OR REPLACE TEMP TABLE nvtx_gap_threads AS
SELECT g.source_id, g.rank, g.device, g.ts_ns, g.end_ns, g.cause, l.pid, l.tid
FROM gpu_idle_gaps g
JOIN gpu_busy_intervals b ON b.source_id = g.source_id AND b.device = g.device AND b.ts_ns = g.end_ns
JOIN nvtx_launches l ON l.source_id = g.source_id AND l.correlation_id = b.first_correlation_id
WHERE g.source_id IN (SELECT source_id FROM nvtx_user_ranges) AND l.pid IS NOT NULL AND l.tid IS NOT NULL;

-- Idle gaps split by the user range the launching thread was in: one row per gap and thread segment overlapping
-- it, dur_ns the overlap (ns); ts_ns/end_ns the gap's; range_id its range (nvtx_user_ranges has its name). The
-- segment open at the gap's start is found by an ASOF join from the gap; those starting inside it by an ASOF join
-- from the segment to the last gap of its device that started before it (a device's gaps never overlap): both
-- linear in their rows. Time in no user range has no row.
CREATE OR REPLACE TEMP TABLE nvtx_idle_gaps AS
WITH at_start AS (
    SELECT g.*, s.seg_start, s.seg_end, s.range_id
    FROM nvtx_gap_threads g
    ASOF JOIN nvtx_thread_segments s
      ON s.source_id = g.source_id AND s.pid = g.pid AND s.tid = g.tid AND s.seg_start <= g.ts_ns
),
device_segments AS (
    SELECT s.*, d.device
    FROM nvtx_thread_segments s
    JOIN (SELECT DISTINCT source_id, pid, tid, device FROM nvtx_gap_threads) d USING (source_id, pid, tid)
),
inside AS (
    SELECT g.*, s.seg_start, s.seg_end, s.range_id
    FROM device_segments s
    ASOF JOIN nvtx_gap_threads g
      ON g.source_id = s.source_id AND g.device = s.device AND g.pid = s.pid AND g.tid = s.tid
     AND s.seg_start > g.ts_ns
    WHERE s.seg_start < g.end_ns
),
pieces AS (
    SELECT *, least(coalesce(seg_end, end_ns), end_ns) - greatest(seg_start, ts_ns) AS overlap_ns
    FROM (SELECT * FROM at_start UNION ALL BY NAME SELECT * FROM inside)
)
SELECT source_id, rank, device, ts_ns, end_ns, overlap_ns AS dur_ns, cause, range_id
FROM pieces WHERE overlap_ns > 0 AND range_id IS NOT NULL;

-- Per device and range name: GPU time of the work launched in it (summed durations, ns), idle time the host spent
-- in it (ns, nvtx_idle_gaps), and idle_pct = idle / (GPU time + idle) × 100: "in 'forward', 38 % of the GPU time is idle".
-- The ranges of one name add up.
CREATE OR REPLACE TEMP VIEW nvtx_range_gpu_time AS
WITH work AS (
    SELECT w.source_id, any_value(w.rank) AS rank, w.device, u.name AS range_name,
           sum(w.activity_count)::BIGINT AS activity_count, sum(w.gpu_ns) AS gpu_ns
    FROM nvtx_range_work w JOIN nvtx_user_ranges u USING (range_id)
    GROUP BY w.source_id, w.device, u.name
),
idle AS (
    SELECT g.source_id, any_value(g.rank) AS rank, g.device, u.name AS range_name, sum(g.dur_ns) AS idle_ns
    FROM nvtx_idle_gaps g JOIN nvtx_user_ranges u USING (range_id)
    GROUP BY g.source_id, g.device, u.name
)
SELECT source_id, coalesce(work.rank, idle.rank) AS rank, device, range_name,
       coalesce(activity_count, 0) AS activity_count, coalesce(gpu_ns, 0) AS gpu_ns, coalesce(idle_ns, 0) AS idle_ns,
       100.0 * coalesce(idle_ns, 0) / nullif(coalesce(gpu_ns, 0) + coalesce(idle_ns, 0), 0) AS idle_pct
FROM work FULL JOIN idle USING (source_id, device, range_name);

-- Per device: the user range with the most idle GPU time (nvtx_range), that idle (ns) and its idle_pct, and a
-- sentence for findings (nvtx_note, '' without NVTX). A table, as nvtx.idle's empty one elsewhere: read by two
-- modules, computed once.
CREATE OR REPLACE TEMP TABLE nvtx_idle_by_device AS
SELECT source_id, device, top.range_name AS nvtx_range, top.idle_ns AS nvtx_range_idle_ns,
       top.idle_pct AS nvtx_range_idle_pct,
       printf(' Most idle time falls in NVTX range ''%s'': %.0f%% of the GPU time there is idle (%,.1f ms).',
              top.range_name, top.idle_pct, top.idle_ns / 1e6) AS nvtx_note
FROM (
    SELECT source_id, device, arg_max({'range_name': range_name, 'idle_ns': idle_ns, 'idle_pct': idle_pct},
                                      (idle_ns, range_name)) AS top
    FROM nvtx_range_gpu_time WHERE idle_ns > 0 GROUP BY source_id, device
);
