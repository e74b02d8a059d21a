-- ranks.alltoall: how evenly the all-to-all exchanges spread data over the ranks (expert-parallel MoE: the
-- dispatch sends each token to its expert's rank, so the rank of a hot expert receives more than the others).
--
-- Sizes are the elements each rank's collective call recorded (collective_calls: 'Out msg nelems' = what it
-- receives, 'In msg nelems' = what it sends), on the all-to-alls matched across ranks by ranks.collectives. Per
-- collective, a rank's receive ratio = its received elements / the mean over the ranks. A collective is skewed
-- when its largest ratio is at least 1.1; the rank with that ratio is its hot rank. Columns per rank:
--   alltoalls              matched all-to-alls with sizes on every rank, count
--   recv_elems/sent_elems  Σ elements received / sent in them, count
--   skewed                 skewed all-to-alls (any hot rank), count
--   hot                    skewed all-to-alls in which this rank received the most, count
--   hot_ratio              median of its receive ratio over those (e.g. 1.5: 50 % more than the mean rank)
--   next_ratio             median of the largest other rank's ratio over those
--   hot_recv_elems         mean elements it received in them; mean_recv_elems: the mean rank's, count
--   steps                  profiler steps with matched all-to-alls, count
--   cost_ns                Σ blocked_exposed_ns at all-to-alls: what its late arrival cost the others, ns
--   cost_step_ns           cost_ns / steps, ns per step (cost_step_ms: in ms); cost_pct: cost_step_ns /
--                          job_step_ns × 100
--   job_step_ns            mean GPU step time over all ranks and the steps with collectives (ranks.steps), ns
--   saving_ns              cost_ns × (hot_ratio − 1) / (hot_ratio − next_ratio), at most cost_ns: the part of
--                          the cost an even split of the data would save, if each rank's work grows with the
--                          data it receives (the hot rank would finish with the mean rank instead of last), ns
--   compute_excess_ns      its compute per step (ranks.steps, mean over steps with collectives) minus the mean
--                          rank's: what an even split of the tokens takes off its critical path per step, ns
-- scope: ranks
-- include: ranks.matched
-- include: ranks.steps

-- One row per matched all-to-all and rank: every column of ranks_collectives plus mean_recv (the mean rank's
-- received elements), recv_ratio (its received elements / mean_recv), skewed (the largest ratio is ≥ 1.1), is_hot
-- (this rank received the most), next_ratio (the largest ratio among the other ranks).
CREATE OR REPLACE TEMP TABLE ranks_alltoall_calls AS
WITH a AS (
    SELECT * FROM ranks_collectives
    WHERE collective ILIKE '%all\_to\_all%' ESCAPE '\' OR collective ILIKE '%alltoall%'
),
sized AS (  -- only the collectives whose sizes every rank recorded
    SELECT channel, instance FROM a GROUP BY channel, instance HAVING count(out_nelems) = count(*)
),
stats AS (
    SELECT a.channel, a.instance, avg(a.out_nelems) AS mean_recv,
           arg_max(a.source_id, (a.out_nelems, -a.rank)) AS hot_source_id, max(a.out_nelems) AS max_recv
    FROM a JOIN sized USING (channel, instance) GROUP BY a.channel, a.instance
)
SELECT a.*, s.mean_recv, a.out_nelems / nullif(s.mean_recv, 0) AS recv_ratio,
       s.max_recv / nullif(s.mean_recv, 0) >= 1.1 AS skewed, a.source_id = s.hot_source_id AS is_hot,
       max(a.out_nelems) FILTER (WHERE a.source_id <> s.hot_source_id)
           OVER (PARTITION BY a.channel, a.instance) / nullif(s.mean_recv, 0) AS next_ratio
FROM a JOIN stats s USING (channel, instance);

-- One row per rank: the columns listed in the header.
CREATE OR REPLACE TEMP VIEW ranks_alltoall_load AS
WITH per_rank AS (
    SELECT source_id, any_value(rank) AS rank, count(*) AS alltoalls, sum(out_nelems) AS recv_elems,
           sum(in_nelems) AS sent_elems,
           count(*) FILTER (WHERE skewed AND is_hot) AS hot,
           median(recv_ratio) FILTER (WHERE skewed AND is_hot) AS hot_ratio,
           median(next_ratio) FILTER (WHERE skewed AND is_hot) AS next_ratio,
           avg(out_nelems) FILTER (WHERE skewed AND is_hot) AS hot_recv_elems,
           avg(mean_recv) FILTER (WHERE skewed AND is_hot) AS mean_recv_elems,
           count(DISTINCT instance_step) AS steps,
           sum(blocked_exposed_ns) FILTER (WHERE instance_step IS NOT NULL) AS cost_ns
    FROM ranks_alltoall_calls GROUP BY source_id
)
SELECT p.*, (SELECT count(DISTINCT (channel, instance)) FROM ranks_alltoall_calls WHERE skewed) AS skewed,
       c.compute_ns - (SELECT avg(compute_ns) FROM ranks_steps WHERE collectives > 0) AS compute_excess_ns,
       p.cost_ns / nullif(p.steps, 0) AS cost_step_ns, p.cost_ns / nullif(p.steps, 0) / 1e6 AS cost_step_ms,
       j.job_step_ns,
       100.0 * p.cost_ns / nullif(p.steps, 0) / nullif(j.job_step_ns, 0) AS cost_pct,
       CASE WHEN p.hot_ratio > p.next_ratio
            THEN least(p.cost_ns, p.cost_ns * (p.hot_ratio - 1) / (p.hot_ratio - p.next_ratio)) END AS saving_ns
FROM per_rank p
LEFT JOIN (SELECT source_id, avg(compute_ns) AS compute_ns FROM ranks_steps WHERE collectives > 0
           GROUP BY source_id) c USING (source_id),
     (SELECT avg(step_ns) AS job_step_ns FROM ranks_steps WHERE collectives > 0) j;
