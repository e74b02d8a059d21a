-- ranks.stragglers: per rank, how often and how much it held the others up, beside what could explain it.
--
-- Over the profiler steps that hold matched collectives (ranks.steps), per rank:
--   steps            such steps, count
--   late_steps       steps in which this rank cost the others the most (largest blocked_exposed_ns > 0), count
--   cost_ns          Σ blocked_exposed_ns: the exposed wait it caused the others, mean over them, ns
--   cost_step_ns     cost_ns / steps, ns per step; cost_pct: cost_step_ns / job_step_ns × 100
--   job_step_ns      mean GPU step time over all ranks and those steps, ns
--   cost_step_ms, job_step_ms, lateness_ms: the same in ms, for messages
--   step_costs       its cost in each step, ms, as text ('7.02, 6.44, 5.71'; the first 8 steps)
--   step_ns, compute_ns, kernels, grid_blocks, host_gap_ns, comm_wait_ns, exposed_wait_ns, lateness_ns:
--                    its mean per step (ranks.steps)
--   peer_*           the median over the other ranks of their mean per step of the same column
--   compute_excess_ns, host_gap_excess_ns (ns per step), kernel_excess (count per step),
--   kernel_excess_pct, grid_excess_pct (%): its value against its peers'
--   sm_clock_mhz, peer_sm_clock_mhz, clock_deficit_pct: mean SM clock of its GPU while busy and its peers'
--                    median, from NVML telemetry recorded beside the traces (health.telemetry; NULL without)
--   alltoall_ratio   when it is the hot rank of the skewed all-to-alls (at least 2 of them, and 2/3 of all
--                    skewed ones): the median share it received against the mean rank (ranks.alltoall); else NULL
--   cause            the likely cause, from the evidence: the larger of its compute excess and host-gap excess
--                    names it when it covers at least half of cost_step_ns ('host_gaps' or, for compute, in this
--                    order: 'more_kernels' (≥ 5 % more kernels), 'alltoall_data', 'larger_inputs' (≥ 5 % more
--                    thread blocks), 'lower_clocks' (≥ 3 % lower SM clock), 'longer_kernels'); else 'unexplained'
--   cause_text       the same in words, with its numbers
--   kernel_diff_text the compute kernel whose time per step exceeds its peers' the most ('rank 1 runs
--                    sm80_xmma_gemm_f32… 29 times a step where its peers run it 0 times: 6.9 ms more'), NULL when
--                    none exceeds them by 0.1 ms or the cause is not its compute; where the traces recorded input
--                    shapes (record_shapes=True) and the operator that launches that kernel takes other shapes on
--                    this rank than on its peers, it says so ('aten::mm takes [[16384,4096],[4096,4096]] here,
--                    [[8192,4096],[4096,4096]] on its peers')
-- scope: ranks
-- include: ranks.steps
-- include: ranks.alltoall
-- include: health.telemetry
-- include: trace.framework

-- One row per rank with matched collectives: the columns listed in the header, but cost_pct and cause.
CREATE OR REPLACE TEMP TABLE ranks_rank_summary AS
WITH s AS (SELECT * FROM ranks_steps WHERE collectives > 0),
top AS (
    SELECT step, arg_max(source_id, (blocked_exposed_ns, -rank)) AS top_source_id,
           max(blocked_exposed_ns) AS top_ns, avg(step_ns) AS step_ns
    FROM s GROUP BY step
),
m AS (
    SELECT s.source_id, any_value(s.rank) AS rank, count(*) AS steps,
           count(*) FILTER (WHERE t.top_source_id = s.source_id AND t.top_ns > 0) AS late_steps,
           sum(s.blocked_exposed_ns) AS cost_ns, avg(s.blocked_exposed_ns) AS cost_step_ns,
           array_to_string(list(printf('%.2f', s.blocked_exposed_ns / 1e6) ORDER BY s.step)[1:8], ', ')
               || CASE WHEN count(*) > 8 THEN ', …' ELSE '' END AS step_costs,
           avg(s.step_ns) AS step_ns, avg(s.compute_ns) AS compute_ns, avg(s.kernels) AS kernels,
           avg(s.grid_blocks) AS grid_blocks, avg(s.host_gap_ns) AS host_gap_ns,
           avg(s.comm_wait_ns) AS comm_wait_ns, avg(s.exposed_wait_ns) AS exposed_wait_ns,
           avg(s.lateness_ns) AS lateness_ns
    FROM s JOIN top t USING (step) GROUP BY s.source_id
),
peers AS (
    SELECT a.source_id, median(b.step_ns) AS peer_step_ns, median(b.compute_ns) AS peer_compute_ns,
           median(b.kernels) AS peer_kernels, median(b.grid_blocks) AS peer_grid_blocks,
           median(b.host_gap_ns) AS peer_host_gap_ns
    FROM m a JOIN m b ON b.source_id <> a.source_id GROUP BY a.source_id
),
clocks AS (
    SELECT rank, avg(sm_clock_mean_mhz) AS sm_clock_mhz
    FROM health_telemetry_by_device WHERE rank IS NOT NULL GROUP BY rank
),
peer_clocks AS (
    SELECT a.rank, median(b.sm_clock_mhz) AS peer_sm_clock_mhz
    FROM clocks a JOIN clocks b ON b.rank <> a.rank GROUP BY a.rank
)
SELECT m.*, (SELECT avg(step_ns) FROM top) AS job_step_ns, p.* EXCLUDE (source_id),
       m.compute_ns - p.peer_compute_ns AS compute_excess_ns,
       m.host_gap_ns - p.peer_host_gap_ns AS host_gap_excess_ns,
       m.kernels - p.peer_kernels AS kernel_excess,
       100.0 * (m.kernels - p.peer_kernels) / nullif(p.peer_kernels, 0) AS kernel_excess_pct,
       100.0 * (m.grid_blocks - p.peer_grid_blocks) / nullif(p.peer_grid_blocks, 0) AS grid_excess_pct,
       c.sm_clock_mhz, pc.peer_sm_clock_mhz,
       100.0 * (1 - c.sm_clock_mhz / nullif(pc.peer_sm_clock_mhz, 0)) AS clock_deficit_pct,
       CASE WHEN l.hot >= 2 AND l.hot >= 2.0 / 3 * l.skewed THEN l.hot_ratio END AS alltoall_ratio
FROM m
JOIN peers p USING (source_id)
LEFT JOIN clocks c ON c.rank = m.rank
LEFT JOIN peer_clocks pc ON pc.rank = m.rank
LEFT JOIN ranks_alltoall_load l ON l.source_id = m.source_id;

-- Per rank and compute kernel (by name): launches, time and thread blocks per step over the steps with
-- collectives, against the median over the other ranks (0 where a rank never runs it); the kernel with the
-- largest excess time.
CREATE OR REPLACE TEMP TABLE ranks_kernel_excess AS
WITH steps_with AS (SELECT source_id, step FROM ranks_steps WHERE collectives > 0),
per AS (
    SELECT w.source_id, w.name,
           sum(w.launches) / (SELECT count(*) FROM steps_with x WHERE x.source_id = w.source_id) AS launches,
           sum(w.ns) / (SELECT count(*) FROM steps_with x WHERE x.source_id = w.source_id) AS ns,
           sum(w.blocks) / (SELECT count(*) FROM steps_with x WHERE x.source_id = w.source_id) AS blocks
    FROM ranks_step_kernels w JOIN steps_with USING (source_id, step)
    GROUP BY w.source_id, w.name
),
ranks AS (SELECT DISTINCT source_id FROM steps_with),
grid AS (SELECT r.source_id, n.name FROM ranks r, (SELECT DISTINCT name FROM per) n),
full_ AS (
    SELECT g.source_id, g.name, coalesce(p.launches, 0) AS launches, coalesce(p.ns, 0) AS ns,
           coalesce(p.blocks, 0) AS blocks
    FROM grid g LEFT JOIN per p USING (source_id, name)
),
cmp AS (
    SELECT a.source_id, a.name, a.launches, a.ns, a.blocks, median(b.launches) AS peer_launches,
           median(b.ns) AS peer_ns, median(b.blocks) AS peer_blocks
    FROM full_ a JOIN full_ b ON b.name = a.name AND b.source_id <> a.source_id
    GROUP BY a.source_id, a.name, a.launches, a.ns, a.blocks
)
SELECT source_id, top.name, top.launches, top.peer_launches, top.blocks, top.peer_blocks, excess_ns
FROM (
    SELECT source_id, arg_max({'name': name, 'launches': launches, 'peer_launches': peer_launches,
                               'blocks': blocks, 'peer_blocks': peer_blocks},
                              (ns - peer_ns, name)) AS top, max(ns - peer_ns) AS excess_ns
    FROM cmp GROUP BY source_id
);

-- The operator behind each rank's kernel of largest excess, with the input shapes it takes most often, on this
-- rank and on its peers (the shapes most of the peers' launches of that kernel come with): one row per rank whose
-- trace recorded shapes (op_shapes) for that kernel's launches. A kernel launch names its operator through its
-- runtime call's External id.
CREATE OR REPLACE TEMP TABLE ranks_kernel_shapes AS
WITH launched AS (
    SELECT g.source_id, g.name AS kernel, o.name AS op, o.input_dims
    FROM gpu_work g
    JOIN cpu_activity r ON r.source_id = g.source_id AND r.correlation_id = g.correlation_id
                       AND r.kind IN ('runtime', 'driver')
    JOIN op_shapes o ON o.source_id = r.source_id AND o.external_id = r.external_id
    WHERE g.kind = 'kernel' AND g.name IN (SELECT name FROM ranks_kernel_excess)
),
per AS (
    SELECT source_id, kernel, arg_max({'op': op, 'dims': input_dims}, (n, op, input_dims)) AS top
    FROM (SELECT source_id, kernel, op, input_dims, count(*) AS n FROM launched GROUP BY ALL)
    GROUP BY source_id, kernel
)
SELECT k.source_id, p.top.op AS op, p.top.dims AS input_dims,
       (SELECT arg_max(b.input_dims, (b.n, b.input_dims))
        FROM (SELECT input_dims, count(*) AS n FROM launched l
              WHERE l.kernel = k.name AND l.source_id <> k.source_id AND l.op = p.top.op GROUP BY input_dims) b)
           AS peer_input_dims
FROM ranks_kernel_excess k JOIN per p ON p.source_id = k.source_id AND p.kernel = k.name;

-- ranks_rank_summary plus cost_pct, cost_step_ms, job_step_ms, lateness_ms, cause, cause_text,
-- kernel_diff_text and fix_text (the advice for that cause).
CREATE OR REPLACE TEMP VIEW ranks_stragglers AS
WITH r AS (
    SELECT *, 100.0 * cost_step_ns / nullif(job_step_ns, 0) AS cost_pct, cost_step_ns / 1e6 AS cost_step_ms,
           job_step_ns / 1e6 AS job_step_ms, lateness_ns / 1e6 AS lateness_ms,
           CASE WHEN greatest(coalesce(host_gap_excess_ns, 0), coalesce(compute_excess_ns, 0)) < 0.5 * cost_step_ns
                     OR cost_step_ns = 0 THEN 'unexplained'
                WHEN host_gap_excess_ns >= compute_excess_ns THEN 'host_gaps'
                WHEN kernel_excess_pct >= 5 THEN 'more_kernels'
                WHEN alltoall_ratio IS NOT NULL THEN 'alltoall_data'
                WHEN grid_excess_pct >= 5 THEN 'larger_inputs'
                WHEN clock_deficit_pct >= 3 THEN 'lower_clocks'
                ELSE 'longer_kernels' END AS cause
    FROM ranks_rank_summary
)
SELECT *,
       CASE cause
           WHEN 'host_gaps' THEN printf('host-side gaps before its kernels: its GPU sat idle waiting for the host '
               || 'to launch work for %.2f ms per step, %.2f ms more than its peers', host_gap_ns / 1e6,
               host_gap_excess_ns / 1e6)
           WHEN 'more_kernels' THEN printf('more GPU work: it runs %.0f compute kernels per step against its '
               || 'peers'' %.0f, %.2f ms more compute per step', kernels, peer_kernels, compute_excess_ns / 1e6)
           WHEN 'alltoall_data' THEN printf('larger inputs: it receives %.2fx the mean rank''s data in the skewed '
               || 'all-to-alls (expert imbalance) and computes %.2f ms more per step than its peers',
               alltoall_ratio, compute_excess_ns / 1e6)
           WHEN 'larger_inputs' THEN printf('larger inputs: its kernels run over %.0f%% more thread blocks than '
               || 'its peers'' and take %.2f ms more per step', grid_excess_pct, compute_excess_ns / 1e6)
           WHEN 'lower_clocks' THEN printf('lower clocks: its GPU ran at %.0f MHz against its peers'' %.0f MHz '
               || '(telemetry) and computes %.2f ms more per step', sm_clock_mhz, peer_sm_clock_mhz,
               compute_excess_ns / 1e6)
           WHEN 'longer_kernels' THEN printf('longer kernels: the same number of kernels over the same grids take '
               || '%.2f ms more per step than on its peers (a slower GPU, or data-dependent work)',
               compute_excess_ns / 1e6)
           ELSE printf('not its own work: its extra compute (%.2f ms per step) and host gaps (%.2f ms) do not '
               || 'account for the wait; look at its communication path (network, NIC, PCIe) and at work outside '
               || 'the profiled process', coalesce(compute_excess_ns, 0) / 1e6, coalesce(host_gap_excess_ns, 0) / 1e6)
       END AS cause_text,
       CASE WHEN k.excess_ns < 1e5 OR r.cause IN ('host_gaps', 'unexplained') THEN NULL
            WHEN abs(k.launches - k.peer_launches) >= 0.5
                THEN printf('it runs %s %.0f times a step where its peers run it %.0f times: %.2f ms more per step',
                            k.name, k.launches, k.peer_launches, k.excess_ns / 1e6)
            WHEN k.peer_blocks > 0 AND k.blocks >= 1.05 * k.peer_blocks
                THEN printf('it runs %s as often as its peers (%.0f times a step), over %.1fx their thread blocks: '
                            || 'the same kernel on larger inputs, %.2f ms more per step', k.name, k.launches,
                            k.blocks / k.peer_blocks, k.excess_ns / 1e6)
            ELSE printf('it runs %s as often as its peers (%.0f times a step), on as many thread blocks, and each '
                        || 'run takes longer: %.2f ms more per step', k.name, k.launches, k.excess_ns / 1e6)
       END || CASE WHEN k.excess_ns >= 1e5 AND r.cause NOT IN ('host_gaps', 'unexplained')
                        AND s.peer_input_dims IS NOT NULL AND s.input_dims <> s.peer_input_dims
                   THEN printf('; its operator %s takes inputs of shape %s here, %s on its peers', s.op,
                               s.input_dims, s.peer_input_dims)
                   ELSE '' END AS kernel_diff_text,
       'Make rank ' || r.rank || ' do the same work as its peers at the same speed: '
       || CASE cause
           WHEN 'host_gaps' THEN 'its CPU launches late; find what that process does between launches (data '
               || 'loading, CPU contention, Python overhead) and take it off the critical path ('
               || CASE WHEN coalesce(f.pytorch, true) THEN 'more DataLoader workers, ' ELSE '' END
               || 'pinned CPU affinity, CUDA graphs).'
           WHEN 'more_kernels' THEN 'find the work only it does (compare its top kernels with a peer''s; '
               || 'rank-conditional code, extra logging, metrics or checkpoint work on one rank) and spread or '
               || 'remove it.'
           WHEN 'larger_inputs' THEN 'balance the data across ranks (sort or bucket samples by length, pack '
               || 'sequences to a fixed token budget per rank).'
           WHEN 'alltoall_data' THEN 'balance the tokens across the experts (a load-balancing loss, a capacity '
               || 'factor, expert placement).'
           WHEN 'lower_clocks' THEN 'check that GPU''s cooling and power limit (tracedoc health).'
           WHEN 'longer_kernels' THEN 'compare its GPU with its peers'' (tracedoc health: clocks, temperature, '
               || 'errors) and look for data-dependent work on that rank (sparsity, dynamic shapes).'
           ELSE 'look at its network path (NIC, PCIe, switches) and at other processes on its host.'
       END AS fix_text
FROM r LEFT JOIN ranks_kernel_excess k USING (source_id)
LEFT JOIN ranks_kernel_shapes s USING (source_id)
LEFT JOIN trace_framework f USING (source_id);
