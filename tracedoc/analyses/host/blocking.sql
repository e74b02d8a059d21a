-- host.blocking: CUDA and HIP copies and memsets that block the calling host thread (nsys analyze's
-- cuda_memcpy_sync and cuda_memset_sync rules).
--
-- A synchronous cudaMemcpy* or hipMemcpy* (no 'Async' in its name: hipMemcpyWithStream is synchronous) returns
-- only when the copy is done, and so after all work queued before it; host-to-device copies of 64 KiB or less are
-- left out, as nsys does (they are staged and return at once). A synchronous cudaMemset* or hipMemset* blocks the
-- host when its target is host-accessible (pinned or managed memory); on device memory it does not. Times in ns,
-- sizes in bytes.
-- include: gpu.busy
-- include: trace.framework

-- One row per blocking call with the GPU activity it issued (via the correlation id).
CREATE OR REPLACE TEMP TABLE host_blocking_calls AS
SELECT c.source_id, c.rank, c.pid, c.tid, c.name AS call, c.ts_ns, c.dur_ns, a.kind, a.copy_kind, a.host_memory,
       a.bytes, a.dur_ns AS gpu_ns, a.device, a.stream
FROM cpu_activity c
JOIN trace_windows w ON w.source_id = c.source_id AND c.ts_ns >= w.start_ns AND c.ts_ns < w.end_ns
JOIN gpu_activity a ON a.source_id = c.source_id AND a.correlation_id = c.correlation_id
WHERE c.kind = 'runtime' AND c.name NOT ILIKE '%async%'
  AND (((c.name LIKE 'cudaMemcpy%' OR c.name LIKE 'hipMemcpy%') AND a.kind = 'memcpy'
         AND NOT (a.copy_kind = 'HtoD' AND a.bytes <= 65536))
    OR ((c.name LIKE 'cudaMemset%' OR c.name LIKE 'hipMemset%') AND a.kind = 'memset'
        AND a.host_memory IN ('pinned', 'managed')));

-- Per rank and kind (memcpy | memset): calls, bytes, host time blocked in them (ns), the GPU time of the work
-- they issued (ns), wait_ns = blocked beyond that work (the host waiting for the queue to drain), blocked_pct
-- (% of the window), directions (copy kinds), the most frequent call (on a tie, the first made) and pytorch_note:
-- the advice's PyTorch clause, empty where the trace is not of a PyTorch program (trace.framework).
-- A table, a row per rank and kind: two rules read it.
CREATE OR REPLACE TEMP TABLE host_blocking_by_rank AS
SELECT b.source_id, b.rank, b.kind, count(*) AS call_count, sum(b.bytes) AS total_bytes, sum(b.dur_ns) AS blocked_ns,
       sum(b.gpu_ns) AS gpu_ns, greatest(sum(b.dur_ns) - sum(b.gpu_ns), 0) AS wait_ns,
       100.0 * sum(b.dur_ns) / nullif(any_value(w.wall_ns), 0) AS blocked_pct,
       coalesce(string_agg(DISTINCT b.copy_kind, ', ' ORDER BY b.copy_kind),
                string_agg(DISTINCT b.host_memory, ', ' ORDER BY b.host_memory)) AS directions,
       mode(b.call ORDER BY b.ts_ns, b.call) AS top_call, any_value(w.wall_ns) AS wall_ns,
       CASE WHEN NOT coalesce(any_value(f.pytorch), true) THEN ''
            WHEN b.kind = 'memcpy' THEN '; in PyTorch, tensor.to(device, non_blocking=True) from pinned memory and '
                                        || 'no .item()/.cpu() in the hot loop'
            ELSE '; in PyTorch, zero tensors on the device (torch.zeros(..., device="cuda")) rather than pinned '
                 || 'host buffers' END AS pytorch_note
FROM host_blocking_calls b JOIN trace_wall w USING (source_id)
LEFT JOIN trace_framework f USING (source_id)
GROUP BY b.source_id, b.rank, b.kind;
