-- attribution.time: every nanosecond of each GPU's window attributed to exactly one cause.
--
-- The window of each device (trace.window) is cut at every boundary of the interval sets below into elementary
-- segments; each segment gets the first cause that holds for it, in this order:
--   gpu_compute          a compute kernel runs (detail 'kernels'), else a copy or memset (detail 'copies')
--   wait_for_peer        only communication runs, and this rank waits inside the collective for a later rank
--                        (ranks.collectives; detail 'rank N', the last to arrive)
--   comm_transfer        only communication runs, all ranks have arrived: the transfer itself
-- The GPU is idle otherwise (gpu.idle says why the work that ended the gap came late):
--   launch_overhead      the gap ended with work the host launched after the GPU went idle and lasted under
--                        100 µs (detail 'short launch gaps'), or the next work was already queued and started
--                        within 30 µs (detail 'queued work': launch and dependency latency between kernels)
--   dependency_wait      the next work was already queued and waited longer: on another stream, an event or a
--                        peer (detail 'another stream, an event or a peer'); not launch overhead, and a cause the
--                        trace cannot name further
-- and a long host-wait gap (≥ 100 µs, or the idle tail after the device's last work) is charged to what the host
-- did meanwhile:
--   host_sync            the start of a gap after a blocking sync drained the queue, as long as the host sat
--                        blocked in it (host.sync's cost: without the sync the host would have done that work
--                        while the GPU was busy)
--   wait_for_peer        the host sits in a collective call (c10d::…, nccl:…), e.g. an all-to-all whose split
--                        sizes it must read (detail: the call)
--   data_loading         a DataLoader iteration, or a range named like one ('data', 'load_batch'), covers it
--   phase                a user annotation (record_function / NVTX range) covers it, e.g. 'checkpoint'
--   host_work            a profiled operator covers it (detail: the operator), or a Python frame of the user's
--                        code (with_stack=True: torch's, the standard library's and installed packages' frames
--                        aside; detail: the innermost such frame, 'file.py(129): preprocess')
--   uninstrumented_host  nothing profiled covers it: time.sleep, a Python loop, work outside the profiler's view
-- What the trace recorded outside the window (trace.window) is attributed apart, never to the causes above:
--   startup              before the first step (before the first GPU work, without steps), named after what the
--                        host did: 'CUDA graph capture', 'NCCL initialisation', 'MPI initialisation', 'module
--                        loading', 'CUDA context creation' (the first CUDA call when it took 1 ms or more), else
--                        'before the first step' ('before the first GPU work')
--   warmup               the warm-up steps (trace.steps), with their step
--   prologue             after the first step began on the host, work launched before it still running (detail
--                        'work queued before the window')
--   teardown             after the window: 'after the last step' ('after the last GPU work')
-- Steps are cut on the GPU side, where their time is spent: GPU work belongs to the step during which the host
-- launched it (trace.steps), and step N runs from the end of step N−1's last work to the end of its own, so the
-- idle before its first kernel, waiting for the host to launch it, is step N's; the first step starts with its
-- first work. Time after the last step's work belongs to the last step; on a device whose first step starts after
-- the window does, the time before it is step NULL. Without steps the whole window is step NULL with the causes
-- above. So per device the window's causes sum to the window, and per step to its span. Times in ns.
-- include: attribution.sets
-- include: intervals.merge
-- include: gpu.idle
-- include: host.sync
-- include: trace.steps

-- The idle gaps whose time the host's doings explain: long host-wait gaps and the tail after the last work. reach_e:
-- the latest end of the lane's gaps started by the gap's start (those starting with it too), so that a time lies in
-- a gap where the last gap started by then reaches past it (an ASOF join, below).
CREATE OR REPLACE TEMP TABLE attribution_host_gaps AS
SELECT k, s, e, max(e) OVER (PARTITION BY k ORDER BY s RANGE UNBOUNDED PRECEDING) AS reach_e
FROM (SELECT l.k, g.ts_ns AS s, g.end_ns AS e
      FROM gpu_idle_gaps g JOIN attribution_lanes l USING (source_id, device)
      WHERE (g.cause = 'host_wait' AND g.long_gap)
         OR (g.launch_ts_ns IS NULL AND g.end_ns = l.win_e AND g.long_gap));

-- The host's ranges by class, one copy per lane of the source (the host serves all its devices): only those that
-- overlap a long host-wait gap of their lane, the only time in which a range's class decides a segment's cause or
-- names it (elsewhere the GPU works, or the gap is not the host's: a range there would only cut segments that keep
-- their cause). Of a long trace's hundreds of thousands of ranges few overlap a gap: each lane's time from its
-- first gap to its last is cut in 65,536 buckets, and a range is looked at only where it spans more than two
-- buckets or where one of its end buckets holds gap time; then it overlaps a gap where the gaps that start before
-- it ends reach past its start (an ASOF join of the few ranges left).
CREATE OR REPLACE TEMP TABLE attribution_host_ranges AS
WITH grid AS (
    SELECT k, min(s) AS base_ns, greatest((max(e) - min(s)) // 65536, 1) AS width_ns
    FROM attribution_host_gaps GROUP BY k
),
gap_buckets AS (  -- the buckets that hold gap time (`//` rounds toward zero: a bucket's points map to it in order)
    SELECT DISTINCT g.k, unnest(range((g.s - b.base_ns) // b.width_ns, (g.e - 1 - b.base_ns) // b.width_ns + 1))
                             AS bucket
    FROM attribution_host_gaps g JOIN grid b USING (k)
),
ranges AS (
    SELECT l.k, c.ts_ns AS s, c.ts_ns + c.dur_ns AS e, c.name, c.kind,
           (c.ts_ns - b.base_ns) // b.width_ns AS first_bucket,
           (c.ts_ns + c.dur_ns - 1 - b.base_ns) // b.width_ns AS last_bucket
    FROM cpu_activity c JOIN attribution_lanes l USING (source_id) JOIN grid b ON b.k = l.k
    WHERE c.kind IN ('op', 'annotation', 'python') AND c.dur_ns > 0
      AND c.ts_ns < l.win_e AND c.ts_ns + c.dur_ns > l.win_s
),
near_gaps AS (
    SELECT r.* FROM ranges r
    LEFT JOIN gap_buckets at_first ON at_first.k = r.k AND at_first.bucket = r.first_bucket
    LEFT JOIN gap_buckets at_last ON at_last.k = r.k AND at_last.bucket = r.last_bucket
    WHERE r.last_bucket - r.first_bucket > 1 OR at_first.k IS NOT NULL OR at_last.k IS NOT NULL
)
SELECT c.k, c.s, c.e, c.name,
       CASE WHEN c.name LIKE 'c10d::%' OR c.name LIKE 'nccl:%' OR c.name LIKE 'record_param_comms%'
                 THEN 'collective'
            WHEN c.name ILIKE '%DataLoader%' OR regexp_matches(c.name,
                 '^(data|batch|data[ _]?load(ing|er)?|load[ _]?(data|batch)|next[ _]?batch|input[ _]?pipeline)$',
                 'i') THEN 'loader'
            WHEN c.kind = 'annotation' THEN 'annotation'
            WHEN c.kind = 'python' THEN 'python'
            ELSE 'op' END AS class
FROM near_gaps c ASOF JOIN attribution_host_gaps g ON g.k = c.k AND c.e > g.s
WHERE g.reach_e > c.s AND c.name NOT LIKE 'ProfilerStep#%'
  AND NOT (c.kind = 'python' AND (c.name LIKE '<%' OR c.name LIKE '%site-packages/%' OR c.name LIKE '%dist-packages/%'
           OR regexp_matches(c.name, '^(torch|threading|multiprocessing|concurrent|asyncio|importlib|runpy|'
                                     || 'contextlib|functools|selectors|socket|queue)[/.]')));

-- Where single host ranges start or end inside a host gap (at its start or after, before its end): segments are
-- cut there too, so that each piece of a gap can be named after the innermost range covering it.
CREATE OR REPLACE TEMP TABLE attribution_host_range_cuts AS
WITH t AS (SELECT k, s AS t FROM attribution_host_ranges UNION ALL SELECT k, e FROM attribution_host_ranges)
SELECT t.k, t.t
FROM t ASOF JOIN attribution_host_gaps g ON g.k = t.k AND t.t >= g.s
WHERE g.reach_e > t.t;

-- Step starts per lane (a segment belongs to the last step started at or before it): for the first step that
-- launched work on the device, its host start or, when earlier-launched work still ran then, that work's end (at
-- the latest its own first work); for the others, the end of the previous step's last work.
CREATE OR REPLACE TEMP TABLE attribution_step_starts AS
WITH ends AS (
    SELECT l.k, w.step, min(w.ts_ns) AS start_ns, max(w.end_ns) AS end_ns
    FROM trace_step_work w JOIN trace_steady_steps USING (source_id, step)  -- the work launched in steady steps
    JOIN attribution_lanes l USING (source_id, device)
    GROUP BY l.k, w.step
),
firsts AS (  -- the first step: from its host start, or from the end of earlier-launched work still running then
    SELECT e.k, e.step, e.start_ns, h.ts_ns AS host_start_ns,
           (SELECT max(b.e) FROM attribution_busy b WHERE b.k = e.k AND b.s < e.start_ns) AS earlier_end_ns
    FROM ends e JOIN attribution_lanes l USING (k)
    JOIN trace_steady_steps h ON h.source_id = l.source_id AND h.step = e.step
    QUALIFY row_number() OVER (PARTITION BY e.k ORDER BY e.step) = 1
)
SELECT e.k, e.step,
       least(greatest(coalesce(lag(e.end_ns) OVER (PARTITION BY e.k ORDER BY e.step),
                               least(greatest(f.host_start_ns, coalesce(f.earlier_end_ns, f.host_start_ns)),
                                     f.start_ns)), l.win_s), l.win_e) AS s
FROM ends e JOIN attribution_lanes l USING (k) LEFT JOIN firsts f USING (k);

-- Elementary segments: between consecutive boundaries of every set above, inside the window, each with the sets
-- it lies in, its step and the wait it lies in. One sweep: every set adds its bit at an interval's start and takes
-- it back at its end, so the running sum over a lane's boundaries is the mask of the sets in force until the next
-- boundary (each set is disjoint within itself, so the mask stays under 4096). Bits: 1 compute kernel, 2 copy, 4
-- other work (communication), 8 long host gap, 16 short queued gap, 32 sync, 64 collective call, 128 loader, 256
-- annotation, 512 operator, 1024 longer queued gap, 2048 user Python frame. Read here: the queued-work gaps (the
-- next work was already launched), not explained by the host, short ones (gpu.idle's 'kernel_wait') and longer
-- waits on a dependency ('other'), each a set of its own; and the gap time charged to blocking syncs, the first
-- cost_ns of each gap a sync returned in (host.sync). Waits and step starts cut segments too, and the same running
-- sum counts those started at or before a segment (4096 a step, 2^32 a wait, above the mask's bits): the last of
-- each, found by its number, gives the segment its step and the wait (with the rank it waits for) it may lie in.
-- The sets above and attribution.sets' are dropped once used (the step starts, a row per step and lane, are
-- kept: a statement less on every run): the attribution keeps its lanes, step starts, segment masks, names and
-- slices. Each segment keeps its mask and waiting_for (the rank it waits for, inside a wait);
-- attribution_segment_causes reads its cause and the rest from them.
CREATE OR REPLACE TEMP TABLE attribution_segment_masks AS
WITH queued AS (
    SELECT l.k, g.ts_ns AS s, g.end_ns AS e, CASE WHEN g.cause = 'kernel_wait' THEN 16 ELSE 1024 END AS bit
    FROM gpu_idle_gaps g JOIN attribution_lanes l USING (source_id, device)
    WHERE g.cause IN ('kernel_wait', 'other') AND NOT (g.launch_ts_ns IS NULL AND g.end_ns = l.win_e AND g.long_gap)
),
syncs AS (  -- cost_ns is a HUGEINT (a sum): the times stay BIGINT
    SELECT l.k, i.ts_ns AS s, (i.ts_ns + i.cost_ns)::BIGINT AS e
    FROM host_sync_idle i JOIN attribution_lanes l USING (source_id, device)
    WHERE i.cost_ns > 0
),
host_sets_raw AS (  -- the host's ranges by class, merged per lane and class as attribution.sets merges the GPU's:
                    -- collective calls (64), loader (128), annotations (256), operators (512) and Python frames of
                    -- the user's code (2048)
    SELECT k * 4096 + CASE class WHEN 'collective' THEN 64 WHEN 'loader' THEN 128 WHEN 'annotation' THEN 256
                                 WHEN 'op' THEN 512 ELSE 2048 END AS k, s, e
    FROM attribution_host_ranges
),
host_sets AS (SELECT k // 4096 AS k, (k % 4096)::INTEGER AS bit, s, e FROM intervals_merge('host_sets_raw')),
events AS (
    SELECT k, s AS t, bit AS d FROM attribution_sets UNION ALL SELECT k, e, -bit FROM attribution_sets
    UNION ALL SELECT k, s, bit FROM host_sets UNION ALL SELECT k, e, -bit FROM host_sets
    UNION ALL SELECT k, s, 8 FROM attribution_host_gaps UNION ALL SELECT k, e, -8 FROM attribution_host_gaps
    UNION ALL SELECT k, s, bit FROM queued UNION ALL SELECT k, e, -bit FROM queued
    UNION ALL SELECT k, s, 32 FROM syncs UNION ALL SELECT k, e, -32 FROM syncs
    UNION ALL SELECT k, win_s, 0 FROM attribution_lanes UNION ALL SELECT k, win_e, 0 FROM attribution_lanes
    UNION ALL SELECT k, e, 0 FROM attribution_waits
    UNION ALL SELECT k, t, 0 FROM attribution_host_range_cuts
    UNION ALL SELECT DISTINCT k, s, 4294967296 FROM attribution_waits
    UNION ALL SELECT DISTINCT k, s, 4096 FROM attribution_step_starts
),
masks AS (  -- the running sum over each lane's boundaries in time order, those at one time together (a RANGE frame;
            -- of a time's boundaries, the last is the segment's, the others are empty): the mask, and how many steps
            -- and waits started so far (each start time once)
    SELECT k, t AS s, lead(t) OVER w AS e, sum(d) OVER (w RANGE UNBOUNDED PRECEDING)::BIGINT AS total
    FROM events WINDOW w AS (PARTITION BY k ORDER BY t)
),
waits AS (  -- of waits starting together, the one ending last (then of the highest rank), numbered by start
    SELECT k, row_number() OVER (PARTITION BY k ORDER BY s) AS n, wait
    FROM (SELECT k, s, max({'e': e, 'rank': last_rank}) AS wait FROM attribution_waits GROUP BY k, s)
),
steps AS (
    SELECT k, row_number() OVER (PARTITION BY k ORDER BY s) AS n, step
    FROM (SELECT k, s, max(step) AS step FROM attribution_step_starts GROUP BY k, s)
)
SELECT m.k, m.s, m.e, st.step, m.mask, CASE WHEN m.s < w.wait.e THEN w.wait.rank END AS waiting_for
FROM (SELECT k, s, e, (total % 4096)::INTEGER AS mask, total // 4096 % 1048576 AS steps_started,
             total // 4294967296 AS waits_started FROM masks) m
JOIN attribution_lanes l USING (k)
LEFT JOIN waits w ON w.k = m.k AND w.n = m.waits_started
LEFT JOIN steps st ON st.k = m.k AND st.n = m.steps_started
WHERE m.e > m.s AND m.s >= l.win_s AND m.e <= l.win_e;

-- Each segment with its cause and, where it does not need a name lookup, its detail; and what the GPU did,
-- whatever the cause, for the headline: in_work (a kernel or copy runs), in_busy (any work runs, communication
-- included), waiting_for. A view: the text of a table's row for each of a long trace's millions of segments
-- would hold several times the memory of its mask (on a small store, whose views are made tables, a table).
CREATE OR REPLACE TEMP VIEW attribution_segment_causes AS
WITH classified AS (
    SELECT k, s, e, step, mask, (mask & 3) > 0 AS in_work, (mask & 7) > 0 AS in_busy, waiting_for
    FROM attribution_segment_masks
)
SELECT k, s, e, step,
       CASE WHEN in_work THEN 'gpu_compute'
            WHEN in_busy AND waiting_for IS NOT NULL THEN 'wait_for_peer'
            WHEN in_busy THEN 'comm_transfer'
            WHEN (mask & 1024) > 0 THEN 'dependency_wait'
            WHEN (mask & 16) > 0 OR (mask & 8) = 0 THEN 'launch_overhead'
            WHEN (mask & 32) > 0 THEN 'host_sync'
            WHEN (mask & 64) > 0 THEN 'wait_for_peer'
            WHEN (mask & 128) > 0 THEN 'data_loading'
            WHEN (mask & 256) > 0 THEN 'phase'
            WHEN (mask & (512 | 2048)) > 0 THEN 'host_work'
            ELSE 'uninstrumented_host' END AS cause,
       CASE WHEN (mask & 1) > 0 THEN 'kernels'
            WHEN in_work THEN 'copies'
            WHEN in_busy AND waiting_for IS NOT NULL THEN 'rank ' || waiting_for
            WHEN in_busy THEN 'collectives'
            WHEN (mask & 1024) > 0 THEN 'another stream, an event or a peer'
            WHEN (mask & 16) > 0 THEN 'queued work'
            WHEN (mask & 8) = 0 THEN 'short launch gaps'
            WHEN (mask & 32) > 0 THEN 'blocking syncs'
            WHEN (mask & (64 | 128 | 256 | 512 | 2048)) > 0 THEN NULL  -- named below
            ELSE 'no profiled host range' END AS detail,
       CASE WHEN (mask & 64) > 0 THEN 'collective' WHEN (mask & 128) > 0 THEN 'loader'
            WHEN (mask & 256) > 0 THEN 'annotation' WHEN (mask & 512) > 0 THEN 'op' ELSE 'python' END AS name_class,
       in_work, in_busy, waiting_for
FROM classified;

DROP TABLE attribution_sets; DROP TABLE attribution_busy; DROP TABLE attribution_host_gaps;
DROP TABLE attribution_host_range_cuts; DROP TABLE attribution_waits;

-- Names for the host causes: each such segment is named after the innermost host range of its class covering
-- it (the latest-starting one, and of ranges starting together the shortest; ranges nest). A range join through
-- time buckets: per lane and class the ranges are cut in buckets about as long as the median range (at most 4096
-- a lane), and each segment meets the ranges in the bucket of its start.
CREATE OR REPLACE TEMP TABLE attribution_named AS
WITH segs AS (SELECT k, s, e, name_class AS class FROM attribution_segment_causes WHERE detail IS NULL),
ranges AS (SELECT k, class, s, e, name FROM attribution_host_ranges WHERE class IN (SELECT class FROM segs)),
buckets AS (
    SELECT k, class, min(s) AS base_ns, greatest(median(e - s)::BIGINT, (max(e) - min(s)) // 4096, 1) AS width_ns
    FROM ranges GROUP BY k, class
),
bucketed AS (  -- each range in every bucket it overlaps
    SELECT r.k, r.class, r.s, r.e, r.name,
           unnest(range((r.s - b.base_ns) // b.width_ns, (r.e - 1 - b.base_ns) // b.width_ns + 1)) AS bucket
    FROM ranges r JOIN buckets b USING (k, class)
),
placed AS (SELECT g.*, (g.s - b.base_ns) // b.width_ns AS bucket FROM segs g JOIN buckets b USING (k, class))
SELECT g.k, g.s, arg_max(r.name, (r.s, -r.e, r.name)) AS name
FROM placed g
JOIN bucketed r ON r.k = g.k AND r.class = g.class AND r.bucket = g.bucket AND r.s <= g.s AND r.e >= g.e
GROUP BY g.k, g.s;

DROP TABLE attribution_host_ranges;

-- The attribution: one row per source, device, step, cause and detail with its time (ns); the window's causes
-- sum to the window, the causes outside it (attribution_outside_causes) to what was recorded around it.
CREATE OR REPLACE TEMP TABLE attribution_slices AS
SELECT l.source_id, l.rank, l.device, c.step, c.cause, coalesce(c.detail, n.name) AS detail, sum(c.e - c.s) AS ns
FROM attribution_segment_causes c JOIN attribution_lanes l USING (k)
LEFT JOIN attribution_named n ON n.k = c.k AND n.s = c.s
GROUP BY ALL
UNION ALL
SELECT l.source_id, l.rank, l.device, o.step, o.cause, o.detail, sum(o.e - o.s)
FROM attribution_outside o JOIN attribution_lanes l USING (k)
GROUP BY ALL;

-- The causes of time outside the window.
CREATE OR REPLACE TEMP MACRO attribution_outside_cause(cause) AS cause IN ('startup', 'warmup', 'prologue', 'teardown');

-- Per source, device and step of the window: its span (ns) and the causes' shares; the causes sum to span_ns.
CREATE OR REPLACE TEMP VIEW attribution_steps AS
SELECT source_id, rank, device, step, sum(ns) AS span_ns,
       sum(ns) FILTER (WHERE cause = 'gpu_compute') AS compute_ns,
       sum(ns) FILTER (WHERE cause = 'comm_transfer') AS comm_transfer_ns,
       sum(ns) FILTER (WHERE cause = 'wait_for_peer') AS wait_for_peer_ns
FROM attribution_slices WHERE NOT attribution_outside_cause(cause) GROUP BY source_id, rank, device, step;

-- Per source and device over the window: time per cause (ns) and % of the window.
CREATE OR REPLACE TEMP VIEW attribution_by_cause AS
SELECT source_id, rank, device, cause, sum(ns) AS ns,
       100.0 * sum(ns) / sum(sum(ns)) OVER (PARTITION BY source_id, device) AS pct
FROM attribution_slices WHERE NOT attribution_outside_cause(cause) GROUP BY source_id, rank, device, cause;

-- What each GPU did over its window, for the report's headline: computing_ns (a
-- compute kernel or a copy runs), communicating_ns (only communication runs, all ranks arrived), waiting_ns (only
-- communication runs and this rank waits in it for a later rank), idle_ns; they sum to the window (ns).
-- waited_for: the rank it waited for the longest in all (the waits' time summed per rank first: a wait's segments
-- are cut wherever another set has a boundary, so the longest single segment would name the rank cut least).
CREATE OR REPLACE TEMP VIEW attribution_gpu_states AS
WITH per_peer AS (  -- per lane and rank waited for (NULL: no wait)
    SELECT k, waiting_for,
           sum(e - s) FILTER (WHERE in_work) AS computing_ns,
           sum(e - s) FILTER (WHERE NOT in_work AND in_busy AND waiting_for IS NULL) AS communicating_ns,
           sum(e - s) FILTER (WHERE NOT in_work AND in_busy AND waiting_for IS NOT NULL) AS waiting_ns,
           sum(e - s) FILTER (WHERE NOT in_busy) AS idle_ns
    FROM attribution_segment_causes GROUP BY k, waiting_for
)
SELECT l.source_id, l.rank, l.device,
       sum(p.computing_ns) AS computing_ns, sum(p.communicating_ns) AS communicating_ns,
       sum(p.waiting_ns) AS waiting_ns, sum(p.idle_ns) AS idle_ns,
       arg_max(p.waiting_for, (p.waiting_ns, -p.waiting_for)) FILTER (WHERE p.waiting_ns > 0) AS waited_for
FROM per_peer p JOIN attribution_lanes l USING (k)
GROUP BY l.source_id, l.rank, l.device;

-- The report's attribution (attribution_slices; ms). Columns: rank, device, step, cause, detail, ms; per rank and
-- device the rows sum to its window and what was recorded around it.
CREATE OR REPLACE TEMP VIEW attribution_report_slices AS
SELECT rank, device, step, cause, detail, ns / 1e6 AS ms FROM attribution_slices;

-- The report's headline of what the GPUs did, one row over every GPU's window (attribution_gpu_states, a GPU
-- without a state counted 0), as % of the windows. Columns: computing_pct, communication_pct (communicating and
-- waiting in collectives), waiting_pct (waiting in collectives for a later rank), waiting_for_rank (the rank
-- waited for most).
CREATE OR REPLACE TEMP VIEW attribution_report_gpu_states AS
SELECT 100.0 * sum(computing_ns) / sum(computing_ns + communicating_ns + waiting_ns + idle_ns) AS computing_pct,
       100.0 * sum(communicating_ns + waiting_ns)
           / sum(computing_ns + communicating_ns + waiting_ns + idle_ns) AS communication_pct,
       100.0 * sum(waiting_ns) / sum(computing_ns + communicating_ns + waiting_ns + idle_ns) AS waiting_pct,
       arg_max(waited_for, waiting_ns) AS waiting_for_rank
FROM (SELECT * REPLACE (coalesce(computing_ns, 0) AS computing_ns,
                        coalesce(communicating_ns, 0) AS communicating_ns,
                        coalesce(waiting_ns, 0) AS waiting_ns, coalesce(idle_ns, 0) AS idle_ns)
      FROM attribution_gpu_states);
