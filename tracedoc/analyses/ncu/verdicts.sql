-- ncu.verdicts: ncu's own guided-analysis verdicts (stored in .ncu-rep reports) beside tracedoc's.
--
-- Each stored ncu rule message of type optimization or warning (and every SOLBottleneck classification) is
-- mapped to the tracedoc rule that judges the same problem; messages without a counterpart (IssueSlotUtilization,
-- HighPipeUtilization, FPInstructions, MemoryL2Compression, ...) keep tracedoc_rule NULL. Where tracedoc's own
-- measurements say the problem cannot limit that kernel, not_limiting_reason says why: that is where the two
-- disagree by design (e.g. ncu's TheoreticalOccupancy on a GEMM at 90 % tensor-pipe throughput).
-- ncu's speedups are % of the launch's duration ("local": of the part the rule looks at, "global": of the whole).
-- reads: ncu_kernels
-- scope: job
-- include: ncu.stalls
-- include: ncu.occupancy
-- include: ncu.memory
-- include: ncu.launch_config
-- include: ncu.roofline
-- include: ncu.coverage
-- include: ncu.links
-- include: ncu.primary

-- One row per kernel (as in ncu_kernel_metrics) and ncu verdict: ncu_rule, ncu_title, ncu_type,
-- ncu_speedup_pct (mean over the kernel's launches that carry it), launches_with_verdict, tracedoc_rule,
-- not_limiting_reason (NULL when tracedoc judges the same problem with its own thresholds), and the kernel's
-- class, busiest unit and total_ns.
CREATE OR REPLACE TEMP TABLE ncu_rule_verdicts AS
WITH mapped AS (
    SELECT r.source_id, r.launch_id, r.rule_id AS ncu_rule, r.title AS ncu_title, r.type AS ncu_type,
           r.speedup_pct,
           CASE
               WHEN r.rule_id = 'SOLBottleneck' AND r.title ILIKE '%small grid%' THEN 'small-grid'
               WHEN r.rule_id = 'SOLBottleneck' AND r.title ILIKE '%latency%' THEN 'latency-bound'
               WHEN r.rule_id = 'SOLBottleneck' AND r.title ILIKE '%compute%' THEN 'compute-bound'
               WHEN r.rule_id = 'SOLBottleneck' AND r.title ILIKE '%memory%' THEN 'memory-bound'
               WHEN r.rule_id = 'SOLBottleneck' AND r.title ILIKE '%throughput%' THEN 'compute-bound|memory-bound'
               WHEN r.rule_id = 'CPIStall' AND r.title ILIKE 'warpgroup arrive%' THEN 'warp-stall-gmma'
               WHEN r.rule_id = 'CPIStall' AND r.title <> ''
                   THEN 'warp-stall-' || replace(lower(trim(regexp_replace(r.title, '(?i)\s*stalls?$', ''))), ' ', '-')
               WHEN r.rule_id IN ('AchievedOccupancy', 'TheoreticalOccupancy', 'Occupancy') THEN 'low-occupancy'
               WHEN r.rule_id = 'LaunchConfiguration' AND r.title ILIKE '%tail%' THEN 'tail-effect'
               WHEN r.rule_id = 'LaunchConfiguration' AND r.title ILIKE '%small grid%' THEN 'small-grid'
               WHEN r.rule_id IN ('SharedMemoryConflicts', 'UncoalescedSharedAccess') THEN 'shared-bank-conflicts'
               WHEN r.rule_id IN ('UncoalescedGlobalAccess', 'MemoryCacheAccessPattern') THEN 'uncoalesced-access'
               WHEN r.rule_id = 'LocalMemoryUsage' THEN 'register-spill'
           END AS tracedoc_rule
    FROM ncu_rule_results r
    WHERE r.type IN ('optimization', 'warning') OR (r.rule_id = 'SOLBottleneck' AND r.type = 'ok')
),
per_kernel AS (
    SELECT l.source_id, l.demangled_name, l.grid, l.block, m.ncu_rule, m.ncu_title, any_value(m.ncu_type) AS ncu_type,
           avg(m.speedup_pct) AS ncu_speedup_pct, count(DISTINCT m.launch_id) AS launches_with_verdict,
           CASE WHEN any_value(m.tracedoc_rule) = 'compute-bound|memory-bound'
                THEN CASE WHEN any_value(s.kernel_class) = 'memory' THEN 'memory-bound' ELSE 'compute-bound' END
                ELSE any_value(m.tracedoc_rule) END AS tracedoc_rule
    FROM mapped m
    JOIN ncu_launch_metrics l USING (source_id, launch_id)
    JOIN ncu_kernel_sol s USING (source_id, demangled_name, grid, block)
    GROUP BY l.source_id, l.demangled_name, l.grid, l.block, m.ncu_rule, m.ncu_title
)
SELECT s.source_id, s.rank, s.name, s.demangled_name, s.grid, s.block, s.launches, s.total_ns, s.launch_ids,
       s.kernel_class, s.busiest_unit, s.busiest_unit_pct, p.ncu_rule, p.ncu_title, p.ncu_type, p.ncu_speedup_pct,
       p.launches_with_verdict, p.tracedoc_rule,
       CASE
           WHEN p.tracedoc_rule = 'low-occupancy' THEN o.not_limiting_reason
           WHEN p.tracedoc_rule LIKE 'warp-stall-%' AND NOT coalesce(w.judged, true)
               THEN replace(w.reason, '_', ' ') || ' stalls are not a problem in themselves'
                    || CASE w.reason WHEN 'not_selected' THEN ': another eligible warp issued instead'
                                     WHEN 'selected' THEN ': the warp was issuing'
                                     WHEN 'gmma' THEN ': the warps wait on tensor-core (warpgroup MMA) results'
                                     ELSE '' END
           WHEN p.tracedoc_rule LIKE 'warp-stall-%' THEN w.not_limiting_reason
           WHEN p.tracedoc_rule = 'shared-bank-conflicts' THEN b.not_limiting_reason
           WHEN p.tracedoc_rule = 'small-grid' AND s.waves >= 1
               THEN 'the grid fills ' || round(s.waves, 2) || ' waves (' || s.grid_size::BIGINT || ' blocks on '
                    || s.sm_count::BIGINT || ' SMs)'
           WHEN p.tracedoc_rule IN ('latency-bound', 'compute-bound', 'memory-bound', 'small-grid')
                AND p.tracedoc_rule <> replace(s.kernel_class, '_', '-')
                    || CASE WHEN s.kernel_class = 'small_grid' THEN '' ELSE '-bound' END
               THEN 'tracedoc classes it ' || replace(s.kernel_class, '_', ' ')
                    || coalesce(' (' || s.busiest_unit || ' at ' || ncu_pct_text(s.busiest_unit_pct) || '% of peak)', '')
           WHEN p.tracedoc_rule = 'uncoalesced-access' AND u.excess_pct < 10
               THEN 'the source counters show the global accesses need only ' || round(u.excess_pct, 1)
                    || '% more L2 sectors than perfectly coalesced ones'
       END AS not_limiting_reason
FROM per_kernel p
JOIN ncu_kernel_sol s USING (source_id, demangled_name, grid, block)
LEFT JOIN ncu_occupancy o USING (source_id, demangled_name, grid, block)
LEFT JOIN ncu_bank_conflicts b USING (source_id, demangled_name, grid, block)
LEFT JOIN ncu_uncoalesced_access u USING (source_id, demangled_name, grid, block)
LEFT JOIN ncu_warp_stalls w ON w.source_id = p.source_id AND w.demangled_name = p.demangled_name
     AND w.grid = p.grid AND w.block = p.block AND w.rule_id = p.tracedoc_rule;

-- The ncu verdict on each kernel for each tracedoc rule, as one line ('TheoreticalOccupancy: est. 9.9 %'), for
-- the evidence of tracedoc's findings (largest speedup first, then by rule); 'none' when ncu stored no such
-- verdict. Keyed by kernel and tracedoc_rule.
CREATE OR REPLACE TEMP TABLE ncu_verdict_text AS
SELECT source_id, demangled_name, grid, block, tracedoc_rule,
       string_agg(ncu_rule || coalesce(' "' || nullif(ncu_title, '') || '"', '')
                  || coalesce(', est. ' || round(ncu_speedup_pct, 1) || '%', ''), '; '
                  ORDER BY ncu_speedup_pct DESC NULLS LAST, ncu_rule, ncu_title) AS ncu_verdict
FROM ncu_rule_verdicts WHERE tracedoc_rule IS NOT NULL
GROUP BY ALL;

-- What each ncu rule's finding on a kernel says beside its measurement, one row per kernel and rule (every column
-- of ncu_finding_roles), made once here so that the rules read columns, not a lookup per finding:
--   link_impact_scale  what turns a saving estimated on the profiled launches into one over the timeline given with
--                      the report (ncu_trace_links' impact_scale); 1 when the kernel is not linked
--   link_launches      the kernel's launches per timeline input (launches_per_timeline); NULL when unlinked
--   link_mean_ns, link_total_ns: the kernel's mean launch in the timeline and its total on the profiled launches,
--                      for the saving per timeline launch (ncu_saving_per_timeline_launch_us, below)
--   ncu_verdict        ncu_verdict_text's line for the kernel and rule, 'none' when ncu stored no such verdict,
--                      'not stored in this input' for CSV exports and reports without rule results
CREATE OR REPLACE TEMP TABLE ncu_rule_context AS
WITH links AS (
    SELECT source_id, demangled_name, grid, block,
           any_value({'impact_scale': impact_scale, 'timeline_launches': timeline_launches,
                      'launches_per_timeline': launches_per_timeline, 'timeline_mean_ns': timeline_mean_ns,
                      'total_ns': total_ns}) AS link
    FROM ncu_trace_links GROUP BY ALL
)
SELECT r.*, coalesce(l.link.impact_scale, 1) AS link_impact_scale,
       CASE WHEN l.link.timeline_launches > 0 THEN l.link.launches_per_timeline END AS link_launches,
       l.link.timeline_mean_ns AS link_mean_ns, l.link.total_ns AS link_total_ns,
       CASE WHEN NOT EXISTS (SELECT 1 FROM ncu_rule_results x WHERE x.source_id = r.source_id)
            THEN 'not stored in this input' ELSE coalesce(v.ncu_verdict, 'none') END AS ncu_verdict
FROM ncu_finding_roles r
LEFT JOIN links l ON l.source_id = r.source_id AND l.demangled_name IS NOT DISTINCT FROM r.demangled_name
     AND l.grid IS NOT DISTINCT FROM r.grid AND l.block IS NOT DISTINCT FROM r.block
LEFT JOIN ncu_verdict_text v ON v.source_id = r.source_id AND v.demangled_name = r.demangled_name
     AND v.grid IS NOT DISTINCT FROM r.grid AND v.block IS NOT DISTINCT FROM r.block AND v.tracedoc_rule = r.rule;

-- ncu_saving_per_timeline_launch_us(saving_ms, link_mean_ns, link_total_ns): a saving estimated on the profiled
-- launches (ms) as the same share of one timeline launch, in µs; NULL when the kernel is not linked.
CREATE OR REPLACE TEMP MACRO ncu_saving_per_timeline_launch_us(saving_ms, mean_ns, total_ns) AS
    saving_ms * 1e3 * mean_ns / nullif(total_ns, 0);

-- The views the ncu rules read: each measurement view with its rule's role on the kernel (is_primary, role_note,
-- stall_note, primary_rule, top_stalls) and what ncu_rule_context adds. ncu_class_findings: ncu_kernel_verdict for
-- the kernel's class rule (compute-bound, memory-bound, latency-bound).
CREATE OR REPLACE TEMP VIEW ncu_class_findings AS
SELECT v.*, r.is_primary, r.role_note, r.stall_note, r.link_impact_scale, r.link_launches, r.link_mean_ns,
       r.link_total_ns, r.ncu_verdict
FROM ncu_kernel_verdict v JOIN ncu_rule_context r USING (source_id, demangled_name, grid, block)
WHERE r.rule = v.class_rule;

-- small-grid and tail-effect (never both on one kernel: one needs less than a wave, the other more).
CREATE OR REPLACE TEMP VIEW ncu_launch_config_findings AS
SELECT m.*, r.* EXCLUDE (source_id, demangled_name, grid, block, rule)
FROM ncu_launch_config m JOIN ncu_rule_context r USING (source_id, demangled_name, grid, block)
WHERE r.rule = CASE WHEN m.waves < 1 THEN 'small-grid' ELSE 'tail-effect' END;

-- warp-stall-<reason>, one row per kernel and reason.
CREATE OR REPLACE TEMP VIEW ncu_warp_stall_findings AS
SELECT m.*, r.* EXCLUDE (source_id, demangled_name, grid, block, rule)
FROM ncu_warp_stalls m JOIN ncu_rule_context r USING (source_id, demangled_name, grid, block)
WHERE r.rule = m.rule_id;

-- ncu_findings('measurement', 'rule'): a measurement table or view of one row per kernel with that rule's role on
-- each kernel: what the facet rules read (low-occupancy: ncu_occupancy, register-spill: ncu_register_spills,
-- uncoalesced-access: ncu_uncoalesced_access, shared-bank-conflicts: ncu_bank_conflicts, no-tensor-cores:
-- ncu_tensor_use, below-cublas-ceiling: ncu_cublas_ceiling).
CREATE OR REPLACE TEMP MACRO ncu_findings(measurement, rule_id) AS TABLE
SELECT m.*, r.* EXCLUDE (source_id, demangled_name, grid, block, rule)
FROM query_table(measurement) m JOIN ncu_rule_context r USING (source_id, demangled_name, grid, block)
WHERE r.rule = rule_id;

-- The ncu verdicts tracedoc overrules, one row per kernel: verdicts (each as 'ncu rule → tracedoc rule: why
-- tracedoc disagrees'), verdict_count, ncu_speedup_pct (the largest speedup ncu claimed among them), and the
-- kernel's identity and class.
CREATE OR REPLACE TEMP VIEW ncu_overruled_verdicts AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, kernel_class,
       string_agg(ncu_rule || coalesce(' "' || nullif(ncu_title, '') || '"', '')
                  || coalesce(' (est. ' || round(ncu_speedup_pct, 1) || '%)', '') || ' → ' || tracedoc_rule
                  || ': ' || not_limiting_reason, '; '
                  ORDER BY ncu_speedup_pct DESC NULLS LAST, ncu_rule, ncu_title) AS verdicts,
       count(*) AS verdict_count, max(ncu_speedup_pct) AS ncu_speedup_pct
FROM ncu_rule_verdicts
WHERE not_limiting_reason IS NOT NULL
GROUP BY ALL;

-- The report's Nsight Compute rules beside tracedoc's (ncu_rule_verdicts). Columns: rank, kernel, demangled,
-- grid, block, ncu_rule, ncu_title, ncu_type, ncu_speedup_pct, tracedoc_rule, tracedoc_view (in words: no
-- counterpart, overruled and why, or judged by which rule); total_ns (the kernel's) orders the rows and is left
-- out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_rules_vs_tracedoc AS
SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, ncu_rule, ncu_title, ncu_type,
       ncu_speedup_pct, tracedoc_rule,
       CASE WHEN tracedoc_rule IS NULL THEN 'no tracedoc counterpart'
            WHEN not_limiting_reason IS NOT NULL THEN 'overruled: ' || not_limiting_reason
            ELSE 'judged by tracedoc rule ' || tracedoc_rule END AS tracedoc_view,
       total_ns
FROM ncu_rule_verdicts;
