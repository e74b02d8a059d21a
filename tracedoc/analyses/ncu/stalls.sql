-- ncu.stalls: why warps wait, per kernel and stall reason.
--
-- Source, first found per launch: the WarpStateStats section (full set):
-- smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio, cycles spent in <reason> per issued
-- instruction, as a share of smsp__average_warp_latency_per_inst_issued.ratio (all cycles between two instructions
-- of a warp) — the ratio ncu's CPIStall rule uses; else explicitly collected
-- smsp__average_warp_latency_issue_stalled_<reason>.ratio as a share of their sum; else PC sampling (SourceCounters,
-- detailed set): smsp__pcsamp_warps_issue_stalled_<reason> samples as a share of smsp__pcsamp_sample_count.
-- PC-sampling names are mapped to the WarpStateStats ones (no_instructions → no_instruction,
-- warpgroup_arrive → gmma). Shares in %. Each family is cut by its prefix (starts_with) before its pattern
-- (a regular expression per metric row costs more than the rest of the statement).
-- reads: ncu_kernels
-- scope: job
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
    WHERE starts_with(m.metric, 'smsp__average_warps_issue_stalled_')
      AND regexp_matches(m.metric, '^smsp__average_warps_issue_stalled_[a-z0-9_]+_per_issue_active\.ratio$')
),
latency AS (
    SELECT source_id, launch_id, 'warp_latency' AS source, 2 AS preference, value AS cycles,
           regexp_extract(metric, '^smsp__average_warp_latency_issue_stalled_([a-z0-9_]+)\.ratio$', 1) AS reason,
           100.0 * value / nullif(sum(value) OVER (PARTITION BY source_id, launch_id), 0) AS share_pct
    FROM ncu_metrics
    WHERE starts_with(metric, 'smsp__average_warp_latency_issue_stalled_')
      AND regexp_matches(metric, '^smsp__average_warp_latency_issue_stalled_[a-z0-9_]+\.ratio$')
),
sampled AS (
    SELECT m.source_id, m.launch_id, 'pc_sampling' AS source, 3 AS preference, NULL::DOUBLE AS cycles,
           regexp_extract(m.metric, '^smsp__pcsamp_warps_issue_stalled_([a-z0-9_]+)$', 1) AS reason,
           100.0 * m.value / nullif(t.value, 0) AS share_pct
    FROM ncu_metrics m
    JOIN ncu_metrics t ON t.source_id = m.source_id AND t.launch_id = m.launch_id
                      AND t.metric = 'smsp__pcsamp_sample_count'
    WHERE starts_with(m.metric, 'smsp__pcsamp_warps_issue_stalled_')
      AND regexp_matches(m.metric, '^smsp__pcsamp_warps_issue_stalled_[a-z0-9_]+$')
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
--   stalls_can_limit: stalls explain the kernel's time only when it is latency-bound (no unit at ≥ 60 % of peak,
--   the grid fills a wave: ncu.sol) and the schedulers leave issue slots empty (issue_active < 0.8); in a
--   compute- or memory-bound kernel they are symptoms of the unit that limits it (shown on its primary finding,
--   ncu.primary), in a small grid of too little work;
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
       k.kernel_class, k.busiest_pct, k.busiest_unit, k.busiest_unit_pct, k.headroom, k.issue_active,
       k.eligible_warps, k.active_warps,
       k.warp_cycles_per_issue, k.tensor_pct, k.small_grid,
       j.reason, 'warp-stall-' || replace(j.reason, '_', '-') AS rule_id, j.source, j.share_pct, j.cycles_per_issue,
       j.judged,
       CASE WHEN j.judged THEN row_number() OVER (PARTITION BY k.source_id, k.demangled_name, k.grid, k.block, j.judged
                                                  ORDER BY j.share_pct DESC) END AS reason_rank,
       CASE WHEN k.kernel_class IN ('compute', 'memory')
                THEN 'it is ' || k.kernel_class || '-bound (' || k.busiest_unit || ' at '
                     || ncu_pct_text(k.busiest_unit_pct) || '% of peak): the stalls are symptoms of that limit'
            WHEN k.kernel_class = 'small_grid' THEN 'the grid (' || k.grid_size || ' blocks) does not fill the GPU'
            WHEN k.issue_active >= 0.8 THEN 'the schedulers issue an instruction in '
                                            || ncu_pct_text(100 * k.issue_active) || '% of cycles'
            WHEN k.kernel_class IS NULL THEN 'the speed-of-light metrics are missing'
       END AS not_limiting_reason,
       not_limiting_reason IS NULL AS stalls_can_limit,
       least(j.share_pct / 100.0, 1.0 - coalesce(k.issue_active, 0), k.headroom) AS saving_fraction,
       least(j.share_pct / 100.0, 1.0 - coalesce(k.issue_active, 0), k.headroom) * k.total_ns AS impact_ns
FROM judged j JOIN ncu_kernel_sol k USING (source_id, demangled_name, grid, block);

-- One row per kernel with stall metrics: top_stalls, its top three stall reasons with their share of the cycles
-- between two instructions ('lg_throttle 92%, long_scoreboard 6%, misc 1%'), leaving out reasons below 1 % and
-- selected (issuing) and not_selected (eligible, another warp issued): neither waits on anything.
CREATE OR REPLACE TEMP TABLE ncu_kernel_top_stalls AS
SELECT source_id, demangled_name, grid, block,
       string_agg(reason || ' ' || ncu_pct_text(share_pct) || '%', ', ' ORDER BY share_pct DESC, reason) AS top_stalls
FROM (
    SELECT * FROM ncu_warp_stalls
    WHERE reason NOT IN ('selected', 'not_selected') AND share_pct >= 1
    QUALIFY row_number() OVER (PARTITION BY source_id, demangled_name, grid, block ORDER BY share_pct DESC, reason) <= 3
)
GROUP BY ALL;

-- The report's warp stalls: the 3 largest reasons of each kernel (ncu_warp_stalls). Columns: rank, kernel,
-- demangled, grid, block, reason, share_pct, cycles_per_issue, source, judged; total_ns (the kernel's) orders the
-- rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_warp_stalls AS
SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, reason, share_pct, cycles_per_issue, source,
       judged, total_ns
FROM ncu_warp_stalls
QUALIFY row_number() OVER (PARTITION BY source_id, demangled_name, grid, block ORDER BY share_pct DESC) <= 3;
