-- efficiency.steps: MFU, HFU and MBU per rank and steady step, from the FLOP and byte model (efficiency.ops) and
-- the chip's peaks (efficiency.peaks).
--
--   step time        the GPU's span of the step: first start to last end of the work launched in it (trace.steps)
--                    (--step-time-ms: SET VARIABLE step_time_ms, the user's own step time, wins)
--   model FLOPs      Σ FLOPs of the step's ops, recomputation left out; --flops-per-step where the trace has no
--                    shapes (SET VARIABLE flops_per_step)
--   hardware FLOPs   the same with recomputation (activation checkpointing) counted
--   TFLOP/s          model FLOPs / step time;   MFU = TFLOP/s / peak;   HFU = hardware FLOPs / step time / peak
--   bytes            Σ bytes of the step's ops (efficiency.ops); --bytes-per-step overrides, and alone (a step
--                    in CUDA graphs, a trace without shapes) gives MBU without MFU
--   MBU              bytes / step time / peak HBM bandwidth
--   peak dtype       the dtype that carries most of the source's FLOPs picks the peak (bf16/fp16, fp8, tf32 where
--                    the fp32 products' kernels are TF32, else fp32); --peak-tflops overrides it
--   bound            'memory' when the step's arithmetic intensity (FLOPs per byte) is under the chip's ridge
--                    point (peak FLOP/s ÷ peak bytes/s): then MBU, not MFU, says how close it is (decode)
--   coverage         GPU time of ops with a FLOP or byte model, % of the GPU time of the work launched in the step
--                    (communication kernels aside: they do no FLOPs)
--   training         the step runs a backward pass (aten ops on the autograd thread: efficiency.ops)
--   workload         per rank: 'training' (a step with a backward pass), else 'decode' (memory-bound: each token
--                    reads every weight) or 'prefill' (compute-bound inference); it picks the headline's figure
--                    (MFU for training, whatever bounds it) and the advice of low-mfu and low-mbu
-- A figure that cannot be computed is NULL and ``note`` says why (no shapes, CUDA graphs, an unknown GPU).
-- include: efficiency.ops
-- include: efficiency.peaks

CREATE OR REPLACE TEMP TABLE efficiency_steps AS
WITH work AS (
    SELECT source_id, step, min(ts_ns) AS first_ns, max(end_ns) AS last_ns,
           sum(dur_ns) FILTER (WHERE category <> 'communication') AS work_ns,
           count(*) FILTER (WHERE kind = 'kernel') AS kernels
    FROM trace_step_work WHERE step IS NOT NULL GROUP BY source_id, step
),
ops AS (
    SELECT source_id, step, sum(flops) AS flops, sum(hw_flops) AS hw_flops, sum(bytes) AS bytes,
           coalesce(sum(gpu_ns) FILTER (WHERE kind IS NOT NULL), 0) AS modelled_ns
    FROM efficiency_op_costs WHERE step IS NOT NULL GROUP BY source_id, step
),
dtypes AS (
    SELECT source_id, arg_max(dtype, f) AS dtype
    FROM (SELECT source_id, dtype, sum(flops) AS f FROM efficiency_op_costs
          WHERE flops > 0 AND dtype IS NOT NULL GROUP BY ALL)
    GROUP BY source_id
),
graphs AS (
    SELECT source_id, count(*) AS launches FROM cpu_activity
    WHERE kind IN ('runtime', 'driver') AND name LIKE '%GraphLaunch%' GROUP BY source_id
),
shaped AS (SELECT DISTINCT source_id FROM op_shapes),
backward AS (
    SELECT DISTINCT c.source_id, c.step FROM efficiency_op_costs c JOIN efficiency_backward_threads USING (source_id, tid)
    WHERE c.step IS NOT NULL
),
steps AS (
    SELECT s.source_id, s.rank, s.step,
           CASE WHEN w.last_ns IS NOT NULL
                THEN coalesce(TRY_CAST(getvariable('step_time_ms') AS DOUBLE) * 1e6, w.last_ns - w.first_ns)
           END AS step_ns, coalesce(w.work_ns, 0) AS work_ns,
           o.modelled_ns,
           coalesce(TRY_CAST(getvariable('flops_per_step') AS DOUBLE), o.flops) AS model_flops,
           coalesce(TRY_CAST(getvariable('flops_per_step') AS DOUBLE), o.hw_flops) AS hardware_flops,
           coalesce(TRY_CAST(getvariable('bytes_per_step') AS DOUBLE), o.bytes) AS bytes,
           getvariable('flops_per_step') IS NOT NULL AS user_flops,
           coalesce(d.dtype, 'bf16') AS dtype, d.dtype IS NULL AS dtype_assumed,
           p.device_name, p.gpu, p.source AS peak_source, p.user_tflops, p.user_gbps, p.hbm_gbps,
           CASE coalesce(d.dtype, 'bf16') WHEN 'bf16' THEN p.bf16_tflops WHEN 'fp16' THEN p.bf16_tflops
                WHEN 'fp8' THEN p.fp8_tflops WHEN 'tf32' THEN p.tf32_tflops WHEN 'fp32' THEN p.fp32_tflops
                WHEN 'int8' THEN p.int8_tflops END AS table_tflops,
           coalesce(g.launches, 0) AS graph_launches, sh.source_id IS NOT NULL AS has_shapes,
           bw.source_id IS NOT NULL AS training
    FROM trace_steady_steps s
    LEFT JOIN work w USING (source_id, step)
    LEFT JOIN ops o USING (source_id, step)
    LEFT JOIN dtypes d USING (source_id)
    LEFT JOIN efficiency_peaks p USING (source_id)
    LEFT JOIN graphs g USING (source_id)
    LEFT JOIN shaped sh USING (source_id)
    LEFT JOIN backward bw USING (source_id, step)
),
judged AS (
    SELECT *, coalesce(user_tflops, table_tflops) AS peak_tflops, coalesce(user_gbps, hbm_gbps) AS peak_gbps,
           CASE WHEN step_ns IS NULL OR step_ns <= 0 THEN 'no GPU work in the step'
                WHEN model_flops IS NULL AND bytes IS NULL AND graph_launches > 0 AND NOT has_shapes
                    THEN 'the steps run in CUDA graphs: their operators and shapes are not in the trace (give '
                         || '--flops-per-step)'
                WHEN model_flops IS NULL AND bytes IS NULL
                    THEN 'the trace has no operator shapes (record with record_shapes=True, or give --flops-per-step)'
                -- only --bytes-per-step given (a step in CUDA graphs, a trace without shapes): MBU alone, on the
                -- bandwidth's peak
                WHEN (CASE WHEN model_flops IS NULL THEN coalesce(user_gbps, hbm_gbps)
                           ELSE coalesce(user_tflops, table_tflops) END) IS NULL AND device_name IS NULL
                    THEN 'the trace does not name its GPU (give --peak-tflops and --peak-gbps)'
                WHEN (CASE WHEN model_flops IS NULL THEN coalesce(user_gbps, hbm_gbps)
                           ELSE coalesce(user_tflops, table_tflops) END) IS NULL
                    THEN 'no peak known for ' || device_name || ' (give --peak-tflops and --peak-gbps)'
           END AS note
    FROM steps
)
SELECT source_id, rank, step, step_ns, model_flops, hardware_flops, bytes,
       model_flops / (step_ns / 1e9) / 1e12 AS achieved_tflops,
       bytes / (step_ns / 1e9) / 1e9 AS achieved_gbps,
       100.0 * model_flops / (step_ns / 1e9) / 1e12 / peak_tflops AS mfu_pct,
       CASE WHEN hardware_flops > model_flops * 1.001 THEN 100.0 * hardware_flops / (step_ns / 1e9) / 1e12 / peak_tflops
            END AS hfu_pct,
       100.0 * bytes / (step_ns / 1e9) / 1e9 / peak_gbps AS mbu_pct,
       CASE WHEN user_flops THEN NULL ELSE 100.0 * modelled_ns / nullif(work_ns, 0) END AS coverage_pct,
       work_ns, modelled_ns,
       CASE WHEN model_flops IS NULL OR bytes IS NULL OR peak_tflops IS NULL OR peak_gbps IS NULL THEN NULL
            WHEN model_flops / nullif(bytes, 0) < peak_tflops * 1e12 / (peak_gbps * 1e9) THEN 'memory'
            ELSE 'compute' END AS bound,
       device_name, coalesce(CASE WHEN user_tflops IS NOT NULL THEN coalesce(gpu, device_name) END, gpu) AS gpu,
       dtype, dtype_assumed, peak_tflops, peak_gbps,
       CASE WHEN user_tflops IS NOT NULL AND user_gbps IS NOT NULL THEN '--peak-tflops and --peak-gbps'
            WHEN user_tflops IS NOT NULL THEN '--peak-tflops; bandwidth: ' || coalesce(peak_source, 'unknown')
            WHEN user_gbps IS NOT NULL THEN '--peak-gbps; FLOP/s: ' || coalesce(peak_source, 'unknown')
            ELSE peak_source END AS peak_source,
       user_flops, note, training,
       CASE WHEN training THEN 'training' WHEN bound = 'memory' THEN 'decode' WHEN bound = 'compute' THEN 'prefill'
            END AS workload
FROM judged;

-- One row per source over its steady steps: Σ FLOPs and bytes over Σ step time (same columns as efficiency_steps,
-- ``steps`` counted, step NULL).
CREATE OR REPLACE TEMP TABLE efficiency_by_rank AS
SELECT source_id, any_value(rank) AS rank, count(*) AS steps, sum(step_ns) AS step_ns,
       sum(model_flops) AS model_flops, sum(hardware_flops) AS hardware_flops, sum(bytes) AS bytes,
       sum(model_flops) / (sum(step_ns) / 1e9) / 1e12 AS achieved_tflops,
       sum(bytes) / (sum(step_ns) / 1e9) / 1e9 AS achieved_gbps,
       100.0 * sum(model_flops) / (sum(step_ns) / 1e9) / 1e12 / any_value(peak_tflops) AS mfu_pct,
       CASE WHEN sum(hardware_flops) > sum(model_flops) * 1.001
            THEN 100.0 * sum(hardware_flops) / (sum(step_ns) / 1e9) / 1e12 / any_value(peak_tflops) END AS hfu_pct,
       100.0 * sum(bytes) / (sum(step_ns) / 1e9) / 1e9 / any_value(peak_gbps) AS mbu_pct,
       100.0 * sum(modelled_ns) / nullif(sum(work_ns), 0) AS coverage_pct,
       mode(bound ORDER BY bound) AS bound, any_value(device_name) AS device_name, any_value(gpu) AS gpu,
       any_value(dtype) AS dtype, any_value(peak_tflops) AS peak_tflops, any_value(peak_gbps) AS peak_gbps,
       any_value(peak_source) AS peak_source, any_value(note) AS note,
       CASE WHEN bool_or(training) THEN 'training' WHEN mode(bound ORDER BY bound) = 'memory' THEN 'decode'
            WHEN mode(bound ORDER BY bound) = 'compute' THEN 'prefill' END AS workload
FROM efficiency_steps GROUP BY source_id;
