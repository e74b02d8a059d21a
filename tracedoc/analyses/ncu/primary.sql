-- ncu.primary: one primary finding per kernel, and the role of every other ncu finding on it.
--
-- A kernel (every profiled launch of one function and launch configuration) gets one primary finding: the one that
-- names what limits it, or the root cause behind that limit. It alone claims a saving. Every other finding on the
-- kernel is a facet of it: it still fires, with its own advice and its own estimate as evidence, but claims 0 ms
-- and says which finding counts its time — so the savings of one kernel's findings never add up to more than the
-- kernel's time, and ranking by saving ranks kernels, not the number of things said about them. Precedence, the
-- first that applies:
--   1. below-cublas-ceiling: a GEMM below ncu_max_pct_of_cublas() of cuBLAS on the same product
--      (ncu.cublas_ceiling): calling cuBLAS saves more than tuning any unit of the kernel;
--   2. register-spill or uncoalesced-access, on a memory- or latency-bound kernel, when removing the wasted traffic
--      saves at least as much as the limiter's own estimate (the larger saving when both do): the waste is what
--      keeps the unit busy;
--   3. the kernel's class (ncu.sol): compute-bound, memory-bound, latency-bound or small-grid.
-- Stall reasons are symptoms, not findings of their own, wherever a unit limits the kernel: the primary finding
-- carries the kernel's top three (ncu.stalls). Savings in ns; shares 0–1.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.memory
-- include: ncu.occupancy
-- include: ncu.launch_config
-- include: ncu.stalls
-- include: ncu.cublas_ceiling

-- One row per kernel: every column of ncu_kernel_sol, plus
--   primary_rule       the rule of the kernel's primary finding (NULL without speed-of-light metrics and no ceiling)
--   facet_note         the sentence a facet's message ends with: which finding counts the kernel's time
--   top_stalls         the top three stall reasons ('lg_throttle 92%, long_scoreboard 6%, misc 1%'), NULL when the
--                      stall metrics were not collected; stall_sentence: them in a sentence, as symptoms of the
--                      limiting unit for a compute- or memory-bound kernel ('' without them)
--   tflop_per_s, peak_tflop_per_s, pct_of_peak_flops: achieved FLOP/s against the datasheet peak of the kernel's
--                      precision (ncu.roofline); precision, model, sm_clock_mhz (the SM clock ncu ran it at)
--   compute_detail, ceiling_sentence: what a compute-bound message says about memory and about the chip's ceiling
CREATE OR REPLACE TEMP TABLE ncu_kernel_verdict AS
WITH candidates AS (
    SELECT source_id, demangled_name, grid, block, 'below-cublas-ceiling' AS rule, 1 AS precedence,
           saving_ns / nullif(total_ns, 0) AS saving_fraction
    FROM ncu_cublas_ceiling WHERE far_below
    UNION ALL
    SELECT m.source_id, m.demangled_name, m.grid, m.block, 'register-spill', 2, m.saving_fraction
    FROM ncu_register_spills m JOIN ncu_kernel_sol s USING (source_id, demangled_name, grid, block)
    WHERE m.spills AND s.kernel_class IN ('memory', 'latency') AND m.saving_fraction >= s.class_saving_fraction
    UNION ALL
    SELECT m.source_id, m.demangled_name, m.grid, m.block, 'uncoalesced-access', 2, m.saving_fraction
    FROM ncu_uncoalesced_access m JOIN ncu_kernel_sol s USING (source_id, demangled_name, grid, block)
    WHERE m.uncoalesced AND s.kernel_class IN ('memory', 'latency') AND m.saving_fraction >= s.class_saving_fraction
    UNION ALL
    SELECT source_id, demangled_name, grid, block, class_rule, 3, class_saving_fraction
    FROM ncu_kernel_sol WHERE class_rule IS NOT NULL
),
chosen AS (
    SELECT source_id, demangled_name, grid, block, rule AS primary_rule
    FROM candidates
    QUALIFY row_number() OVER (PARTITION BY source_id, demangled_name, grid, block
                               ORDER BY precedence, saving_fraction DESC NULLS LAST, rule) = 1
)
SELECT s.*, c.primary_rule,
       CASE WHEN c.primary_rule IS NULL
            THEN ' No saving is claimed: without speed-of-light metrics the kernel''s limiter is unknown.'
            ELSE ' Part of the ' || c.primary_rule || ' finding on this kernel, which counts its time.' END
           AS facet_note,
       t.top_stalls,
       CASE WHEN t.top_stalls IS NULL THEN ''
            WHEN s.kernel_class IN ('compute', 'memory')
                THEN ' Top stall reasons (share of the cycles between two instructions): ' || t.top_stalls
                     || ' — symptoms of the ' || s.busiest_unit || ' limit, not separate problems.'
            WHEN s.kernel_class = 'latency'
                THEN ' Warps wait most on (share of the cycles between two instructions): ' || t.top_stalls || '.'
            ELSE ' Top stall reasons (share of the cycles between two instructions): ' || t.top_stalls || '.'
       END AS stall_sentence,
       r.precision, r.model, r.flop_per_s / 1e12 AS tflop_per_s, r.peak_flop_per_s / 1e12 AS peak_tflop_per_s,
       100.0 * r.flop_per_s / nullif(r.peak_flop_per_s, 0) AS pct_of_peak_flops, s.sm_clock_hz / 1e6 AS sm_clock_mhz,
       CASE WHEN s.tensor_bound AND s.memory_unit_pct > s.tensor_pct
                THEN ' ' || s.memory_unit || ' reads ' || ncu_pct_text(s.memory_unit_pct) || '%: the shared-memory and '
                     || 'L1 traffic that feeds the tensor cores, the GEMM''s own operand path, not a separate limit.'
            WHEN s.memory_unit IS NOT NULL
                THEN ' The busiest memory unit (' || s.memory_unit || ') reaches ' || ncu_pct_text(s.memory_unit_pct)
                     || '%.'
            ELSE '' END AS compute_detail,
       CASE WHEN r.flop_per_s > 0 AND r.peak_flop_per_s > 0
                THEN ' It computes ' || printf('%.1f', r.flop_per_s / 1e12) || ' TFLOP/s (' || r.precision || '): '
                     || ncu_pct_text(100.0 * r.flop_per_s / r.peak_flop_per_s) || '% of the '
                     || coalesce(r.model || '''s ', 'GPU''s ') || printf('%.0f', r.peak_flop_per_s / 1e12)
                     || ' TFLOP/s ' || CASE WHEN r.model IS NULL THEN 'FP32 peak from its attributes'
                                            ELSE 'datasheet peak at boost clock' END
                     || coalesce('; ncu held the SM at ' || printf('%.0f', s.sm_clock_hz / 1e6) || ' MHz', '') || '.'
            ELSE '' END AS ceiling_sentence
FROM ncu_kernel_sol s
LEFT JOIN chosen c USING (source_id, demangled_name, grid, block)
LEFT JOIN ncu_kernel_top_stalls t USING (source_id, demangled_name, grid, block)
LEFT JOIN ncu_roofline r USING (source_id, demangled_name, grid, block);

-- The role of each ncu rule's finding on each kernel, one row per kernel and rule: is_primary, role_note ('' for
-- the primary finding, else facet_note), stall_note (the stall sentence on the primary finding only, '' on
-- facets), primary_rule and top_stalls. The views the rules read join it with what ncu.verdicts adds
-- (ncu_rule_context).
CREATE OR REPLACE TEMP TABLE ncu_finding_roles AS
WITH rules AS (
    SELECT unnest(['compute-bound', 'memory-bound', 'latency-bound', 'small-grid', 'tail-effect', 'low-occupancy',
                   'register-spill', 'uncoalesced-access', 'shared-bank-conflicts', 'no-tensor-cores',
                   'below-cublas-ceiling']) AS rule
    UNION SELECT DISTINCT rule_id FROM ncu_warp_stalls
)
SELECT v.source_id, v.demangled_name, v.grid, v.block, rules.rule, v.primary_rule, v.top_stalls,
       v.primary_rule IS NOT DISTINCT FROM rules.rule AS is_primary,
       CASE WHEN is_primary THEN '' ELSE v.facet_note END AS role_note,
       CASE WHEN is_primary THEN v.stall_sentence ELSE '' END AS stall_note
FROM ncu_kernel_verdict v CROSS JOIN rules;
