-- comm.exposed: the communication no compute hides (comm.overlap), per device with communication: its share of the
-- window, how much of it waits for later ranks (ranks.collectives), what hiding it would cost in SMs, the kind of
-- collective that takes most of it and the advice for that kind (the low-comm-overlap rule's view). It applies only
-- where the store holds communication kernels: elsewhere no device has a row. Times in ns.
-- reads: communication_kernels
-- include: comm.overlap
-- include: ranks.matched
-- include: trace.framework

-- Per device with communication: comm_overlap_by_device's columns, and wall_ns, exposed communication as % of the
-- window, peer_wait_ns (the exposed time spent waiting in collectives for later ranks; NULL when no peer's trace is
-- there to line the collectives up with, as for one rank of a larger job: unknown, not 0; peers_unknown says so in
-- a clause) and
-- hideable_comm_ns = exposed_comm_ns − peer_wait_ns, the exposed communication that overlapping with compute could
-- hide (also as % of the window).
-- Hiding it is not free: while a communication kernel runs it holds SMs (NCCL runs one thread block per channel,
-- each on an SM of its own), so compute overlapped with it runs on the rest. comm_sm_share is the share of the
-- device's SMs the communication kernels hold (their thread blocks over the SM count, weighted by their time; 0
-- when the trace does not give the SM count). comm_kind: the kind of collective that takes most of the
-- communication time (all_to_all, all_gather/reduce_scatter, all_reduce, send_recv, other), from the profiler's
-- collective name, else the NCCL kernel's name; comm_per_step: communication kernels per step (NULL without
-- steps); median_comm_ns: their median length; fix_text: the advice for that kind, in the APIs the trace shows
-- (trace.framework), led by coalescing when a step runs many short collectives (64 or more, under 100 µs median).
CREATE OR REPLACE TEMP VIEW comm_exposed_by_device AS
WITH kind_time AS (
    SELECT source_id, device,
           CASE WHEN lower(coalesce(collective, '')) LIKE '%all_to_all%' OR lower(name) LIKE '%alltoall%'
                     THEN 'all_to_all'
                WHEN lower(coalesce(collective, '')) SIMILAR TO '.*(allgather|all_gather|reduce_scatter).*'
                     OR name SIMILAR TO '.*(AllGather|ReduceScatter).*' THEN 'all_gather/reduce_scatter'
                WHEN lower(coalesce(collective, '')) LIKE '%allreduce%'
                     OR lower(coalesce(collective, '')) LIKE '%all_reduce%' OR name LIKE '%AllReduce%'
                     THEN 'all_reduce'
                WHEN name LIKE '%SendRecv%' OR lower(coalesce(collective, '')) LIKE '%send%' THEN 'send_recv'
                ELSE 'other' END AS comm_kind,
           sum(dur_ns) AS ns
    FROM gpu_work WHERE kind = 'kernel' AND category = 'communication'
    GROUP BY ALL
),
kinds AS (
    SELECT k.source_id, k.device, k.comm_kind, n.count / nullif(w.step_count, 0) AS comm_per_step, n.median_comm_ns
    FROM (SELECT source_id, device, arg_max(comm_kind, (ns, comm_kind)) AS comm_kind FROM kind_time
          GROUP BY source_id, device) k
    JOIN (SELECT source_id, device, count(*) AS count, median(dur_ns) AS median_comm_ns FROM gpu_work
          WHERE kind = 'kernel' AND category = 'communication' GROUP BY source_id, device) n USING (source_id, device)
    JOIN trace_wall w USING (source_id)
),
sm AS (
    SELECT a.source_id, a.device,
           sum(a.dur_ns * least(list_product(TRY_CAST(string_split(a.grid, ',') AS BIGINT[])), d.sm_count)
               / d.sm_count) / nullif(sum(a.dur_ns), 0) AS comm_sm_share
    FROM gpu_work a JOIN devices d ON d.source_id = a.source_id AND d.device = a.device
    WHERE a.kind = 'kernel' AND a.category = 'communication' AND d.sm_count > 0
    GROUP BY a.source_id, a.device
)
SELECT o.*, w.wall_ns, 100.0 * o.exposed_comm_ns / nullif(w.wall_ns, 0) AS exposed_comm_pct,
       100.0 * o.comm_ns / nullif(w.wall_ns, 0) AS comm_pct,
       p.peer_wait_ns,
       CASE WHEN p.peer_wait_ns IS NULL
            THEN ' (how much of it waits for other ranks is unknown: no peer''s trace is here to line the '
                 || 'collectives up with)' END AS peers_unknown,
       greatest(o.exposed_comm_ns - coalesce(p.peer_wait_ns, 0), 0) AS hideable_comm_ns,
       100.0 * greatest(o.exposed_comm_ns - coalesce(p.peer_wait_ns, 0), 0) / nullif(w.wall_ns, 0)
           AS hideable_comm_pct,
       coalesce(sm.comm_sm_share, 0) AS comm_sm_share,
       k.comm_kind, k.comm_per_step, k.median_comm_ns,
       CASE WHEN k.comm_per_step >= 64 AND k.median_comm_ns < 100000
            THEN 'Send fewer, larger messages: ' || round(k.comm_per_step)::BIGINT || ' collectives a step of '
                 || round(k.median_comm_ns / 1e3)::BIGINT || ' µs each (median) pay a launch and a handshake '
                 || 'each; coalesce them ('
                 || CASE WHEN f.ddp THEN 'a larger DDP bucket_cap_mb, '
                         WHEN f.fsdp THEN 'larger FSDP units (wrap whole blocks), '
                         ELSE '' END
                 || CASE WHEN f.pytorch THEN 'torch.distributed''s coalescing of many tensors into one call, '
                         ELSE '' END
                 || 'or flatten the tensors into one buffer per collective). '
            ELSE '' END
       || CASE k.comm_kind
           WHEN 'all_to_all' THEN 'Overlap the expert-parallel all-to-alls with compute: split each batch into '
               || 'micro-batches and pipeline dispatch, expert compute and combine (the all-to-all of one while '
               || 'the experts of another run), overlap shared-expert or dense work with the dispatch, and keep '
               || 'the all-to-alls on their own stream; avoid a host sync on the split sizes before each one.'
           WHEN 'all_gather/reduce_scatter' THEN
               CASE WHEN f.fsdp THEN 'Let FSDP prefetch: gather the next layer''s parameters while this one '
                        || 'computes (forward_prefetch / backward_prefetch, or FSDP2''s prefetching of the next '
                        || 'modules), and keep reshard_after_forward so the gathers stay small.'
                    ELSE 'Prefetch: start the all-gather of the next layer''s parameters while this one computes, '
                        || 'and reduce-scatter each layer''s gradients as soon as backward produces them, on a '
                        || 'communication stream of their own.' END
           WHEN 'all_reduce' THEN
               CASE WHEN f.ddp THEN 'Overlap gradient all-reduce with backward: let DDP all-reduce buckets as '
                        || 'gradients become ready (avoid no_sync() followed by one big all-reduce; tune '
                        || 'bucket_cap_mb), and keep communication on its own stream.'
                    ELSE 'Overlap the all-reduces with compute: start each one as soon as its data is ready (for '
                        || 'gradients, in buckets during backward rather than in one call after it) and compute '
                        || 'while it runs, on a communication stream of its own.' END
           ELSE 'Issue the transfers early on their own stream and compute while they run (for pipeline '
               || 'stages: more micro-batches, interleaved schedules).'
       END AS fix_text
FROM comm_overlap_by_device o JOIN trace_wall w USING (source_id)
LEFT JOIN sm USING (source_id, device)
LEFT JOIN kinds k USING (source_id, device)
LEFT JOIN trace_framework f USING (source_id)
LEFT JOIN (SELECT source_id, device, sum(exposed_wait_ns) AS peer_wait_ns FROM ranks_collectives
           GROUP BY source_id, device) p USING (source_id, device)
WHERE o.comm_ns > 0;
