-- memory.growth: how much more GPU memory is held after each steady step, and the allocations that account for it.
-- Bytes, ns.
--
-- Held memory is the allocator's allocated bytes at each steady step's end (memory.timeline); its growth per step
-- is the least-squares slope over the steady steps (warm-up steps, and steps from an out-of-memory failure on, left
-- out), and r2 says how steady it is (1: the
-- same amount every step). The allocations behind it are those made in a steady step and never freed before the
-- trace ended, leaving out the last two steps (whose tensors may still be freed by the next step: outputs kept one
-- step for logging, double buffers); divided by the steps they come from, they give each site's bytes per step.
-- A site is the user's innermost Python frame on the allocating thread (with_stack=True), else the operator that
-- allocated, else the innermost annotation (an NVTX range: all an Nsight Systems export names); where a snapshot of the same run was given, the snapshot's frames name it (memory.snapshot).
-- reads: memory_events, memory_segments, memory_blocks, memory_actions
-- include: memory.timeline
-- include: memory.snapshot

-- One row per source and GPU with at least 3 steady steps: growth_bytes_per_step (slope), r2, the steady steps,
-- allocated at the first and last steady step's end, capacity, and steps_to_oom: steps until the allocator's
-- reserved memory, growing at this rate, would reach the device's memory (NULL when not growing).
CREATE OR REPLACE TEMP TABLE memory_growth AS
WITH fit AS (
    SELECT source_id, any_value(rank) AS rank, device, count(*) AS steady_steps,
           regr_slope(allocated_end, n) AS slope, regr_r2(allocated_end, n) AS r2,
           arg_min(allocated_end, n) AS allocated_first, arg_max(allocated_end, n) AS allocated_last,
           arg_max(reserved_end, n) AS reserved_last, arg_max(step, n) AS last_step
    FROM memory_steps m
    WHERE n IS NOT NULL AND allocated_end IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM memory_gpu_events o WHERE o.kind = 'oom' AND o.source_id = m.source_id
                      AND o.device = m.device AND o.ts_ns < m.ts_ns + m.dur_ns)  -- steps up to a failure only
    GROUP BY source_id, device
)
SELECT f.source_id, f.rank, f.device, f.steady_steps, f.slope AS growth_bytes_per_step,
       coalesce(f.r2, CASE WHEN f.slope = 0 THEN 1 END) AS r2, f.allocated_first, f.allocated_last,
       f.allocated_last - f.allocated_first AS growth_bytes, f.reserved_last, f.last_step, d.capacity_bytes,
       CASE WHEN f.slope > 0 AND d.capacity_bytes > f.reserved_last
            THEN CAST(floor((d.capacity_bytes - greatest(f.allocated_last, f.reserved_last)) / f.slope) AS BIGINT)
       END AS steps_to_oom
FROM fit f LEFT JOIN memory_by_device d USING (source_id, device)
WHERE f.steady_steps >= 3;

-- The allocations of steady steps still held when the trace ended (last two steady steps left out), with their
-- site.
CREATE OR REPLACE TEMP TABLE memory_held_allocs AS
WITH steady AS (
    SELECT source_id, device, max(n) AS last_n FROM memory_steps WHERE n IS NOT NULL GROUP BY ALL
),
held AS (
    SELECT a.* FROM memory_allocs a
    JOIN memory_steps s ON s.source_id = a.source_id AND s.device = a.device AND s.step = a.step
    JOIN steady ON steady.source_id = a.source_id AND steady.device = a.device
    WHERE a.freed_ns IS NULL AND s.n IS NOT NULL AND s.n <= steady.last_n - 2
),
frames AS (
    SELECT h.source_id, h.device, h.addr, h.ts_ns,
           arg_max(memory_user_frame(c.name), c.ts_ns)
               FILTER (WHERE c.kind = 'python' AND memory_user_frame(c.name) IS NOT NULL) AS py_site,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'op') AS op,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'annotation' AND c.name NOT LIKE 'ProfilerStep#%') AS annotation
    FROM held h
    JOIN cpu_activity c ON c.source_id = h.source_id AND c.tid = h.tid AND c.ts_ns <= h.ts_ns
                       AND h.ts_ns <= c.ts_ns + c.dur_ns AND c.kind IN ('op', 'python', 'annotation')
    GROUP BY ALL
)
SELECT h.*, f.op, coalesce(j.site, f.py_site, f.op, f.annotation, '(unknown)') AS site, j.stack
FROM held h
LEFT JOIN frames f USING (source_id, device, addr, ts_ns)
LEFT JOIN memory_snapshot_matches j ON j.source_id = h.source_id AND j.device = h.device AND j.addr = h.addr
                                   AND j.ts_ns = h.ts_ns;

-- Per source, GPU and site: bytes held per step (over the steps the held allocations come from), allocations,
-- their sizes, and the site's share of the growth.
CREATE OR REPLACE TEMP TABLE memory_growth_sites AS
WITH steps AS (
    SELECT source_id, device, greatest(max(n) - 2, 1) AS counted FROM memory_steps WHERE n IS NOT NULL GROUP BY ALL
)
SELECT h.source_id, any_value(h.rank) AS rank, h.device, h.site, any_value(h.op) AS op, any_value(h.stack) AS stack,
       count(*) AS allocations, sum(h.bytes) AS held_bytes, sum(h.bytes) / any_value(s.counted) AS bytes_per_step,
       min(h.bytes) AS min_bytes, max(h.bytes) AS max_bytes
FROM memory_held_allocs h JOIN steps s USING (source_id, device)
GROUP BY h.source_id, h.device, h.site;

-- What the leak rule reads: per GPU with steady growth, the growth and its largest site, also as tensor_site
-- where the events are the allocator's (its tensors' site) or as cuda_range where they are CUDA's (the range in
-- which the process took more from CUDA; memory.timeline's basis).
CREATE OR REPLACE TEMP VIEW memory_leaks AS
SELECT g.*, s.site AS top_site, s.op AS top_op, s.bytes_per_step AS top_site_bytes_per_step,
       CASE WHEN d.basis = 'allocator' THEN s.site END AS tensor_site,
       CASE WHEN d.basis = 'cuda' THEN s.site END AS cuda_range,
       s.allocations AS top_site_allocations, s.stack AS top_site_stack,
       100.0 * s.bytes_per_step / nullif(g.growth_bytes_per_step, 0) AS top_site_share_pct
FROM memory_growth g
JOIN memory_by_device d USING (source_id, device)
LEFT JOIN (SELECT * FROM memory_growth_sites
           QUALIFY row_number() OVER (PARTITION BY source_id, device ORDER BY bytes_per_step DESC, site) = 1) s
  USING (source_id, device);

-- The report's sites behind each GPU's growth (memory_growth_sites). Columns: rank, device, site, op,
-- allocations, held_bytes, bytes_per_step.
CREATE OR REPLACE TEMP VIEW memory_report_growth_sites AS
SELECT rank, device, site, op, allocations, held_bytes, bytes_per_step FROM memory_growth_sites;
