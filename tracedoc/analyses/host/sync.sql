-- host.sync: blocking host synchronizations and what they cost the GPU.
--
-- A sync call (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, synchronous cudaMemcpy/
-- cudaMemset, and their HIP twins on ROCm: hipDeviceSynchronize, ..., hipMemcpyWithStream, the synchronous copy
-- behind .item() and .cpu() there) blocks the CPU until the GPU has drained its queue; the GPU then idles until
-- the host launches new work. Each call is named after the operator that made it (e.g. aten::item,
-- aten::_local_scalar_dense).
-- Cost of a sync: without it the host would have done its next work while the GPU was still busy, so the saving
-- is at most the time the host sat blocked, and at most the GPU idle after its return, or while it sat blocked in a
-- gap that only host-launched work ended (the host, blocked, could not launch it; as when a copy waits on work that
-- does not start): least(blocked time, such idle during the call + idle gap after the return). Gaps between work
-- already queued (gpu.idle's kernel_wait, other) are not the sync's. A sync made while the GPU is busy anyway costs
-- nothing, and idle that the host spends on other work (e.g. loading data) stays charged to that work. Times in ns.
-- include: gpu.idle
-- include: trace.framework

-- One row per blocking sync call: its operator (via the profiler's External id), start, duration (ns),
-- pageable_copy: whether it waits for a copy from pageable host memory, its own (a synchronous cudaMemcpy) or one
-- its operator made (a copy_ from an unpinned tensor: cudaMemcpyAsync, then cudaStreamSynchronize), and
-- value_read: whether it reads a value back to the host (.item(): aten::item/_local_scalar_dense; .tolist(),
-- `if tensor:` (aten::is_nonzero), torch.equal; .cpu() and other copies to the host), which waits for all the GPU
-- work queued before it: a per-step one stalls every step, even where a slow input pipeline hides it today.
-- A copy is the call's own or its operator's through one EXISTS per key (correlation, External id): an OR of the two
-- keys in one EXISTS is joined on the source alone, every sync call against every copy.
CREATE OR REPLACE TEMP TABLE host_sync_calls AS
WITH pageable AS (
    SELECT DISTINCT r.source_id, r.correlation_id, r.external_id, g.host_memory = 'pageable' AS pageable,
           g.copy_kind = 'DtoH' AS to_host
    FROM gpu_work g JOIN cpu_activity r
      ON r.source_id = g.source_id AND r.correlation_id = g.correlation_id AND r.kind IN ('runtime', 'driver')
    WHERE g.kind = 'memcpy' AND (g.host_memory = 'pageable' OR g.copy_kind = 'DtoH')
)
SELECT r.source_id, r.rank, r.name AS call, r.ts_ns, r.dur_ns, r.ts_ns + r.dur_ns AS end_ns,
       (SELECT arg_max(o.name, (o.ts_ns, o.name)) FROM cpu_activity o
        WHERE o.source_id = r.source_id AND o.kind = 'op' AND o.external_id = r.external_id) AS op,
       EXISTS (SELECT 1 FROM pageable p
               WHERE p.source_id = r.source_id AND p.pageable AND p.correlation_id = r.correlation_id)
           OR EXISTS (SELECT 1 FROM pageable p
                      WHERE p.source_id = r.source_id AND p.pageable AND p.external_id = r.external_id) AS pageable_copy,
       EXISTS (SELECT 1 FROM cpu_activity o
               WHERE o.source_id = r.source_id AND o.kind = 'op' AND o.external_id = r.external_id
                 AND o.name IN ('aten::item', 'aten::_local_scalar_dense', 'aten::tolist', 'aten::is_nonzero',
                                'aten::equal'))
           OR EXISTS (SELECT 1 FROM pageable p
                      WHERE p.source_id = r.source_id AND p.to_host AND p.correlation_id = r.correlation_id)
           OR EXISTS (SELECT 1 FROM pageable p
                      WHERE p.source_id = r.source_id AND p.to_host AND p.external_id = r.external_id) AS value_read
FROM cpu_activity r JOIN trace_windows w USING (source_id)
WHERE r.kind IN ('runtime', 'driver')
  AND r.ts_ns >= w.start_ns AND r.ts_ns < w.end_ns
  AND (r.name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize', 'cudaMemcpy',
                  'cudaMemset', 'cuCtxSynchronize', 'cuStreamSynchronize', 'cuEventSynchronize',
                  'hipDeviceSynchronize', 'hipStreamSynchronize', 'hipEventSynchronize', 'hipMemcpy',
                  'hipMemcpyWithStream', 'hipMemset', 'hipCtxSynchronize'));

-- GPU idle charged to syncs, one row per idle gap that a sync blocked the host in or returned in: cost_ns is the
-- summed least(blocked time, idle during the call in a host-wait gap + idle after the return) of those syncs,
-- capped at the gap's length; value_read_cost_ns: the same over the syncs that read a value back (value_read).
-- Gaps and syncs meet through time buckets: each source's window is cut into as many
-- buckets as it has gaps (1,024 to 2^20; the last one holds everything after the window), each gap and sync is
-- listed in the buckets it touches, and a pair that overlaps is joined once, in the first bucket the two share.
-- The work is bounded by the gaps, the syncs and the buckets, where a join on the overlap alone pairs millions of
-- gaps with every sync.
CREATE OR REPLACE TEMP TABLE host_sync_idle AS
WITH grid AS (
    SELECT w.source_id, w.start_ns AS origin, n.buckets,
           greatest((w.end_ns - w.start_ns) // n.buckets, 1) AS bucket_ns
    FROM trace_windows w
    JOIN (SELECT source_id, least(greatest(count(*), 1024), 1048576) AS buckets FROM gpu_idle_gaps GROUP BY ALL) n
        USING (source_id)
    WHERE w.source_id IN (SELECT source_id FROM host_sync_calls)
),
gaps AS (
    SELECT g.*, least((greatest(g.ts_ns, x.origin) - x.origin) // x.bucket_ns, x.buckets) AS first_bucket,
           least((g.end_ns - x.origin) // x.bucket_ns, x.buckets) AS last_bucket
    FROM gpu_idle_gaps g JOIN grid x USING (source_id)
    WHERE g.end_ns >= x.origin
),
syncs AS (
    SELECT s.*, least((greatest(s.ts_ns, x.origin) - x.origin) // x.bucket_ns, x.buckets) AS first_bucket,
           least((s.end_ns - x.origin) // x.bucket_ns, x.buckets) AS last_bucket
    FROM host_sync_calls s JOIN grid x USING (source_id)
),
gap_buckets AS (
    SELECT *, unnest(range(first_bucket, last_bucket + 1)) AS bucket FROM gaps
),
sync_buckets AS (
    SELECT *, unnest(range(first_bucket, last_bucket + 1)) AS bucket FROM syncs
)
SELECT g.source_id, g.rank, g.device, g.ts_ns, g.end_ns, g.dur_ns,
       least(g.dur_ns, sum(least(s.dur_ns,
                                 CASE WHEN g.cause = 'host_wait'
                                      THEN greatest(least(g.end_ns, s.end_ns) - greatest(g.ts_ns, s.ts_ns), 0)
                                      ELSE 0 END
                                 + CASE WHEN s.end_ns BETWEEN g.ts_ns AND g.end_ns THEN g.end_ns - s.end_ns ELSE 0 END
                                 ))) AS cost_ns,
       least(g.dur_ns, coalesce(sum(least(s.dur_ns,
                                 CASE WHEN g.cause = 'host_wait'
                                      THEN greatest(least(g.end_ns, s.end_ns) - greatest(g.ts_ns, s.ts_ns), 0)
                                      ELSE 0 END
                                 + CASE WHEN s.end_ns BETWEEN g.ts_ns AND g.end_ns THEN g.end_ns - s.end_ns ELSE 0 END
                                 )) FILTER (WHERE s.value_read), 0)) AS value_read_cost_ns
FROM gap_buckets g JOIN sync_buckets s
  ON s.source_id = g.source_id AND s.bucket = g.bucket
 AND g.bucket = greatest(g.first_bucket, s.first_bucket)
 AND s.ts_ns <= g.end_ns AND s.end_ns >= g.ts_ns
GROUP BY g.source_id, g.rank, g.device, g.ts_ns, g.end_ns, g.dur_ns;

-- Per rank: sync calls, calls per profiler step, time the host spent blocked (ns), GPU idle charged to them
-- (gpu_idle_ns, ns and % of the window), and the operator that made most of them (on a tie, the one that made
-- the first), pageable_syncs: those that wait for copies from pageable memory (host.memcpy's pageable copies
-- cause them: pinning the memory removes both, rule pageable-memcpy joins host-sync's diagnosis where they are
-- most; pageable_sync_count: the same, NULL for none), value_read_count (syncs that read a value back to the host:
-- .item(), .cpu(), .tolist(); NULL for none), value_reads_among_others (the same where other syncs are there too,
-- which may hide them: NULL where they are all or none of the syncs), value_reads_per_step, value_read_blocked_ns (the host blocked in them),
-- value_read_idle_ns (the GPU idle charged to them), value_read_origin (the operator that made most: aten::item
-- for .item()), and fix_text: the advice, in PyTorch's terms where the trace is of a PyTorch program (trace.framework),
-- else in CUDA's; pinned, asynchronous copies first where most syncs wait for pageable copies.
-- A table, a row per rank: its rule and the report read it.
CREATE OR REPLACE TEMP TABLE host_sync_by_rank AS
SELECT s.source_id, s.rank, count(*) AS sync_count, count(*) FILTER (WHERE s.pageable_copy) AS pageable_syncs,
       nullif(count(*) FILTER (WHERE s.pageable_copy), 0) AS pageable_sync_count,
       count(*) / nullif(any_value(w.step_count), 0) AS syncs_per_step,
       sum(s.dur_ns) AS blocked_ns,
       coalesce(any_value(i.cost_ns), 0) AS gpu_idle_ns,
       100.0 * coalesce(any_value(i.cost_ns), 0) / nullif(any_value(w.wall_ns), 0) AS gpu_idle_pct,
       mode(coalesce(s.op, s.call) ORDER BY s.ts_ns, coalesce(s.op, s.call)) AS top_origin,
       nullif(count(*) FILTER (WHERE s.value_read), 0) AS value_read_count,
       CASE WHEN count(*) FILTER (WHERE s.value_read) BETWEEN 1 AND count(*) - 1
            THEN count(*) FILTER (WHERE s.value_read) END AS value_reads_among_others,
       count(*) FILTER (WHERE s.value_read) / nullif(any_value(w.step_count), 0) AS value_reads_per_step,
       sum(s.dur_ns) FILTER (WHERE s.value_read) AS value_read_blocked_ns,
       CASE WHEN bool_or(s.value_read) THEN coalesce(any_value(i.value_read_cost_ns), 0) END AS value_read_idle_ns,
       mode(CASE WHEN s.op = 'aten::_local_scalar_dense' THEN 'aten::item' ELSE coalesce(s.op, s.call) END
            ORDER BY s.ts_ns) FILTER (WHERE s.value_read) AS value_read_origin,
       any_value(w.wall_ns) AS wall_ns,
       CASE WHEN 2 * count(*) FILTER (WHERE s.pageable_copy) < count(*) THEN ''
            WHEN coalesce(any_value(f.pytorch), true)
            THEN 'Pin the host memory of the copies and make them asynchronous: DataLoader(pin_memory=True), or '
                 || 'tensor.pin_memory() once for buffers reused every step, then .to(device, non_blocking=True); '
                 || 'this removes the syncs the pageable copies make and speeds up the copies (pageable-memcpy). '
            ELSE 'Copy from pinned memory, asynchronously: allocate the host buffers with cudaMallocHost (or '
                 || 'register them with cudaHostRegister) and copy with cudaMemcpyAsync on a stream; this removes '
                 || 'the syncs the pageable copies make and speeds up the copies (pageable-memcpy). '
       END ||
       CASE WHEN coalesce(any_value(f.pytorch), true)
            THEN 'Keep values on the GPU: remove per-step .item(), .cpu(), .tolist(), print() of tensors and '
                 || 'torch.cuda.synchronize(); accumulate metrics on the device and read them every N steps; '
                 || 'replace data-dependent Python branching with tensor ops; use non_blocking copies into pinned '
                 || 'memory with an event when a value is needed.'
            ELSE 'Synchronize only where the host needs a result, and then every N steps rather than every '
                 || 'step: order streams with events (cudaEventRecord + cudaStreamWaitEvent) instead of '
                 || 'cudaStreamSynchronize/cudaDeviceSynchronize, and copy results back with cudaMemcpyAsync into '
                 || 'pinned memory, waiting on an event only when the value is read.'
       END AS fix_text
FROM host_sync_calls s JOIN trace_wall w USING (source_id)
LEFT JOIN trace_framework f USING (source_id)
LEFT JOIN (SELECT source_id, sum(cost_ns) AS cost_ns, sum(value_read_cost_ns) AS value_read_cost_ns
           FROM host_sync_idle GROUP BY source_id) i USING (source_id)  -- the GPU idle charged, per source
GROUP BY s.source_id, s.rank;

-- The report's syncs per rank (host_sync_by_rank; ms). Columns: rank, sync_count, syncs_per_step, blocked_ms
-- (the host blocked), gpu_idle_ms (GPU idle charged to the syncs), top_origin (the operator that made most).
CREATE OR REPLACE TEMP VIEW host_report_syncs AS
SELECT rank, sync_count, syncs_per_step, blocked_ns / 1e6 AS blocked_ms, gpu_idle_ns / 1e6 AS gpu_idle_ms,
       top_origin
FROM host_sync_by_rank;
