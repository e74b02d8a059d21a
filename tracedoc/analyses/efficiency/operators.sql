-- efficiency.operators: the operator view — each top-level aten op (efficiency.ops) over the steady steps, per rank:
-- how often it ran, its host time, the GPU time of the kernels it launched, its FLOPs and bytes, and how close
-- that GPU time is to the op's roofline.
--   tflops        FLOPs / GPU time;   gbps: bytes / GPU time;   intensity: FLOPs per byte
--   roofline_pct  the roofline's time for its work, max(FLOPs / peak FLOP/s, bytes / peak bytes/s), % of its GPU
--                 time (peaks of efficiency.steps: the dtype of the op's own FLOPs for a product)
-- include: efficiency.steps

-- One row per rank and op name: source_id, rank, op, count, cpu_ns, gpu_ns, flops, bytes, tflops, gbps,
-- intensity, roofline_pct, kind, dtype, shape (the shape that took most GPU time), shape_gpu_ns (its GPU time),
-- shape_count, share_pct (of the steps' GPU work).
CREATE OR REPLACE TEMP TABLE efficiency_operators AS
WITH steady AS (
    SELECT c.* FROM efficiency_op_costs c JOIN trace_steady_steps s USING (source_id, step)
),
peaks AS (
    SELECT source_id, any_value(peak_gbps) AS peak_gbps, any_value(peak_tflops) AS step_tflops,
           sum(work_ns) AS work_ns
    FROM efficiency_steps GROUP BY source_id
),
shapes AS (
    SELECT source_id, name, shape, count(*) AS n, sum(gpu_ns) AS gpu_ns FROM steady GROUP BY ALL
),
ops AS (
    SELECT o.source_id, any_value(o.rank) AS rank, o.name AS op, count(*) AS count, sum(o.cpu_ns) AS cpu_ns,
           sum(o.gpu_ns) AS gpu_ns, sum(o.flops) AS flops, sum(o.bytes) AS bytes,
           mode(o.kind ORDER BY o.kind) AS kind,  -- ties to the first by name: the same on every run
           mode(o.dtype ORDER BY o.dtype) AS dtype
    FROM steady o GROUP BY o.source_id, o.name
)
SELECT o.source_id, o.rank, o.op, o.count, o.cpu_ns, o.gpu_ns, o.flops, o.bytes,
       o.flops / nullif(o.gpu_ns, 0) / 1e3 AS tflops,
       o.bytes / nullif(o.gpu_ns, 0) AS gbps,
       o.flops / nullif(o.bytes, 0) AS intensity,
       100.0 * greatest(coalesce(o.flops / 1e12 / nullif(
                   CASE o.dtype WHEN 'fp32' THEN p.fp32_tflops WHEN 'tf32' THEN p.tf32_tflops
                        WHEN 'fp8' THEN p.fp8_tflops WHEN 'int8' THEN p.int8_tflops
                        ELSE coalesce(p.bf16_tflops, pk.step_tflops) END, 0), 0),
                        coalesce(o.bytes / 1e9 / nullif(pk.peak_gbps, 0), 0))
             / nullif(o.gpu_ns / 1e9, 0) AS roofline_pct,
       o.kind, o.dtype, sh.shape, sh.shape_gpu_ns, sh.shape_count,
       100.0 * o.gpu_ns / nullif(pk.work_ns, 0) AS share_pct
FROM ops o
LEFT JOIN efficiency_peaks p USING (source_id)
LEFT JOIN peaks pk USING (source_id)
LEFT JOIN (SELECT source_id, name AS op, arg_max(shape, gpu_ns) AS shape, max(gpu_ns) AS shape_gpu_ns,
                  arg_max(n, gpu_ns) AS shape_count
           FROM shapes GROUP BY ALL) sh USING (source_id, op);

-- The kernels each op launched in the steady steps: source_id, op, kernel, launches, gpu_ns.
CREATE OR REPLACE TEMP TABLE efficiency_operator_kernels AS
SELECT c.source_id, c.name AS op, k.kernel, sum(k.launches) AS launches, sum(k.gpu_ns) AS gpu_ns
FROM efficiency_op_kernels k
JOIN efficiency_op_costs c USING (op_id)
JOIN trace_steady_steps s USING (source_id, step)
GROUP BY ALL;
