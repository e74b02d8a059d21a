-- memory.growth: how much more GPU memory is held after each steady step, and the allocations that account for it.
-- Bytes, ns.
--
-- Held memory is the allocator's allocated bytes at each steady step's end (memory.timeline); its growth per step
-- is the least-squares slope over the steady steps (warm-up steps, and steps from an out-of-memory failure on, left
-- out), and r2 says how steady it is (1: the
-- same amount every step). The allocations behind it are those made in a steady step and never freed before the
-- trace ended, leaving out the last two steps (whose tensors may still be freed by the next step: outputs kept one
-- step for logging, double buffers); divided by the steps they come from, they give each site's bytes per step.
-- A site is memory_sites' (memory.timeline): the snapshot's frames where a snapshot of the run was given (or the
-- snapshot is the input), else the user's innermost Python frame on the allocating thread (with_stack=True), else
-- the operator that allocated, else the innermost annotation (an NVTX range: all an Nsight Systems export names).
-- include: memory.timeline
-- include: memory.snapshot
-- include: trace.framework

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
)
SELECT h.* EXCLUDE (site, stack), n.op, coalesce(n.site, '(unknown)') AS site, n.stack
FROM held h
LEFT JOIN memory_sites n ON n.source_id = h.source_id AND n.device = h.device AND n.addr = h.addr
                        AND n.ts_ns = h.ts_ns;

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
-- which the process took more from CUDA; memory.timeline's basis), and fix_text: the advice, for tensors a PyTorch
-- program keeps (the allocator's events), for a PyTorch program's reserve seen by CUDA, or for any other CUDA
-- program (CuPy, C++: trace.framework), naming the site only where one is named.
CREATE OR REPLACE TEMP VIEW memory_leaks AS
WITH leaks AS (
    SELECT g.*, s.site AS top_site, s.op AS top_op, s.bytes_per_step AS top_site_bytes_per_step,
           CASE WHEN d.basis = 'allocator' THEN s.site END AS tensor_site,
           CASE WHEN d.basis = 'cuda' THEN s.site END AS cuda_range,
           s.allocations AS top_site_allocations, s.stack AS top_site_stack,
           100.0 * s.bytes_per_step / nullif(g.growth_bytes_per_step, 0) AS top_site_share_pct,
           d.basis, coalesce(f.pytorch, d.basis = 'allocator') AS pytorch,
           s.site IS NOT NULL AND s.site <> '(unknown)' AS site_named
    FROM memory_growth g
    JOIN memory_by_device d USING (source_id, device)
    LEFT JOIN trace_framework f USING (source_id)
    LEFT JOIN (SELECT * FROM memory_growth_sites
               QUALIFY row_number() OVER (PARTITION BY source_id, device ORDER BY bytes_per_step DESC, site) = 1) s
      USING (source_id, device)
)
SELECT * EXCLUDE (basis, pytorch, site_named),
       CASE WHEN basis = 'cuda' AND NOT pytorch THEN
           'Find what keeps each step''s GPU memory: arrays or buffers added to a list, dict or cache every step '
           || '(keep results on the host, or drop the reference once used), a memory pool that only grows (CuPy''s '
           || 'default pool keeps every freed block for reuse: `cupy.get_default_memory_pool().free_all_blocks()` '
           || 'returns them; CUDA''s stream-ordered pool, cudaMallocAsync with a release threshold, reuses them '
           || 'instead of asking for more), or a cudaMalloc without its cudaFree.'
           || CASE WHEN site_named THEN ' The range named above is where the process took more memory; the line '
                   || 'that keeps it is usually in it or just after it.' ELSE '' END
       ELSE
           'Find what keeps a reference to each step''s tensors: a list or dict appended every step (outputs, '
           || 'losses or metrics kept "for later": store `.item()` or `.detach().cpu()` instead), a loss summed '
           || 'without `.detach()` (which keeps every step''s autograd graph alive), hooks or caches that grow, or '
           || '`retain_graph=True`.'
           || CASE WHEN site_named AND basis = 'allocator' THEN ' The allocation site named above made the tensors; '
                   || 'the line that keeps them is usually just after it.'
                   WHEN site_named THEN ' CUDA sees the caching allocator''s reserve, not tensors: the range named '
                   || 'above is where the allocator took more memory, and the tensors kept were made in it or before.'
                   ELSE '' END
           || ' Check with `torch.cuda.memory_allocated()` at each step''s end.'
       END AS fix_text
FROM leaks;

-- The report's sites behind each GPU's growth (memory_growth_sites). Columns: rank, device, site, op,
-- allocations, held_bytes, bytes_per_step.
CREATE OR REPLACE TEMP VIEW memory_report_growth_sites AS
SELECT rank, device, site, op, allocations, held_bytes, bytes_per_step FROM memory_growth_sites;
