-- ncu.launches: the Nsight Compute metrics the ncu analyses read, per profiled launch and per kernel.
--
-- A "kernel" here is every profiled launch of one function with one launch configuration (source, demangled
-- name, grid, block): its launches are judged together, percentages averaged weighted by duration, and a saving
-- estimated on one launch counts once per launch. Metric names differ between ncu versions and architectures,
-- so each quantity takes the first name present. Percentages are % of the unit's sustained peak as ncu measures
-- it (at the clocks ncu ran the kernel at: ncu locks them to base clocks by default). Times in ns, sizes in bytes.
-- Launches without a measured duration (ncu failed to profile them) are left out here; ncu.coverage counts them.
-- reads: ncu_kernels
-- scope: job

-- One row per profiled launch with a duration. Columns:
--   duration_ns; sm_pct (sm__throughput), mem_pct (gpu__compute_memory_throughput: the busiest memory unit),
--   dram_pct, l2_pct, l1_pct (L1/TEX), issue_pct (SM issue slots busy), tensor_pct (busiest tensor pipe, NULL when
--   not collected), all % of peak;
--   achieved_occupancy_pct / theoretical_occupancy_pct (% of the SM's warp slots), occupancy_limit_* (blocks per
--   SM each resource allows), grid_size, block_size, sm_count, waves (blocks / blocks that fit at once);
--   issue_active (instructions issued per scheduler per active cycle, 0–1), eligible_warps, active_warps
--   (per scheduler), warp_cycles_per_issue (average cycles between two instructions of a warp);
--   local_sectors / global_sectors (L1 sectors of local and global loads+stores), theoretical_sectors /
--   ideal_sectors (L2 sectors global accesses need as written vs at perfect coalescing, SourceCounters),
--   shared_wavefronts / bank_conflicts (shared loads+stores), dram_bytes (read + write),
--   fp32_flop / fp64_flop / fp16_flop (non-tensor FLOPs from the roofline counters) and tensor_flop (tensor-core
--   FLOPs, ncu ≥ 2024 full set), sm_clock_hz (SM clock while profiled).
CREATE OR REPLACE TEMP TABLE ncu_launch_metrics AS
-- (one column per metric: max(value) FILTER (WHERE metric = ...)). A launch has about 2,000 metrics and the pivot
-- reads about 50: the rows are cut to those first (`wanted`, every name the pivot compares with; a DuckDB hash
-- aggregate of 40 filtered columns over all of a launch's rows costs several times its input), and the tensor
-- metrics, matched by pattern, are aggregated apart (`tensor`) and joined on the launch.
WITH wanted AS (
    SELECT * FROM ncu_metrics WHERE metric IN (
        'device__attribute_multiprocessor_count',
        'dram__bytes.sum',
        'dram__bytes_read.sum',
        'dram__bytes_write.sum',
        'dram__throughput.avg.pct_of_peak_sustained_elapsed',
        'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed',
        'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed',
        'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum',
        'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum',
        'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum',
        'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum',
        'l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum',
        'l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum',
        'l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum',
        'l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum',
        'l1tex__throughput.avg.pct_of_peak_sustained_active',
        'l1tex__throughput.avg.pct_of_peak_sustained_elapsed',
        'launch__block_size',
        'launch__grid_size',
        'launch__occupancy_limit_barriers',
        'launch__occupancy_limit_blocks',
        'launch__occupancy_limit_registers',
        'launch__occupancy_limit_shared_mem',
        'launch__occupancy_limit_warps',
        'launch__sm_count',
        'launch__waves_per_multiprocessor',
        'lts__throughput.avg.pct_of_peak_sustained_elapsed',
        'memory_l2_theoretical_sectors_global',
        'memory_l2_theoretical_sectors_global_ideal',
        'sm__cycles_elapsed.avg.per_second',
        'sm__inst_issued.avg.pct_of_peak_sustained_active',
        'sm__inst_issued.avg.pct_of_peak_sustained_elapsed',
        'sm__maximum_warps_per_active_cycle_pct',
        'sm__throughput.avg.pct_of_peak_sustained_elapsed',
        'sm__warps_active.avg.pct_of_peak_sustained_active',
        'smsp__average_warp_latency_per_inst_issued.ratio',
        'smsp__cycles_elapsed.avg.per_second',
        'smsp__issue_active.avg.per_cycle_active',
        'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed',
        'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed',
        'smsp__warps_active.avg.per_cycle_active',
        'smsp__warps_eligible.avg.per_cycle_active')
),
tensor AS (
    SELECT source_id, launch_id,
        max(value) FILTER (WHERE metric LIKE 'sm\_\_pipe\_tensor%cycles\_active%.avg.pct\_of\_peak\_sustained\_elapsed'
                           ESCAPE '\') AS tensor_pct,
        sum(value) FILTER (WHERE regexp_matches(metric, '^sm__ops_path_tensor_src_[a-z0-9_]+\.sum$')) AS tensor_flop,
        arg_max(regexp_extract(metric, '^sm__ops_path_tensor_src_([a-z0-9]+)', 1), (value, metric))
            FILTER (WHERE regexp_matches(metric, '^sm__ops_path_tensor_src_[a-z0-9_]+\.sum$') AND value > 0)
            AS tensor_dtype
    FROM ncu_metrics
    WHERE starts_with(metric, 'sm__pipe_tensor') OR starts_with(metric, 'sm__ops_path_tensor_src_')
    GROUP BY source_id, launch_id
),
m AS (
    SELECT source_id, launch_id,
        max(value) FILTER (WHERE metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed') AS sm_pct,
        max(value) FILTER (WHERE metric = 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed') AS mem_pct,
        coalesce(max(value) FILTER (WHERE metric = 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed'),
                 max(value) FILTER (WHERE metric = 'dram__throughput.avg.pct_of_peak_sustained_elapsed')) AS dram_pct,
        max(value) FILTER (WHERE metric = 'lts__throughput.avg.pct_of_peak_sustained_elapsed') AS l2_pct,
        coalesce(max(value) FILTER (WHERE metric = 'l1tex__throughput.avg.pct_of_peak_sustained_elapsed'),
                 max(value) FILTER (WHERE metric = 'l1tex__throughput.avg.pct_of_peak_sustained_active')) AS l1_pct,
        coalesce(max(value) FILTER (WHERE metric = 'sm__inst_issued.avg.pct_of_peak_sustained_elapsed'),
                 max(value) FILTER (WHERE metric = 'sm__inst_issued.avg.pct_of_peak_sustained_active')) AS issue_pct,
        max(value) FILTER (WHERE metric = 'sm__warps_active.avg.pct_of_peak_sustained_active') AS achieved_occupancy_pct,
        max(value) FILTER (WHERE metric = 'sm__maximum_warps_per_active_cycle_pct') AS theoretical_occupancy_pct,
        max(value) FILTER (WHERE metric = 'launch__occupancy_limit_blocks') AS occupancy_limit_blocks,
        max(value) FILTER (WHERE metric = 'launch__occupancy_limit_registers') AS occupancy_limit_registers,
        max(value) FILTER (WHERE metric = 'launch__occupancy_limit_shared_mem') AS occupancy_limit_shared_mem,
        max(value) FILTER (WHERE metric = 'launch__occupancy_limit_warps') AS occupancy_limit_warps,
        max(value) FILTER (WHERE metric = 'launch__occupancy_limit_barriers') AS occupancy_limit_barriers,
        max(value) FILTER (WHERE metric = 'launch__grid_size') AS grid_size,
        max(value) FILTER (WHERE metric = 'launch__block_size') AS block_size,
        coalesce(max(value) FILTER (WHERE metric = 'launch__sm_count'), max(value) FILTER (WHERE metric = 'device__attribute_multiprocessor_count')) AS sm_count,
        max(value) FILTER (WHERE metric = 'launch__waves_per_multiprocessor') AS waves,
        max(value) FILTER (WHERE metric = 'smsp__issue_active.avg.per_cycle_active') AS issue_active,
        max(value) FILTER (WHERE metric = 'smsp__warps_eligible.avg.per_cycle_active') AS eligible_warps,
        max(value) FILTER (WHERE metric = 'smsp__warps_active.avg.per_cycle_active') AS active_warps,
        max(value) FILTER (WHERE metric = 'smsp__average_warp_latency_per_inst_issued.ratio') AS warp_cycles_per_issue,
        max(value) FILTER (WHERE metric = 'l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum')
            + max(value) FILTER (WHERE metric = 'l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum') AS local_sectors,
        max(value) FILTER (WHERE metric = 'l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum')
            + max(value) FILTER (WHERE metric = 'l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum') AS global_sectors,
        max(value) FILTER (WHERE metric = 'memory_l2_theoretical_sectors_global') AS theoretical_sectors,
        max(value) FILTER (WHERE metric = 'memory_l2_theoretical_sectors_global_ideal') AS ideal_sectors,
        max(value) FILTER (WHERE metric = 'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum')
            + max(value) FILTER (WHERE metric = 'l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum') AS shared_wavefronts,
        max(value) FILTER (WHERE metric = 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum')
            + max(value) FILTER (WHERE metric = 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum') AS bank_conflicts,
        coalesce(max(value) FILTER (WHERE metric = 'dram__bytes.sum'),
                 max(value) FILTER (WHERE metric = 'dram__bytes_read.sum') + max(value) FILTER (WHERE metric = 'dram__bytes_write.sum')) AS dram_bytes,
        coalesce(max(value) FILTER (WHERE metric = 'smsp__cycles_elapsed.avg.per_second'),
                 max(value) FILTER (WHERE metric = 'sm__cycles_elapsed.avg.per_second')) AS sm_clock_hz,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed')
            + max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed')
            + 2 * max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed') AS fp32_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed')
            + max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed')
            + 2 * max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed') AS fp64_per_cycle,
        max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed')
            + max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed')
            + 2 * max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed') AS fp16_per_cycle
    FROM wanted
    GROUP BY source_id, launch_id
)
SELECT k.source_id, s.rank, k.launch_id, k.name, k.demangled_name, k.device, k.device_name, k.compute_capability,
       k.grid, k.block, k.registers_per_thread, k.shared_memory_bytes, k.duration_ns,
       m.* EXCLUDE (source_id, launch_id, fp32_per_cycle, fp64_per_cycle, fp16_per_cycle)
           REPLACE (grid_size::BIGINT AS grid_size, block_size::BIGINT AS block_size, sm_count::BIGINT AS sm_count),
       t.tensor_pct, t.tensor_flop, t.tensor_dtype,
       m.fp32_per_cycle * m.sm_clock_hz * k.duration_ns / 1e9 AS fp32_flop,
       m.fp64_per_cycle * m.sm_clock_hz * k.duration_ns / 1e9 AS fp64_flop,
       m.fp16_per_cycle * m.sm_clock_hz * k.duration_ns / 1e9 AS fp16_flop
FROM ncu_kernels k
JOIN sources s USING (source_id)
LEFT JOIN m USING (source_id, launch_id)
LEFT JOIN tensor t USING (source_id, launch_id)
WHERE k.duration_ns IS NOT NULL AND k.duration_ns > 0;

-- Duration-weighted mean of x over a kernel's launches, ignoring launches where x was not collected.
CREATE OR REPLACE TEMP MACRO ncu_wavg(x) AS
    sum(x * duration_ns) / nullif(sum(CASE WHEN x IS NOT NULL THEN duration_ns END), 0);

-- One row per kernel (source, demangled name, grid, block): launches, total_ns and mean_ns (ns), the launch
-- ids, and every column of ncu_launch_metrics (percentages and rates as duration-weighted means, counts and
-- FLOPs summed over the launches, launch-configuration values as they are).
CREATE OR REPLACE TEMP TABLE ncu_kernel_metrics AS
SELECT source_id, any_value(rank) AS rank, any_value(name) AS name, demangled_name, grid, block,
       any_value(device) AS device, any_value(device_name) AS device_name,
       any_value(compute_capability) AS compute_capability,
       count(*) AS launches, sum(duration_ns) AS total_ns, avg(duration_ns) AS mean_ns,
       string_agg(launch_id::VARCHAR, ',' ORDER BY launch_id) AS launch_ids,
       any_value(registers_per_thread) AS registers_per_thread, any_value(shared_memory_bytes) AS shared_memory_bytes,
       ncu_wavg(sm_pct) AS sm_pct, ncu_wavg(mem_pct) AS mem_pct, ncu_wavg(dram_pct) AS dram_pct,
       ncu_wavg(l2_pct) AS l2_pct, ncu_wavg(l1_pct) AS l1_pct, ncu_wavg(issue_pct) AS issue_pct,
       ncu_wavg(tensor_pct) AS tensor_pct,
       ncu_wavg(achieved_occupancy_pct) AS achieved_occupancy_pct,
       ncu_wavg(theoretical_occupancy_pct) AS theoretical_occupancy_pct,
       min(occupancy_limit_blocks) AS occupancy_limit_blocks, min(occupancy_limit_registers) AS occupancy_limit_registers,
       min(occupancy_limit_shared_mem) AS occupancy_limit_shared_mem, min(occupancy_limit_warps) AS occupancy_limit_warps,
       min(occupancy_limit_barriers) AS occupancy_limit_barriers,
       any_value(grid_size) AS grid_size, any_value(block_size) AS block_size, any_value(sm_count) AS sm_count,
       ncu_wavg(waves) AS waves,
       ncu_wavg(issue_active) AS issue_active, ncu_wavg(eligible_warps) AS eligible_warps,
       ncu_wavg(active_warps) AS active_warps, ncu_wavg(warp_cycles_per_issue) AS warp_cycles_per_issue,
       sum(local_sectors) AS local_sectors, sum(global_sectors) AS global_sectors,
       sum(theoretical_sectors) AS theoretical_sectors, sum(ideal_sectors) AS ideal_sectors,
       sum(shared_wavefronts) AS shared_wavefronts, sum(bank_conflicts) AS bank_conflicts,
       sum(dram_bytes) AS dram_bytes, ncu_wavg(sm_clock_hz) AS sm_clock_hz,
       sum(fp32_flop) AS fp32_flop, sum(fp64_flop) AS fp64_flop, sum(fp16_flop) AS fp16_flop,
       sum(tensor_flop) AS tensor_flop, mode(tensor_dtype ORDER BY launch_id) AS tensor_dtype
FROM ncu_launch_metrics
GROUP BY source_id, demangled_name, grid, block;
