-- ncu.roofline: each kernel against its GPU's roofline.
--
-- Achieved FLOPs: CUDA-core FP32/FP64/FP16 from ncu's roofline counters (SpeedOfLight_RooflineChart, detailed
-- set; an FMA counts 2) and tensor-core FLOPs from sm__ops_path_tensor_src_* (full set, ncu ≥ 2024), over the
-- DRAM bytes read and written. The peak is the datasheet peak (ncu.device_peaks) of the kernel's dominant
-- precision — the tensor-core peak of the dtype it ran, else FP64 or FP32 — and the datasheet DRAM bandwidth;
-- for an unknown GPU, the report's own device attributes give the DRAM bandwidth (memory clock × bus width × 2)
-- and the FP32 peak (FFMA lanes × 2 × clock). ncu locks clocks to base by default, so a kernel can sit below a
-- datasheet (boost-clock) roof that it saturates at the locked clock: read pct_of_roof with ncu's SOL beside it.
-- FLOP/s in FLOP/s, bytes/s in bytes/s, arithmetic intensity and ridge point in FLOP/byte.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.sol
-- include: ncu.device_peaks

-- What each device says about itself (one row per source and device): dram_peak_bytes_per_s and
-- fp32_peak_flop_per_s computed from its attributes.
CREATE OR REPLACE TEMP VIEW ncu_device_attributes AS
SELECT k.source_id, k.device, any_value(k.device_name) AS device_name,
       max(m.value) FILTER (WHERE m.metric = 'device__attribute_memory_clock_rate') * 1e3
           * max(m.value) FILTER (WHERE m.metric = 'device__attribute_global_memory_bus_width') / 8 * 2
           AS dram_peak_bytes_per_s,
       max(m.value) FILTER (WHERE m.metric = 'sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained') * 2
           * max(m.value) FILTER (WHERE m.metric = 'device__attribute_clock_rate') * 1e3 AS fp32_peak_flop_per_s
FROM ncu_kernels k JOIN ncu_metrics m USING (source_id, launch_id)
GROUP BY k.source_id, k.device;

-- One row per kernel. Columns: precision (fp32 | fp64 | tensor <dtype> | tensor (FLOPs not collected)),
-- flop, flop_per_s, dram_bytes, dram_bytes_per_s, arithmetic_intensity, peak_flop_per_s, peak_bytes_per_s,
-- ridge_point, roof_flop_per_s (min(peak, intensity × bandwidth)), pct_of_roof (achieved / roof, %),
-- roof_side (memory: intensity below the ridge point; compute: above), model (the datasheet's GPU model, NULL
-- for an unknown GPU), peak_source (the datasheet row, or 'device attributes in the report').
CREATE OR REPLACE TEMP VIEW ncu_roofline AS
WITH k AS (
    SELECT s.*,
           coalesce(s.fp32_flop, 0) + coalesce(s.fp64_flop, 0) + coalesce(s.fp16_flop, 0)
               + coalesce(s.tensor_flop, 0) AS flop,
           CASE WHEN coalesce(s.tensor_flop, 0) > greatest(coalesce(s.fp32_flop, 0), coalesce(s.fp64_flop, 0))
                    THEN 'tensor ' || s.tensor_dtype
                WHEN s.tensor_flop IS NULL AND coalesce(s.tensor_pct, 0) >= 5 THEN 'tensor (FLOPs not collected)'
                WHEN coalesce(s.fp64_flop, 0) > coalesce(s.fp32_flop, 0) THEN 'fp64'
                ELSE 'fp32' END AS precision
    FROM ncu_kernel_sol s
),
peaks AS (
    SELECT k.source_id, k.demangled_name, k.grid, k.block,
           arg_min(p, p.priority) AS p
    FROM k JOIN ncu_device_peaks p ON k.device_name ILIKE p.name_pattern
    GROUP BY ALL
),
joined AS (
    SELECT k.*, a.dram_peak_bytes_per_s AS report_bytes_per_s, a.fp32_peak_flop_per_s AS report_fp32_flop_per_s,
           peaks.p.model AS model, peaks.p.source AS datasheet,
           1e12 * CASE
               WHEN k.precision IN ('tensor bf16', 'tensor fp16') THEN peaks.p.fp16_tensor_tflops
               WHEN k.precision = 'tensor tf32' THEN peaks.p.tf32_tensor_tflops
               WHEN k.precision = 'tensor fp8' THEN peaks.p.fp8_tensor_tflops
               WHEN k.precision = 'tensor int8' THEN peaks.p.int8_tensor_tops
               WHEN k.precision = 'tensor fp64' THEN peaks.p.fp64_tensor_tflops
               WHEN k.precision = 'fp64' THEN peaks.p.fp64_tflops
               WHEN k.precision = 'fp32' THEN peaks.p.fp32_tflops END AS datasheet_flop_per_s,
           1e9 * peaks.p.dram_gbps AS datasheet_bytes_per_s
    FROM k
    LEFT JOIN peaks USING (source_id, demangled_name, grid, block)
    LEFT JOIN ncu_device_attributes a ON a.source_id = k.source_id AND a.device IS NOT DISTINCT FROM k.device
)
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, device_name, precision,
       flop, flop / (total_ns / 1e9) AS flop_per_s,
       dram_bytes, dram_bytes / (total_ns / 1e9) AS dram_bytes_per_s,
       flop / nullif(dram_bytes, 0) AS arithmetic_intensity,
       coalesce(datasheet_flop_per_s, CASE WHEN precision = 'fp32' THEN report_fp32_flop_per_s END) AS peak_flop_per_s,
       coalesce(datasheet_bytes_per_s, report_bytes_per_s) AS peak_bytes_per_s,
       peak_flop_per_s / nullif(peak_bytes_per_s, 0) AS ridge_point,
       CASE WHEN peak_flop_per_s IS NOT NULL AND peak_bytes_per_s IS NOT NULL
            THEN least(peak_flop_per_s, arithmetic_intensity * peak_bytes_per_s) END AS roof_flop_per_s,
       100.0 * flop_per_s / nullif(roof_flop_per_s, 0) AS pct_of_roof,
       CASE WHEN arithmetic_intensity < ridge_point THEN 'memory' WHEN arithmetic_intensity >= ridge_point
            THEN 'compute' END AS roof_side,
       model,
       CASE WHEN datasheet_bytes_per_s IS NOT NULL THEN 'datasheet: ' || datasheet
            WHEN report_bytes_per_s IS NOT NULL THEN 'device attributes in the report' END AS peak_source
FROM joined;

-- Matrix-like kernels and their tensor-core use, one row per kernel: matmul_like (from the demangled name),
-- tensor_pct, sm_pct, fp_pipe_pct (FMA/FP64 pipe when it is the busiest compute unit), cuda_core_tflops and
-- tensor_core_tflops (datasheet peaks: FP32 vs TF32 tensor, NULL for unknown GPUs), saving_fraction: the share of
-- the SM-bound time tensor cores would save, sm_pct/100 × (1 − cuda_core/tensor_core peak), or sm_pct/100 × 0.5
-- for an unknown GPU; impact_ns = saving_fraction × total_ns.
CREATE OR REPLACE TEMP VIEW ncu_tensor_use AS
WITH peaks AS (
    SELECT k.source_id, k.demangled_name, k.grid, k.block, arg_min(p, p.priority) AS p
    FROM ncu_kernel_sol k JOIN ncu_device_peaks p ON k.device_name ILIKE p.name_pattern
    GROUP BY ALL
)
SELECT k.source_id, k.rank, k.name, k.demangled_name, k.grid, k.block, k.launches, k.total_ns, k.total_ms,
       k.kernel_class, k.matmul_like, k.tensor_pct, k.sm_pct, k.compute_unit, k.compute_unit_pct, k.fp32_flop,
       peaks.p.fp32_tflops AS cuda_core_tflops, peaks.p.tf32_tensor_tflops AS tensor_core_tflops,
       k.sm_pct / 100.0 * coalesce(1.0 - peaks.p.fp32_tflops / peaks.p.tf32_tensor_tflops, 0.5) AS saving_fraction,
       k.sm_pct / 100.0 * coalesce(1.0 - peaks.p.fp32_tflops / peaks.p.tf32_tensor_tflops, 0.5) * k.total_ns
           AS impact_ns
FROM ncu_kernel_sol k
LEFT JOIN peaks USING (source_id, demangled_name, grid, block);

-- The report's roofline (ncu_roofline; TFLOP/s and GB/s). Columns: rank, kernel, demangled, grid, block,
-- precision, tflop_per_s, dram_gb_per_s, arithmetic_intensity, peak_tflop_per_s, peak_gb_per_s, ridge_point,
-- pct_of_roof, roof_side, peak_source; total_ns orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_roofline AS
SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, precision,
       flop_per_s / 1e12 AS tflop_per_s, dram_bytes_per_s / 1e9 AS dram_gb_per_s, arithmetic_intensity,
       peak_flop_per_s / 1e12 AS peak_tflop_per_s, peak_bytes_per_s / 1e9 AS peak_gb_per_s, ridge_point,
       pct_of_roof, roof_side, peak_source, total_ns
FROM ncu_roofline;
