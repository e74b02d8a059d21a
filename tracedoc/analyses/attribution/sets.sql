-- attribution.sets: the lanes the time attribution (attribution.time) cuts, and the interval sets it sweeps that
-- need no idle gap: the GPU's busy time and work, the waits inside collectives, the one-off phases before the
-- window and the time recorded outside it. A module of its own so that it runs while the idle gaps and the syncs
-- (gpu.idle, host.sync) are measured: on a small trace the attribution is the longest chain of modules, and these
-- statements need neither. attribution.time drops the sets once it has swept them.
-- Times in ns.
-- include: gpu.busy
-- include: ranks.matched
-- include: intervals.merge

-- The lanes: one per device of a source with GPU work in its window (or anywhere, for a trace that is a one-off
-- phase: its window is empty, its whole time outside it); k packs (source_id, device). win_s/win_e: the window; cap_s/cap_e: what the trace
-- recorded; first_step: the first step's host start (NULL without steps).
CREATE OR REPLACE TEMP TABLE attribution_lanes AS
SELECT DISTINCT b.source_id, b.rank, b.device, b.source_id::BIGINT * 65536 + b.device AS k,
       w.start_ns AS win_s, w.end_ns AS win_e, w.capture_start_ns AS cap_s, w.capture_end_ns AS cap_e,
       w.first_step_ns AS first_step, w.kind
FROM (SELECT source_id, rank, device FROM gpu_busy_intervals
      UNION SELECT source_id, rank, device FROM gpu_activity
      WHERE kind IN ('kernel', 'memcpy', 'memset')
        AND source_id IN (SELECT source_id FROM trace_windows WHERE kind = 'graph_capture')) b
JOIN trace_windows w USING (source_id);

-- Busy time of each lane (gpu.busy's merged intervals), clipped to the window: where earlier-launched work still
-- ran when the first step began (attribution_step_starts).
CREATE OR REPLACE TEMP TABLE attribution_busy AS
SELECT l.k, greatest(b.ts_ns, l.win_s) AS s, least(b.end_ns, l.win_e) AS e
FROM gpu_busy_intervals b JOIN attribution_lanes l USING (source_id, device)
WHERE least(b.end_ns, l.win_e) > greatest(b.ts_ns, l.win_s);

-- Waits inside collectives for a later rank, with that rank (not merged: each keeps its peer; the waits of one
-- device follow each other on its communication streams).
CREATE OR REPLACE TEMP TABLE attribution_waits AS
WITH last AS (
    SELECT channel, instance, arg_max(rank, (is_last, -rank)) AS last_rank
    FROM ranks_collectives GROUP BY channel, instance
)
SELECT l.k, c.ts_ns AS s, c.ts_ns + c.wait_ns AS e, t.last_rank
FROM ranks_collectives c JOIN last t USING (channel, instance) JOIN attribution_lanes l USING (source_id, device)
WHERE c.wait_ns > 0;

-- The GPU's interval sets swept by attribution.time, each merged per lane (intervals.merge; a lane's set is disjoint
-- within itself), one row per merged interval with its set's bit (k, bit, s, e): the lane's work clipped to the
-- window, compute kernels (1), copies and memsets (2) and other work (4: communication kernels, kernels of no
-- category). One merge for all sets: the key packs lane and bit (lane × 4096 + bit). The host's sets by class are
-- attribution.time's, made once the long host-wait gaps are known.
CREATE OR REPLACE TEMP TABLE attribution_sets AS
WITH attribution_sets_raw AS (
    SELECT l.k * 4096 + CASE WHEN a.kind <> 'kernel' THEN 2 WHEN a.category <> 'communication' THEN 1 ELSE 4 END AS k,
           greatest(a.ts_ns, l.win_s) AS s, least(a.end_ns, l.win_e) AS e
    FROM gpu_work a JOIN attribution_lanes l USING (source_id, device)
)
SELECT k // 4096 AS k, (k % 4096)::INTEGER AS bit, s, e FROM intervals_merge('attribution_sets_raw');

-- One-off host phases before the window that name start-up time, by priority (1 first): CUDA graph capture
-- (from each cudaStreamBeginCapture to the next cudaStreamEndCapture of its thread, and cudaGraphInstantiate; the
-- HIP calls alike),
-- NCCL and MPI initialisation, module loading, CUDA context creation (the source's first CUDA call, when it took
-- 1 ms or more). Columns: k, s, e, detail, prio.
CREATE OR REPLACE TEMP TABLE attribution_oneoff AS
WITH host AS (
    SELECT c.*, l.k, l.win_s FROM cpu_activity c JOIN attribution_lanes l USING (source_id)
    WHERE c.ts_ns < l.win_s
),
begins AS (SELECT * FROM host WHERE kind IN ('runtime', 'driver') AND name LIKE '%StreamBeginCapture%'),
ends AS (SELECT * FROM host WHERE kind IN ('runtime', 'driver') AND name LIKE '%StreamEndCapture%'),
captures AS (
    SELECT b.k, b.ts_ns AS s, e.ts_ns + e.dur_ns AS e
    FROM begins b ASOF JOIN ends e ON e.k = b.k AND e.tid = b.tid AND e.ts_ns >= b.ts_ns
),
firsts AS (
    SELECT k, arg_min(ts_ns, (ts_ns, -dur_ns)) AS s, arg_min(ts_ns + dur_ns, (ts_ns, -dur_ns)) AS e
    FROM host WHERE kind IN ('runtime', 'driver') GROUP BY k
)
SELECT k, s, e, 'CUDA graph capture' AS detail, 1 AS prio FROM captures
UNION ALL
SELECT k, ts_ns, ts_ns + dur_ns, 'CUDA graph capture', 1 FROM host
WHERE kind IN ('runtime', 'driver') AND (name LIKE 'cudaGraphInstantiate%' OR name LIKE 'hipGraphInstantiate%')
UNION ALL
SELECT k, ts_ns, ts_ns + dur_ns, 'NCCL initialisation', 2 FROM host
WHERE name LIKE 'ncclCommInit%' OR name LIKE 'ncclCommSplit%' OR name LIKE 'nccl:init%'
UNION ALL
SELECT k, ts_ns, ts_ns + dur_ns, 'MPI initialisation', 3 FROM host WHERE name LIKE 'MPI\_Init%' ESCAPE '\'
UNION ALL
SELECT k, ts_ns, ts_ns + dur_ns, 'module loading', 4 FROM host
WHERE kind IN ('runtime', 'driver')
  AND (name LIKE 'cuModuleLoad%' OR name LIKE 'cuLibraryLoad%' OR name LIKE 'hipModuleLoad%')
UNION ALL
SELECT k, s, e, 'CUDA context creation', 5 FROM firsts WHERE e - s >= 1000000;

-- The time each lane recorded outside its window, cut where a step or one-off phase starts or ends, each piece
-- with its cause (startup, warmup, prologue, teardown) and detail (see the header).
CREATE OR REPLACE TEMP TABLE attribution_outside AS
WITH spans AS (
    SELECT k, cap_s AS s, win_s AS e, true AS before FROM attribution_lanes WHERE cap_s < win_s
    UNION ALL
    SELECT k, win_e, cap_e, false FROM attribution_lanes WHERE win_e < cap_e
),
cuts AS (
    SELECT k, s AS t FROM spans UNION SELECT k, e FROM spans
    UNION SELECT k, first_step FROM attribution_lanes WHERE first_step IS NOT NULL
    UNION SELECT l.k, t.ts_ns FROM trace_steps t JOIN attribution_lanes l USING (source_id) WHERE t.warmup
    UNION SELECT k, s FROM attribution_oneoff UNION SELECT k, e FROM attribution_oneoff
),
pieces AS (
    SELECT sp.k, c.t AS s, lead(c.t) OVER (PARTITION BY sp.k, sp.s ORDER BY c.t) AS e, sp.before
    FROM spans sp JOIN cuts c ON c.k = sp.k AND c.t >= sp.s AND c.t <= sp.e
),
named AS (
    SELECT p.k, p.s, arg_min(o.detail, o.prio) AS detail
    FROM pieces p JOIN attribution_oneoff o ON o.k = p.k AND o.s <= p.s AND o.e >= p.e
    WHERE p.e > p.s GROUP BY p.k, p.s
),
warm AS (SELECT l.k, t.step, t.ts_ns FROM trace_steps t JOIN attribution_lanes l USING (source_id) WHERE t.warmup)
SELECT p.k, p.s, p.e, w.step,
       CASE WHEN NOT p.before THEN 'teardown'
            WHEN l.first_step IS NOT NULL AND p.s >= l.first_step
                 THEN CASE WHEN w.step IS NOT NULL THEN 'warmup' ELSE 'prologue' END
            ELSE 'startup' END AS cause,
       CASE WHEN NOT p.before THEN CASE l.kind WHEN 'steps' THEN 'after the last step'
                                               WHEN 'capture_range' THEN 'after the profiler range'
                                               ELSE 'after the last GPU work' END
            WHEN l.first_step IS NOT NULL AND p.s >= l.first_step
                 THEN CASE WHEN w.step IS NOT NULL THEN 'warm-up step ' || w.step ELSE 'work queued before the window' END
            ELSE coalesce(n.detail, CASE l.kind WHEN 'steps' THEN 'before the first step'
                                                WHEN 'capture_range' THEN 'before the profiler range'
                                                ELSE 'before the first GPU work' END) END AS detail
FROM pieces p JOIN attribution_lanes l USING (k)
LEFT JOIN named n ON n.k = p.k AND n.s = p.s
ASOF LEFT JOIN warm w ON w.k = p.k AND p.s >= w.ts_ns
WHERE p.e > p.s;
