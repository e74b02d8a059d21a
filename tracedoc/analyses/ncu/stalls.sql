-- ncu.stalls: why warps wait, per kernel and stall reason.
--
-- Source, first found per launch: the WarpStateStats section (full set):
-- smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio, cycles spent in <reason> per issued
-- instruction, as a share of smsp__average_warp_latency_per_inst_issued.ratio (all cycles between two instructions
-- of a warp) — the ratio ncu's CPIStall rule uses; else explicitly collected
-- smsp__average_warp_latency_issue_stalled_<reason>.ratio as a share of their sum; else PC sampling (SourceCounters,
-- detailed set): smsp__pcsamp_warps_issue_stalled_<reason> samples as a share of smsp__pcsamp_sample_count.
-- PC-sampling names are mapped to the WarpStateStats ones (no_instructions → no_instruction,
-- warpgroup_arrive → gmma). Shares in %.
-- include: ncu.sol

-- One row per launch and stall reason: share_pct (% of the cycles between two instructions), cycles_per_issue
-- (cycles per issued instruction, NULL for PC sampling), source (warp_state | warp_latency | pc_sampling).
CREATE OR REPLACE TEMP TABLE ncu_launch_stalls AS
WITH ratio AS (
    SELECT m.source_id, m.launch_id, 'warp_state' AS source, 1 AS preference, m.value AS cycles,
           regexp_extract(m.metric, '^smsp__average_warps_issue_stalled_([a-z0-9_]+)_per_issue_active\.ratio$', 1)
               AS reason,
           100.0 * m.value / nullif(t.value, 0) AS share_pct
    FROM ncu_metrics m
    JOIN ncu_metrics t ON t.source_id = m.source_id AND t.launch_id = m.launch_id
                      AND t.metric = 'smsp__average_warp_latency_per_inst_issued.ratio'
    WHERE regexp_matches(m.metric, '^smsp__average_warps_issue_stalled_[a-z0-9_]+_per_issue_active\.ratio$')
),
latency AS (
    SELECT source_id, launch_id, 'warp_latency' AS source, 2 AS preference, value AS cycles,
           regexp_extract(metric, '^smsp__average_warp_latency_issue_stalled_([a-z0-9_]+)\.ratio$', 1) AS reason,
           100.0 * value / nullif(sum(value) OVER (PARTITION BY source_id, launch_id), 0) AS share_pct
    FROM ncu_metrics
    WHERE regexp_matches(metric, '^smsp__average_warp_latency_issue_stalled_[a-z0-9_]+\.ratio$')
),
sampled AS (
    SELECT m.source_id, m.launch_id, 'pc_sampling' AS source, 3 AS preference, NULL::DOUBLE AS cycles,
           regexp_extract(m.metric, '^smsp__pcsamp_warps_issue_stalled_([a-z0-9_]+)$', 1) AS reason,
           100.0 * m.value / nullif(t.value, 0) AS share_pct
    FROM ncu_metrics m
    JOIN ncu_metrics t ON t.source_id = m.source_id AND t.launch_id = m.launch_id
                      AND t.metric = 'smsp__pcsamp_sample_count'
    WHERE regexp_matches(m.metric, '^smsp__pcsamp_warps_issue_stalled_[a-z0-9_]+$')
      AND m.metric NOT LIKE '%\_not\_issued' ESCAPE '\'
),
every AS (
    SELECT source_id, launch_id, source, preference, cycles, share_pct,
           CASE reason WHEN 'no_instructions' THEN 'no_instruction' WHEN 'warpgroup_arrive' THEN 'gmma'
                       ELSE reason END AS reason
    FROM (SELECT * FROM ratio UNION ALL SELECT * FROM latency UNION ALL SELECT * FROM sampled)
    WHERE share_pct IS NOT NULL
)
SELECT source_id, launch_id, source, reason, cycles AS cycles_per_issue, share_pct
FROM every
QUALIFY preference = min(preference) OVER (PARTITION BY source_id, launch_id);

-- One row per kernel and stall reason, with the kernel's speed-of-light columns. Columns:
--   reason, rule_id ('warp-stall-<reason>'), share_pct / cycles_per_issue (duration-weighted over launches),
--   source, reason_rank (1 = the largest share among the reasons tracedoc judges), judged (false for reasons
--   that are not a problem in themselves: selected, not_selected, misc, gmma — waiting on warpgroup MMA results,
--   which a tensor-bound kernel does by design);
--   stalls_can_limit: stalls explain the kernel's time only when no unit is near its peak (busiest_pct < 80), the
--   schedulers leave issue slots empty (issue_active < 0.8), the tensor pipe is not busy (< 60 %) and the grid
--   fills the GPU; otherwise they are the symptom of a saturated unit or of too little work;
--   not_limiting_reason: why not, in words (NULL when stalls can limit);
--   saving_fraction: min(share, 1 − issue_active, headroom), the part of the duration removing this stall could save
--   (ncu's CPIStall estimate, capped the same way); impact_ns: saving_fraction × total_ns.
CREATE OR REPLACE TEMP TABLE ncu_warp_stalls AS
WITH per_kernel AS (
    SELECT l.source_id, l.demangled_name, l.grid, l.block, s.reason, any_value(s.source) AS source,
           sum(s.share_pct * l.duration_ns) / nullif(sum(l.duration_ns), 0) AS share_pct,
           sum(s.cycles_per_issue * l.duration_ns) / nullif(sum(l.duration_ns), 0) AS cycles_per_issue
    FROM ncu_launch_stalls s JOIN ncu_launch_metrics l USING (source_id, launch_id)
    GROUP BY ALL
),
judged AS (
    SELECT *, reason NOT IN ('selected', 'not_selected', 'misc', 'gmma') AS judged FROM per_kernel
)
SELECT k.source_id, k.rank, k.name, k.demangled_name, k.grid, k.block, k.launches, k.total_ns, k.launch_ids,
       k.kernel_class, k.busiest_pct, k.busiest_unit, k.headroom, k.issue_active, k.eligible_warps, k.active_warps,
       k.warp_cycles_per_issue, k.tensor_pct, k.small_grid,
       j.reason, 'warp-stall-' || replace(j.reason, '_', '-') AS rule_id, j.source, j.share_pct, j.cycles_per_issue,
       j.judged,
       CASE WHEN j.judged THEN row_number() OVER (PARTITION BY k.source_id, k.demangled_name, k.grid, k.block, j.judged
                                                  ORDER BY j.share_pct DESC) END AS reason_rank,
       CASE WHEN k.busiest_pct >= 80 THEN k.busiest_unit || ' is at ' || round(k.busiest_unit_pct)::INTEGER || '% of peak'
            WHEN coalesce(k.tensor_pct, 0) >= 60 THEN 'the tensor pipe is at ' || round(k.tensor_pct)::INTEGER || '% of peak'
            WHEN k.issue_active >= 0.8 THEN 'the schedulers issue an instruction in ' || round(100 * k.issue_active)::INTEGER
                                            || '% of cycles'
            WHEN k.small_grid THEN 'the grid (' || k.grid_size::BIGINT || ' blocks) does not fill the GPU'
       END AS not_limiting_reason,
       not_limiting_reason IS NULL AS stalls_can_limit,
       least(j.share_pct / 100.0, 1.0 - coalesce(k.issue_active, 0), k.headroom) AS saving_fraction,
       least(j.share_pct / 100.0, 1.0 - coalesce(k.issue_active, 0), k.headroom) * k.total_ns AS impact_ns
FROM judged j JOIN ncu_kernel_sol k USING (source_id, demangled_name, grid, block);
