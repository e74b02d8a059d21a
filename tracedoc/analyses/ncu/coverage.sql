-- ncu.coverage: what each Nsight Compute input lets tracedoc judge.
--
-- ncu collects metrics by section, and sections by set: basic (the default: SpeedOfLight, LaunchStats, Occupancy),
-- detailed (adds ComputeWorkloadAnalysis, MemoryWorkloadAnalysis, SourceCounters, the roofline counters) and full
-- (adds the memory tables, SchedulerStats, WarpStateStats, ...). A section counts as collected for an input when
-- one of its signature metrics has a value for at least one launch; a judgement needs its metric on some launch.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.launches

-- Sections tracedoc reads, with the set that first contains each and a metric only that section collects.
CREATE OR REPLACE TEMP TABLE ncu_sections AS
SELECT * FROM (VALUES
    ('SpeedOfLight', 'basic', 'sm__throughput.avg.pct_of_peak_sustained_elapsed'),
    ('LaunchStats', 'basic', 'launch__waves_per_multiprocessor'),
    ('Occupancy', 'basic', 'sm__maximum_warps_per_active_cycle_pct'),
    ('ComputeWorkloadAnalysis', 'detailed', 'sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active'),
    ('MemoryWorkloadAnalysis', 'detailed', 'lts__t_sector_hit_rate.pct'),
    ('SourceCounters', 'detailed', 'smsp__pcsamp_sample_count'),
    ('SpeedOfLight_RooflineChart', 'detailed', 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed'),
    ('MemoryWorkloadAnalysis_Tables', 'full', 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum'),
    ('SchedulerStats', 'full', 'smsp__issue_active.avg.per_cycle_active'),
    ('WarpStateStats', 'full', 'smsp__average_warp_latency_per_inst_issued.ratio')
) AS t(section, set_name, signature_metric);

-- What each judgement needs: the rules it feeds, a metric pattern (LIKE) that must have a value, and the
-- sections that provide it.
CREATE OR REPLACE TEMP TABLE ncu_judgements AS
SELECT * FROM (VALUES
    ('speed of light', 'memory-bound, compute-bound, latency-bound', 'gpu\_\_compute\_memory\_throughput.avg.pct%',
     'SpeedOfLight'),
    ('launch configuration', 'small-grid, tail-effect', 'launch\_\_waves\_per\_multiprocessor', 'LaunchStats'),
    ('occupancy', 'low-occupancy', 'sm\_\_warps\_active.avg.pct\_of\_peak\_sustained\_active', 'Occupancy'),
    ('tensor-pipe use', 'no-tensor-cores', 'sm\_\_pipe\_tensor%cycles\_active%', 'ComputeWorkloadAnalysis'),
    ('warp stalls', 'warp-stall-*', 'smsp\_\_%warp%issue\_stalled\_%', 'WarpStateStats or SourceCounters'),
    ('register spills', 'register-spill', 'l1tex\_\_t\_sectors\_pipe\_lsu\_mem\_local\_op\_ld.sum',
     'MemoryWorkloadAnalysis_Tables'),
    ('shared-memory bank conflicts', 'shared-bank-conflicts',
     'l1tex\_\_data\_bank\_conflicts\_pipe\_lsu\_mem\_shared\_op\_ld.sum', 'MemoryWorkloadAnalysis_Tables'),
    ('global-access coalescing', 'uncoalesced-access', 'memory\_l2\_theoretical\_sectors\_global', 'SourceCounters'),
    ('roofline FLOPs', 'ncu_roofline metrics', 'smsp\_\_sass\_thread\_inst\_executed\_op\_ffma\_pred\_on.sum%',
     'SpeedOfLight_RooflineChart')
) AS t(judgement, rules, metric_pattern, sections);

-- One row per kernel-profile input (a format of kind 'kernel profile' in input_formats: ncu). Columns: source_id, rank,
-- path, launches (profiled), unmeasured_launches (launches ncu recorded without a duration: profiling failed or was cut
-- short; nothing is judged for them), unmeasured_kernels (their names), collected_set (the largest built-in set whose
-- sections are all present: full | detailed | basic | partial), sections (the sections present), not_judged (judgements
-- impossible for lack of metrics, with the sections that would provide them), not_judged_count, collect_hint (the ncu
-- option that collects them).
CREATE OR REPLACE TEMP VIEW ncu_coverage AS
WITH profiles AS (
    SELECT s.* FROM sources s JOIN input_formats f ON f.format = s.format AND f.kind = 'kernel profile'
),
present AS (
    SELECT DISTINCT source_id, metric FROM ncu_metrics WHERE value IS NOT NULL
),
sections AS (
    SELECT s.source_id, x.section, x.set_name
    FROM profiles s JOIN ncu_sections x ON EXISTS (
        SELECT 1 FROM present p WHERE p.source_id = s.source_id AND p.metric = x.signature_metric)
),
missing AS (
    SELECT s.source_id, j.judgement, j.sections
    FROM profiles s CROSS JOIN ncu_judgements j
    WHERE NOT EXISTS (
        SELECT 1 FROM present p WHERE p.source_id = s.source_id AND p.metric LIKE j.metric_pattern ESCAPE '\')
),
missing_by_source AS (
    SELECT source_id, string_agg(judgement || ' (' || sections || ')', '; ' ORDER BY judgement) AS not_judged,
           count(*) AS not_judged_count
    FROM missing GROUP BY source_id
),
launches AS (
    SELECT source_id, count(*) AS launches,
           count(*) FILTER (WHERE duration_ns IS NULL OR duration_ns <= 0) AS unmeasured_launches,
           string_agg(DISTINCT name, ', ' ORDER BY name) FILTER (WHERE duration_ns IS NULL OR duration_ns <= 0) AS unmeasured_kernels
    FROM ncu_kernels GROUP BY source_id
)
SELECT s.source_id, s.rank, s.path, l.launches, l.unmeasured_launches, l.unmeasured_kernels,
       CASE WHEN (SELECT count(*) FROM ncu_sections) = count(DISTINCT x.section) THEN 'full'
            WHEN count(DISTINCT x.section) FILTER (WHERE x.set_name IN ('basic', 'detailed'))
                 = (SELECT count(*) FROM ncu_sections WHERE set_name IN ('basic', 'detailed')) THEN 'detailed'
            WHEN count(DISTINCT x.section) FILTER (WHERE x.set_name = 'basic')
                 = (SELECT count(*) FROM ncu_sections WHERE set_name = 'basic') THEN 'basic'
            ELSE 'partial' END AS collected_set,
       string_agg(DISTINCT x.section, ', ' ORDER BY x.section) AS sections,
       mb.not_judged, coalesce(mb.not_judged_count, 0) AS not_judged_count,
       'ncu --set full -o REPORT <application>' AS collect_hint,
       concat_ws('; ',
           CASE WHEN l.unmeasured_launches = 1
                THEN '1 launch carries no metrics (' || l.unmeasured_kernels || ') and was not judged'
                WHEN l.unmeasured_launches > 1 THEN l.unmeasured_launches || ' launches carry no metrics ('
                || l.unmeasured_kernels || ') and were not judged' END,
           CASE WHEN mb.not_judged IS NOT NULL THEN 'not judged for lack of metrics: ' || mb.not_judged END)
           AS summary
FROM profiles s
JOIN launches l USING (source_id)
LEFT JOIN sections x USING (source_id)
LEFT JOIN missing_by_source mb USING (source_id)
GROUP BY s.source_id, s.rank, s.path, l.launches, l.unmeasured_launches, l.unmeasured_kernels, mb.not_judged,
         mb.not_judged_count;

-- The report's coverage of each Nsight Compute report (ncu_coverage). Columns: rank, path, launches,
-- unmeasured_launches, unmeasured_kernels, collected_set, sections, not_judged.
CREATE OR REPLACE TEMP VIEW ncu_report_coverage AS
SELECT rank, path, launches, unmeasured_launches, unmeasured_kernels, collected_set, sections, not_judged
FROM ncu_coverage;
