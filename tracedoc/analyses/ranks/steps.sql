-- ranks.steps: one row per rank and steady step (trace.steps) — the rank × step table of the dashboard's heatmap.
--
-- GPU work belongs to the step (ProfilerStep#N on the host) during which the host launched it, so a step's
-- numbers on every rank cover the same work even though the GPU runs it later than the host queued it; a
-- collective belongs to the step in which it was launched (ranks.collectives). Columns (times in ns):
--   host_step_ns        the step's duration on the host (its ProfilerStep#N, step range or kernel period)
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
-- scope: job
-- hands back: ranks_step_work, ranks_step_kernels
-- client only: ranks_steps, ranks_report_steps
-- include: ranks.matched
-- include: gpu.idle

-- GPU work launched in a steady step, with its step (trace.steps). Columns: source_id, rank, device, kind,
-- category, work_row (its row in gpu_activity), dur_ns, ts_ns, end_ns, blocks (kernels' thread blocks), step.
CREATE OR REPLACE TEMP VIEW ranks_launched_work AS
SELECT w.* EXCLUDE (launch_ns) FROM trace_step_work w JOIN trace_steady_steps s USING (source_id, step);

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
    FROM gpu_idle_gaps g ASOF JOIN trace_steady_steps s ON g.source_id = s.source_id AND g.launch_ts_ns >= s.ts_ns
    WHERE g.cause = 'host_wait' AND g.launch_ts_ns < s.ts_ns + s.dur_ns
    GROUP BY g.source_id, s.step
)
SELECT s.source_id, s.step, w.first_ns, w.last_ns, w.compute_ns, w.kernels, w.grid_blocks, g.host_gap_ns
FROM trace_steady_steps s LEFT JOIN work w USING (source_id, step) LEFT JOIN gaps g USING (source_id, step);

-- Compute kernels per source, step and kernel name: launches (count), ns (Σ duration) and blocks (Σ thread
-- blocks), for comparing ranks' kernels (ranks.stragglers) without their events.
CREATE OR REPLACE TEMP TABLE ranks_step_kernels AS
SELECT w.source_id, w.step, g.name, count(*) AS launches, sum(g.dur_ns) AS ns, sum(w.blocks) AS blocks
FROM (SELECT source_id, step, work_row, blocks FROM ranks_launched_work  -- the join's rows narrow: the rest is
      WHERE kind = 'kernel' AND category = 'compute') w                  -- read from the work's own row
JOIN gpu_activity g ON g.rowid = w.work_row
GROUP BY w.source_id, w.step, g.name;

-- One row per source and steady step: source_id, rank, step and the columns listed in the header.
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
FROM trace_steady_steps s
LEFT JOIN ranks_step_work w USING (source_id, step)
LEFT JOIN comm c USING (source_id, step);

-- The report's rank × step table (ranks_steps; ms), the ranks heatmap's. Columns: rank, step, step_ms (GPU time
-- of the step), compute_ms, comm_wait_ms (waits inside collectives), arrival_lateness_ms, exposed_wait_ms,
-- others_wait_ms (what this rank's late arrival cost the others), comm_ms, host_step_ms, host_gap_ms, kernels,
-- collectives.
CREATE OR REPLACE TEMP VIEW ranks_report_steps AS
SELECT rank, step, step_ns / 1e6 AS step_ms, compute_ns / 1e6 AS compute_ms, comm_wait_ns / 1e6 AS comm_wait_ms,
       lateness_ns / 1e6 AS arrival_lateness_ms, exposed_wait_ns / 1e6 AS exposed_wait_ms,
       blocked_exposed_ns / 1e6 AS others_wait_ms, comm_ns / 1e6 AS comm_ms, host_step_ns / 1e6 AS host_step_ms,
       host_gap_ns / 1e6 AS host_gap_ms, kernels, collectives
FROM ranks_steps;
