-- attribution.host: what the host did while the GPU waited for it, from the time attribution.
--
-- The long host-wait idle of a device (gpu.idle) split by the attribution into its host causes: data loading,
-- named phases (annotations such as 'checkpoint'), host work (profiled operators) and un-instrumented host time
-- (no profiled range covers it). The dominant cause decides the advice: a slow DataLoader, a phase to move off the
-- training thread, CPU-side operators, or time the profile cannot see, which needs ranges first. Times in ns.
-- include: attribution.time
-- include: nvtx.idle
-- include: trace.framework
-- include: efficiency.observer

-- Per device: the host causes of its long idle (ns each), the dominant one with the range that holds most of it
-- (host_cause, host_detail, host_cause_pct: its share of those causes, %) and the advice for it (host_fix), in
-- PyTorch's terms only where the trace is of a PyTorch program (trace.framework; pytorch_program, which the rule's
-- references follow too). alloc_calls, alloc_ns, free_ns:
-- the synchronous cudaFree/cudaMalloc calls (and the driver's and HIP's) the host sat in during those gaps, their
-- time in the gaps and cudaFree's part; alloc_pct: % of the host causes' time. Without a memory pool (CuPy's
-- set_allocator(None), raw CUDA) every array is a cudaMalloc and every drop a cudaFree, which waits for the GPU's
-- queue: where they hold a fifth of the host's time or more, the advice starts with a pool.
CREATE OR REPLACE TEMP VIEW attribution_host_causes AS
WITH per_cause AS (
    SELECT source_id, device, cause, sum(ns) AS ns, arg_max(detail, (ns, detail)) AS detail
    FROM attribution_slices
    WHERE cause IN ('data_loading', 'phase', 'host_work', 'uninstrumented_host')
    GROUP BY source_id, device, cause
),
allocs AS (  -- synchronous frees and allocations the host sat in during the long host-wait gaps
    SELECT g.source_id, g.device, count(DISTINCT r.ts_ns) AS alloc_calls,
           sum(least(g.end_ns, r.ts_ns + r.dur_ns) - greatest(g.ts_ns, r.ts_ns)) AS alloc_ns,
           sum(least(g.end_ns, r.ts_ns + r.dur_ns) - greatest(g.ts_ns, r.ts_ns))
               FILTER (WHERE r.name IN ('cudaFree', 'cuMemFree_v2', 'cuMemFree', 'hipFree')) AS free_ns
    FROM gpu_idle_gaps g
    JOIN cpu_activity r ON r.source_id = g.source_id AND r.kind IN ('runtime', 'driver')
                       AND r.ts_ns < g.end_ns AND r.ts_ns + r.dur_ns > g.ts_ns
    WHERE g.cause = 'host_wait' AND g.long_gap
      AND r.name IN ('cudaFree', 'cudaMalloc', 'cuMemFree_v2', 'cuMemAlloc_v2', 'cuMemFree', 'cuMemAlloc',
                     'hipFree', 'hipMalloc')
    GROUP BY g.source_id, g.device
),
dominant AS (
    SELECT source_id, device,
           sum(ns) FILTER (WHERE cause = 'data_loading') AS data_loading_ns,
           sum(ns) FILTER (WHERE cause = 'phase') AS phase_ns,
           sum(ns) FILTER (WHERE cause = 'host_work') AS host_work_ns,
           sum(ns) FILTER (WHERE cause = 'uninstrumented_host') AS uninstrumented_ns,
           arg_max(cause, (ns, cause)) AS host_cause,
           arg_max(CASE WHEN cause <> 'uninstrumented_host' THEN detail END, (ns, cause)) AS host_detail,
           100.0 * max(ns) / nullif(sum(ns), 0) AS host_cause_pct
    FROM per_cause GROUP BY source_id, device
)
SELECT d.*, a.alloc_calls, a.alloc_ns, a.free_ns, a.alloc_ns / nullif(w.step_count, 0) AS alloc_step_ns,
       100.0 * a.alloc_ns / nullif(coalesce(d.data_loading_ns, 0) + coalesce(d.phase_ns, 0)
                                   + coalesce(d.host_work_ns, 0) + coalesce(d.uninstrumented_ns, 0), 0) AS alloc_pct,
       CASE WHEN a.alloc_ns >= 0.2 * (coalesce(d.data_loading_ns, 0) + coalesce(d.phase_ns, 0)
                                      + coalesce(d.host_work_ns, 0) + coalesce(d.uninstrumented_ns, 0))
            THEN 'Keep allocation out of the loop: cudaFree waits for all the work the GPU has queued, and cudaMalloc '
                 || 'stalls the host too. '
                 || CASE WHEN f.pytorch THEN 'Let PyTorch''s caching allocator keep the memory (do not call '
                                             || 'torch.cuda.empty_cache() in the loop, and avoid allocators that '
                                             || 'bypass it), or allocate the buffers once and reuse them.'
                         ELSE 'Use a memory pool: CuPy''s default pool (cupy.cuda.set_allocator('
                              || 'cupy.cuda.MemoryPool().malloc); never set_allocator(None)), a stream-ordered pool '
                              || '(cudaMallocAsync/cudaFreeAsync, CuPy''s MemoryAsyncPool), or allocate the '
                              || 'buffers once before the loop and reuse them.' END || ' '
            ELSE '' END ||
       CASE host_cause
           WHEN 'data_loading' THEN 'Feed the GPU from a faster input pipeline: load and preprocess data in '
               || 'DataLoader worker processes (num_workers > 0, persistent_workers=True, prefetch_factor ≥ 2) with '
               || 'pin_memory=True, and move preprocessing to the GPU.'
           WHEN 'phase' THEN 'Take what the host does in ''' || host_detail || ''' off the critical path. '
               || 'Periodic work (checkpointing, evaluation, logging): run it in a background thread or process'
               || CASE WHEN f.pytorch THEN ' (e.g. torch.distributed.checkpoint.async_save), ' ELSE ', ' END
               || 'overlap it with GPU work, or do it less often. '
               || 'Work in every step: move it to the GPU, or make its launches cheaper (CUDA graphs'
               || CASE WHEN f.pytorch THEN ', torch.compile); torch.profiler''s with_stack=True shows where inside '
                                           || 'the range the time goes.'
                       ELSE '); a sampling profiler (nsys profile --sample=process-tree) shows where inside the '
                            || 'range the time goes.' END
           WHEN 'host_work' THEN 'The host spends the gaps in ''' || host_detail || ''' between launches: '
               || 'move that work to the GPU or out of the step, batch it, and avoid Python work between steps that '
               || 'waits on results.'
           ELSE 'No profiled operator or range covers this host time (loops, sleeps, I/O or work outside '
               || 'the profiler''s view): wrap the suspect code in '
               || CASE WHEN f.pytorch THEN 'torch.profiler.record_function or NVTX ranges' ELSE 'NVTX ranges' END
               || ' to name it, then move it off the critical path.'
       END AS host_fix,
       coalesce(f.pytorch, false) AS pytorch_program
FROM dominant d LEFT JOIN trace_framework f USING (source_id) LEFT JOIN allocs a USING (source_id, device)
LEFT JOIN trace_wall w USING (source_id);

-- nvtx_gpu_idle_host_bound (gpu.idle's long host-wait idle with its NVTX range) with the columns above, and the
-- dominant cause as words for the finding's sentence (host_cause_text, host_detail_text: ' (mostly ''name'')' or
-- ''); from efficiency.observer (PyTorch traces, else NULL): profiler_idle_ns, what the profiler's own bookkeeping
-- may cost of the long idle (its cost over the steady steps, at most that idle), profiler_idle_pct (its share, %),
-- unprofiled_step_ns, traced_step_ns and unprofiled_idle_pct, as gpu.launch's gpu_launch_overhead has them.
-- pool_alloc_ns: alloc_ns where the synchronous frees and allocations are a cause to name (alloc_pct ≥ 20).
CREATE OR REPLACE TEMP VIEW attribution_host_bound AS
SELECT b.*, c.* EXCLUDE (source_id, device),
       CASE WHEN o.profiler_cost_sum_ns IS NOT NULL  -- least() would pass the idle for a missing estimate
            THEN least(o.profiler_cost_sum_ns, b.host_wait_long_ns) END AS profiler_idle_ns,
       CASE WHEN o.profiler_cost_sum_ns IS NOT NULL
            THEN 100.0 * least(o.profiler_cost_sum_ns, b.host_wait_long_ns) / nullif(b.host_wait_long_ns, 0) END AS profiler_idle_pct,
       o.unprofiled_ns AS unprofiled_step_ns, o.traced_ns AS traced_step_ns, o.unprofiled_idle_pct,
       CASE c.host_cause WHEN 'data_loading' THEN 'data loading' WHEN 'phase' THEN 'named phases'
                         WHEN 'host_work' THEN 'profiled host work' ELSE 'host time no profiled range covers' END
           AS host_cause_text,
       CASE WHEN c.host_detail IS NOT NULL AND c.host_cause <> 'uninstrumented_host'
            THEN ' (mostly ''' || c.host_detail || ''')' ELSE '' END AS host_detail_text,
       CASE WHEN c.alloc_pct >= 20 THEN c.alloc_ns END AS pool_alloc_ns
FROM nvtx_gpu_idle_host_bound b LEFT JOIN attribution_host_causes c USING (source_id, device)
LEFT JOIN efficiency_observer o USING (source_id);
