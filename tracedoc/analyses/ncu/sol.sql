-- ncu.sol: speed of light per kernel — how close each unit came to its peak, which unit is the busiest, and the
-- kernel's class.
--
-- The class follows ncu's SOLBottleneck rule (SpeedOfLight section): the busiest of compute (sm__throughput) and
-- memory (gpu__compute_memory_throughput, itself the busiest memory unit) at ≥ 60 % of peak makes the kernel
-- compute- or memory-bound; below 60 % it is latency-bound, or small-grid when the grid does not fill one wave.
-- One rule comes first: a tensor pipe at ≥ 80 % of its peak makes the kernel compute-bound on the tensor pipe,
-- whatever the memory units read. A GEMM feeding wgmma/mma from shared memory keeps L1/TEX as busy as the tensor
-- pipe, or a point busier; that traffic is the GEMM's own operand path, and "move fewer bytes" cannot help a
-- kernel whose tensor cores are near their peak. Unlike ncu, the busiest unit is named: DRAM, L2 or L1/TEX on the
-- memory side; the tensor pipe, another pipe (FMA, ALU, FP64, XU, LSU, ...) or the issue slots on the compute
-- side. The class decides a kernel's primary finding (ncu.primary), so its thresholds are these constants, not
-- rule thresholds. Percentages in % of peak; times in ns.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.launches

-- ncu_bound_pct(): a unit at or above this % of its peak bounds the kernel (ncu's SOLBottleneck uses 60).
CREATE OR REPLACE TEMP MACRO ncu_bound_pct() AS 60.0;
-- ncu_tensor_bound_pct(): a tensor pipe at or above this % of its peak makes the kernel compute-bound on it.
CREATE OR REPLACE TEMP MACRO ncu_tensor_bound_pct() AS 80.0;
-- ncu_pct_text(x): a percentage as a whole number for messages ('93'); never an integer cast, which a corrupt
-- input's 10^24 would overflow.
CREATE OR REPLACE TEMP MACRO ncu_pct_text(x) AS printf('%.0f', x);

-- Busiest pipe per launch: the highest pipe utilisation (% of peak over active cycles) among ncu's pipe metrics
-- (ComputeWorkloadAnalysis section, detailed set). The 'shared' pipe is a logical sum of others and is skipped.
CREATE OR REPLACE TEMP VIEW ncu_launch_busiest_pipe AS
SELECT source_id, launch_id, arg_max(pipe, (pct, pipe)) AS busiest_pipe, max(pct) AS busiest_pipe_pct
FROM (
    SELECT source_id, launch_id, value AS pct,
           CASE WHEN raw LIKE 'tensor%' THEN 'tensor'
                WHEN raw LIKE 'fma%' THEN 'fma'
                WHEN raw LIKE 'fp64%' THEN 'fp64'
                ELSE raw END AS pipe
    FROM (
        SELECT source_id, launch_id, value,
               regexp_extract(metric, '^sm__(?:inst_executed_pipe|pipe)_([a-z0-9_]+?)(?:_cycles_active)?'
                                      '\.avg\.pct_of_peak_sustained_active$', 1) AS raw
        FROM ncu_metrics WHERE value IS NOT NULL AND metric LIKE 'sm\_\_%pipe\_%' ESCAPE '\'
    )
    WHERE raw <> '' AND raw NOT IN ('shared', 'fmaheavy', 'fmalite')
)
GROUP BY source_id, launch_id;

-- One row per kernel: every column of ncu_kernel_metrics, plus
--   busiest_pct        max(sm_pct, mem_pct), % of peak: how close the kernel came to any hardware limit
--   headroom           1 − busiest_pct/100: the share of the duration the busiest unit left unused (0–1); every
--                      saving estimated for a kernel is capped by it, as ncu caps its estimates
--   tensor_bound       the tensor pipe is at ≥ ncu_tensor_bound_pct() of its peak
--   kernel_class       compute | memory | latency | small_grid
--   class_rule         the rule that reports the class: compute-bound | memory-bound | latency-bound | small-grid
--   class_saving_fraction  the share of the duration the class's own finding estimates as saving: the headroom
--                      for compute- and memory-bound kernels, min(headroom, idle issue slots) for latency-bound
--                      ones (ncu's issue-slot estimate); small grids: ncu.launch_config
--   memory_unit        DRAM | L2 | L1/TEX: the busiest memory unit; memory_unit_pct its % of peak
--   compute_unit       the busiest compute unit ('tensor pipe', 'FMA pipe', ..., 'issue slots'); compute_unit_pct
--   busiest_unit       compute_unit or memory_unit, whichever side sets the class (NULL for latency/small grid)
--   busiest_unit_pct   its % of peak
--   small_grid         the grid does not fill one wave (waves < 1)
--   total_ms, headroom_pct  total_ns in ms and headroom in %, for messages
--   compute_advice     what lowers the time of a kernel bound by its compute_unit
--   matmul_like        the demangled name says GEMM, convolution, MMA or attention (cuBLAS/CUTLASS/nvjet/flash)
CREATE OR REPLACE TEMP TABLE ncu_kernel_sol AS
WITH pipes AS (
    SELECT l.source_id, l.demangled_name, l.grid, l.block,
           mode(p.busiest_pipe ORDER BY l.launch_id) AS busiest_pipe,
           sum(p.busiest_pipe_pct * l.duration_ns) / nullif(sum(l.duration_ns), 0) AS busiest_pipe_pct
    FROM ncu_launch_metrics l JOIN ncu_launch_busiest_pipe p USING (source_id, launch_id)
    GROUP BY ALL
),
units AS (
    SELECT k.*, p.busiest_pipe, p.busiest_pipe_pct,
           greatest(k.sm_pct, k.mem_pct) AS busiest_pct,
           CASE greatest(k.dram_pct, k.l2_pct, k.l1_pct)
                WHEN k.dram_pct THEN 'DRAM' WHEN k.l2_pct THEN 'L2' WHEN k.l1_pct THEN 'L1/TEX' END AS memory_unit,
           greatest(k.dram_pct, k.l2_pct, k.l1_pct) AS memory_unit_pct,
           CASE WHEN coalesce(k.tensor_pct, 0) >= greatest(coalesce(p.busiest_pipe_pct, 0), coalesce(k.issue_pct, 0))
                     AND k.tensor_pct > 0 THEN 'tensor pipe'
                WHEN coalesce(p.busiest_pipe_pct, 0) >= coalesce(k.issue_pct, 0) AND p.busiest_pipe IS NOT NULL
                     THEN CASE p.busiest_pipe WHEN 'tensor' THEN 'tensor' ELSE upper(p.busiest_pipe) END || ' pipe'
                WHEN k.issue_pct IS NOT NULL THEN 'issue slots'
                ELSE 'SM' END AS compute_unit,
           CASE WHEN compute_unit = 'tensor pipe' THEN coalesce(k.tensor_pct, p.busiest_pipe_pct)
                WHEN compute_unit = 'issue slots' THEN k.issue_pct
                WHEN compute_unit LIKE '% pipe' THEN p.busiest_pipe_pct
                ELSE k.sm_pct END AS compute_unit_pct
    FROM ncu_kernel_metrics k
    LEFT JOIN pipes p USING (source_id, demangled_name, grid, block)
)
SELECT *,
       greatest(0.0, 1.0 - busiest_pct / 100.0) AS headroom,
       total_ns / 1e6 AS total_ms,
       100.0 * greatest(0.0, 1.0 - busiest_pct / 100.0) AS headroom_pct,
       CASE WHEN compute_unit = 'tensor pipe'
                THEN 'The tensor cores are the limit: only fewer FLOPs (a cheaper algorithm, skipping padded or masked '
                     || 'work) or a faster dtype (fp8 where accuracy allows) make it faster.'
            WHEN compute_unit IN ('FMA pipe', 'FP64 pipe')
                THEN 'Floating-point math on CUDA cores is the limit: move matrix-like math to tensor cores (bf16/tf32 '
                     || 'GEMMs), use fused multiply-adds, and remove redundant arithmetic.'
            ELSE 'Instruction issue or an integer/special-function pipe is the limit: execute fewer instructions — '
                 || 'vectorized loads and stores, simpler index arithmetic, hoisted invariants, cheaper math '
                 || '(intrinsics, fewer conversions).' END AS compute_advice,
       regexp_matches(lower(demangled_name), 'gemm|matmul|mma|cutlass|cublas|xmma|nvjet|conv|flash|attention|attn')
           AND NOT regexp_matches(lower(demangled_name), 'gemv') AS matmul_like,
       coalesce(waves < 1, false) AS small_grid,
       coalesce(tensor_pct >= ncu_tensor_bound_pct(), false) AS tensor_bound,
       CASE WHEN tensor_bound THEN 'compute'
            WHEN busiest_pct >= ncu_bound_pct() AND sm_pct >= mem_pct THEN 'compute'
            WHEN busiest_pct >= ncu_bound_pct() THEN 'memory'
            WHEN waves < 1 THEN 'small_grid'
            WHEN busiest_pct IS NOT NULL THEN 'latency' END AS kernel_class,
       CASE kernel_class WHEN 'compute' THEN 'compute-bound' WHEN 'memory' THEN 'memory-bound'
                         WHEN 'latency' THEN 'latency-bound' WHEN 'small_grid' THEN 'small-grid' END AS class_rule,
       CASE kernel_class WHEN 'compute' THEN headroom WHEN 'memory' THEN headroom
                         WHEN 'latency' THEN least(headroom, 1.0 - coalesce(issue_active, 0)) END
           AS class_saving_fraction,
       CASE WHEN tensor_bound THEN 'tensor pipe'
            WHEN kernel_class = 'compute' THEN compute_unit
            WHEN kernel_class = 'memory' THEN memory_unit END AS busiest_unit,
       CASE WHEN tensor_bound THEN tensor_pct
            WHEN kernel_class = 'compute' THEN compute_unit_pct
            WHEN kernel_class = 'memory' THEN memory_unit_pct END AS busiest_unit_pct
FROM units;

-- The report's kernels (ncu_kernel_sol): all profiled launches of one function and launch configuration. Columns:
-- rank, kernel, demangled, grid, block, launches, total_ms, kernel_class, busiest_unit, busiest_unit_pct, sm_pct,
-- mem_pct, dram_pct, l2_pct, l1_pct, tensor_pct, achieved_occupancy_pct, theoretical_occupancy_pct, waves,
-- registers_per_thread, device_name; total_ns orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_kernels AS
SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, launches, total_ns / 1e6 AS total_ms,
       kernel_class, busiest_unit, busiest_unit_pct, sm_pct, mem_pct, dram_pct, l2_pct, l1_pct, tensor_pct,
       achieved_occupancy_pct, theoretical_occupancy_pct, waves, registers_per_thread, device_name, total_ns
FROM ncu_kernel_sol;
