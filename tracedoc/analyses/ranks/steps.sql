-- ranks.steps: one row per rank and profiler step — the rank × step table of the dashboard's heatmap.
--
-- GPU work belongs to the step (ProfilerStep#N on the host) during which the host launched it, so a step's
-- numbers on every rank cover the same work even though the GPU runs it later than the host queued it; a
-- collective belongs to the step in which it was launched (ranks.collectives). Columns (times in ns):
--   host_step_ns        the ProfilerStep#N annotation's duration on the host
--   step_ns             GPU time of the step: first start to last end of the GPU work launched in it
--   compute_ns          Σ duration of the compute kernels launched in it (kernels on several streams add up)
--   kernels             compute kernels launched in it, count
--   grid_blocks         Σ thread blocks (grid x·y·z) of those kernels, count: more blocks for the same kernels
--                       means larger inputs
--   host_gap_ns         Σ GPU idle gaps that ended when the host launched work after the GPU had gone idle
--                       (gpu.idle cause 'host_wait'), for work launched in the step: the GPU waited for the host
--   collectives         matched collectives of the step, count
--   comm_ns             Σ duration of this rank's kernels of those collectives
--   comm_wait_ns        Σ wait_ns: time inside them waiting for later ranks
--   exposed_wait_ns     Σ exposed_wait_ns: the part of that wait with no compute running on this GPU
--   lateness_ns         Σ lateness_ns: how much later than the first rank it arrived, over the step's collectives
--   blocked_ns          Σ blocked_ns: the time it alone held the others up (it arrived last)
--   blocked_exposed_ns  Σ blocked_exposed_ns: what that cost the others (their exposed wait, mean over them)
-- include: ranks.collectives
-- include: gpu.idle

-- GPU work with the step its launch fell in. Columns: source_id, rank, device, kind, category, name, dur_ns,
-- ts_ns, end_ns, blocks (kernels' thread blocks), step.
CREATE OR REPLACE TEMP TABLE ranks_launched_work AS
WITH launches AS (
    SELECT source_id, correlation_id, min(ts_ns) AS launch_ts_ns
    FROM cpu_activity WHERE kind IN ('runtime', 'driver') AND correlation_id IS NOT NULL
      AND source_id IN (SELECT source_id FROM steps)
    GROUP BY source_id, correlation_id
),
stepped AS (  -- the step each launch fell in (the ASOF join sorts these narrow rows, not the work's)
    SELECT l.source_id, l.correlation_id, s.step
    FROM launches l ASOF JOIN steps s ON l.source_id = s.source_id AND l.launch_ts_ns >= s.ts_ns
    WHERE l.launch_ts_ns < s.ts_ns + s.dur_ns
)
SELECT g.source_id, g.rank, g.device, g.kind, g.category, g.name, g.dur_ns, g.ts_ns, g.ts_ns + g.dur_ns AS end_ns,
       CASE WHEN g.kind = 'kernel' THEN list_product(TRY_CAST(string_split(g.grid, ',') AS BIGINT[])) END AS blocks,
       l.step
FROM gpu_activity g JOIN stepped l ON l.source_id = g.source_id AND l.correlation_id = g.correlation_id
WHERE g.kind IN ('kernel', 'memcpy', 'memset');

-- The rank's own side of each step, from its trace alone (what a distributed run hands back per rank instead of
-- the work itself): source_id, step, first_ns and last_ns (first start and last end of the work launched in it),
-- compute_ns, kernels, grid_blocks and host_gap_ns (see the header).
CREATE OR REPLACE TEMP TABLE ranks_step_work AS
WITH work AS (
    SELECT source_id, step, min(ts_ns) AS first_ns, max(end_ns) AS last_ns,
           coalesce(sum(dur_ns) FILTER (WHERE kind = 'kernel' AND category = 'compute'), 0) AS compute_ns,
           count(*) FILTER (WHERE kind = 'kernel' AND category = 'compute') AS kernels,
           coalesce(sum(blocks) FILTER (WHERE kind = 'kernel' AND category = 'compute'), 0) AS grid_blocks
    FROM ranks_launched_work GROUP BY source_id, step
),
gaps AS (
    SELECT g.source_id, s.step, sum(g.dur_ns) AS host_gap_ns
    FROM gpu_idle_gaps g ASOF JOIN steps s ON g.source_id = s.source_id AND g.launch_ts_ns >= s.ts_ns
    WHERE g.cause = 'host_wait' AND g.launch_ts_ns < s.ts_ns + s.dur_ns
    GROUP BY g.source_id, s.step
)
SELECT s.source_id, s.step, w.first_ns, w.last_ns, w.compute_ns, w.kernels, w.grid_blocks, g.host_gap_ns
FROM steps s LEFT JOIN work w USING (source_id, step) LEFT JOIN gaps g USING (source_id, step);

-- Compute kernels per source, step and kernel name: launches (count) and ns (Σ duration), for comparing ranks'
-- kernels (ranks.stragglers) without their events.
CREATE OR REPLACE TEMP TABLE ranks_step_kernels AS
SELECT source_id, step, name, count(*) AS launches, sum(dur_ns) AS ns
FROM ranks_launched_work WHERE kind = 'kernel' AND category = 'compute'
GROUP BY source_id, step, name;

-- One row per source and profiler step: source_id, rank, step and the columns listed in the header.
CREATE OR REPLACE TEMP TABLE ranks_steps AS
WITH comm AS (
    SELECT source_id, instance_step AS step, count(*) AS collectives, sum(dur_ns) AS comm_ns,
           sum(wait_ns) AS comm_wait_ns, sum(exposed_wait_ns) AS exposed_wait_ns, sum(lateness_ns) AS lateness_ns,
           sum(blocked_ns) AS blocked_ns, sum(blocked_exposed_ns) AS blocked_exposed_ns
    FROM ranks_collectives WHERE instance_step IS NOT NULL
    GROUP BY source_id, instance_step
)
SELECT s.source_id, s.rank, s.step, s.dur_ns AS host_step_ns, w.last_ns - w.first_ns AS step_ns,
       coalesce(w.compute_ns, 0) AS compute_ns, coalesce(w.kernels, 0) AS kernels,
       coalesce(w.grid_blocks, 0) AS grid_blocks, coalesce(w.host_gap_ns, 0) AS host_gap_ns,
       coalesce(c.collectives, 0) AS collectives, coalesce(c.comm_ns, 0) AS comm_ns,
       coalesce(c.comm_wait_ns, 0) AS comm_wait_ns, coalesce(c.exposed_wait_ns, 0) AS exposed_wait_ns,
       coalesce(c.lateness_ns, 0) AS lateness_ns, coalesce(c.blocked_ns, 0) AS blocked_ns,
       coalesce(c.blocked_exposed_ns, 0) AS blocked_exposed_ns
FROM steps s
LEFT JOIN ranks_step_work w USING (source_id, step)
LEFT JOIN comm c USING (source_id, step);
