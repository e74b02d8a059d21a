-- efficiency.findings: where each rank's steady steps lose time against the chip's peak, for low-mfu and
-- low-mbu. Every part is GPU time over the steady steps (ns), split by what the op does (efficiency.ops):
--   ideal_ns          the model's FLOPs at the peak (compute-bound) or its bytes at peak bandwidth (memory-bound)
--   gemm_loss_ns      Σ over products (mm, addmm, bmm, baddbmm, _scaled_mm, conv) of GPU time − FLOPs / peak
--   attention_loss_ns the same over attention ops
--   nonmatmul_ns      GPU time of ops that do no products: elementwise, norms, softmax, copies, losses
--   optimizer_ns      of which the optimizer's (_fused_adam(w)_, _foreach_*)
--   fp32_matmul_ns    GPU time of products in fp32 or TF32 (bf16 has 2 to 15 times their peak)
--   unmodelled_ns     GPU time of ops with no model, and of work launched outside any aten op
--   idle_ns           the step time without compute work: the GPU idle or only communicating
--   bandwidth_loss_ns Σ over ops of GPU time − bytes / peak bandwidth (memory-bound steps)
-- Savings (what a fix removes from the kernels' own time; the idle time is other rules'):
--   mfu_saving_ns     products brought to 70 % of their dtype's peak (their time above it: cuBLAS reaches 75 to 80 %
--                     on large bf16 products on H100 and H200), and half the non-product ops' time (fused into
--                     their neighbours, as torch.compile does)
--   mbu_saving_ns     ops brought to 80 % of peak bandwidth (their time above it: a large copy reaches 85 to 90 %)
--   Neither brings an op under its launches × the shortest kernel the GPU ran in the trace (launch_floor_ns: a
--   kernel's fixed cost; µs kernels far below their roofline cannot run shorter than that)
--   Both add autocast's weight casts (efficiency_weight_casts), which bf16 weights remove: weight_cast_step_ns and
--   weight_cast_step_bytes per step; the products' losses are measured without them.
-- The op mix of the ops that do no products, per step (what low-mbu's advice follows):
--   norm_step_ns        normalisation (batch, layer, group, RMS and instance norms, forward and backward)
--   layout_step_ns      layout: copies, casts and contiguous/permute/cat copies, and the NCHW↔NHWC transposes
--                       cuDNN runs inside convolutions whose activations are not channels_last
--   elementwise_step_ns the others: activations, adds, multiplies, dropout, losses, reductions
--   optimizer_step_ns   the optimizer (above)
--   op_mix              those four as text, largest first
--   mbu_fix_text        low-mbu's advice for the workload (efficiency.steps: training, prefill or decode) and the
--                       op mix: fusion and channels_last for a training step, CUDA graphs and batching for decode
--   mfu_fix_text        low-mfu's advice for what the step shows: padding where products have dims no multiple of
--                       64, fusion unless Inductor's kernels run most of the ops without products already, bf16
--                       where fp32 or TF32 products take 5 % of the step or more, a fused optimizer where most of its
--                       time is _foreach_ ops (a fused AdamW still counts its steps with one)
-- The named ops (worst_gemms, worst_ops): the op and shape that lose the most, with their TFLOP/s or GB/s and
-- the dims that are no multiple of 64 (tensor-core tiles: such dims leave tiles partly empty).
-- include: efficiency.operators

-- Autocast's weight casts: an fp32 tensor cast to bf16 or fp16 (aten::_to_copy, dtype 15 or 5) inside a product
-- (aten::linear, matmul, …: autocast casts a product's fp32 weight just before it) runs copy kernels that are no
-- part of the product: their GPU time is counted apart from the product's (the product's roofline is its own), as
-- one part of low-mfu and low-mbu. Columns: op_id (the product's top-level op), cast_ns (the casts' kernels),
-- cast_bytes (the fp32 read and the 16-bit copy written).
CREATE OR REPLACE TEMP TABLE efficiency_weight_casts AS
WITH casts AS (
    SELECT e.source_id, e.tid, e.ts_ns, e.end_ns, efficiency_numel(e.dims[1]) * 6 AS cast_bytes
    FROM efficiency_parsed_ops(name = 'aten::_to_copy' AND NOT top) e
    WHERE e.types[1] = 'float' AND len(e.dims[1]) = 2
      AND e.concrete[2] IN ('15', '5')
),
owned AS (
    SELECT t.op_id, c.* FROM casts c
    ASOF JOIN efficiency_top_ops t ON t.source_id = c.source_id AND t.tid = c.tid AND c.ts_ns >= t.ts_ns
    WHERE c.ts_ns < t.end_ns AND t.name IN ('aten::linear', 'aten::matmul', 'aten::mm', 'aten::addmm', 'aten::bmm',
                                            'aten::baddbmm', 'aten::einsum', 'aten::conv1d', 'aten::conv2d',
                                            'aten::conv3d', 'aten::convolution')
)
SELECT op_id, sum(cast_ns) AS cast_ns, sum(cast_bytes) AS cast_bytes
FROM (SELECT o.op_id, o.ts_ns, any_value(o.cast_bytes) AS cast_bytes, sum(l.dur_ns) AS cast_ns
      FROM owned o
      JOIN efficiency_launches l ON l.source_id = o.source_id AND l.tid = o.tid AND l.ts_ns >= o.ts_ns
                                AND l.ts_ns < o.end_ns
      GROUP BY o.op_id, o.ts_ns)
GROUP BY op_id;

-- Each op's losses over the steady steps, per name, shape, kind and dtype: its GPU time (a product's without the
-- weight casts above), FLOPs, bytes, the time above its FLOP and its byte roofline, TFLOP/s, GB/s, and the
-- dimensions of a product that are no multiple of 64.
CREATE OR REPLACE TEMP TABLE efficiency_op_losses AS
WITH steady AS (
    SELECT c.* REPLACE (c.gpu_ns - coalesce(w.cast_ns, 0) AS gpu_ns), st.peak_gbps, coalesce(
               CASE c.dtype WHEN 'fp32' THEN p.fp32_tflops WHEN 'tf32' THEN p.tf32_tflops WHEN 'fp8' THEN p.fp8_tflops
                            WHEN 'int8' THEN p.int8_tflops WHEN 'bf16' THEN p.bf16_tflops WHEN 'fp16' THEN p.bf16_tflops
                            END, st.peak_tflops) AS op_tflops
    FROM efficiency_op_costs c
    JOIN efficiency_steps st USING (source_id, step)
    LEFT JOIN efficiency_peaks p USING (source_id)
    LEFT JOIN efficiency_weight_casts w USING (op_id)
),
shortest AS (  -- the shortest kernel the GPU ran in the trace
    SELECT source_id, min(dur_ns) AS kernel_ns FROM efficiency_launches WHERE kind = 'kernel' AND dur_ns > 0
    GROUP BY source_id
)
SELECT source_id, name, shape, kind, dtype, count(*) AS n, sum(gpu_ns) AS gpu_ns, sum(flops) AS flops,
       coalesce(sum(kernels) * any_value(shortest.kernel_ns), 0) AS launch_floor_ns,
       sum(bytes) AS bytes, any_value(op_tflops) AS op_tflops, any_value(peak_gbps) AS peak_gbps,
       sum(gpu_ns) - coalesce(sum(flops) / (any_value(op_tflops) * 1e3), 0) AS flop_loss_ns,
       sum(gpu_ns) - coalesce(sum(bytes) / any_value(peak_gbps), 0) AS byte_loss_ns,
       sum(flops) / nullif(sum(gpu_ns), 0) / 1e3 AS tflops, sum(bytes) / nullif(sum(gpu_ns), 0) AS gbps,
       CASE WHEN kind = 'gemm' THEN list_sort(list_filter(list_distinct(TRY_CAST(regexp_extract_all(shape, '[0-9]+')
                                                                                 AS BIGINT[])),
                                                lambda x: x > 1 AND x % 64 <> 0)) ELSE [] END AS unaligned
FROM steady LEFT JOIN shortest USING (source_id) GROUP BY source_id, name, shape, kind, dtype;

-- One row per source over its steady steps, with the parts above as totals (…_ns) and per step (…_step_ns).
CREATE OR REPLACE TEMP TABLE efficiency_findings AS
SELECT *, ideal_ns / steps AS ideal_step_ns, gemm_loss_ns / steps AS gemm_loss_step_ns,
       attention_loss_ns / steps AS attention_loss_step_ns, nonmatmul_ns / steps AS nonmatmul_step_ns,
       optimizer_ns / steps AS optimizer_step_ns, nullif(fp32_matmul_ns, 0) / steps AS fp32_matmul_step_ns,
       idle_ns / steps AS idle_step_ns, bandwidth_loss_ns / steps AS bandwidth_loss_step_ns
FROM (
WITH parts AS (
    SELECT source_id,
           coalesce(sum(greatest(flop_loss_ns, 0)) FILTER (WHERE kind IN ('gemm', 'conv')), 0) AS gemm_loss_ns,
           coalesce(sum(greatest(flop_loss_ns, 0)) FILTER (WHERE kind = 'attention'), 0) AS attention_loss_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE kind IN ('memory', 'copy', 'optimizer')), 0) AS nonmatmul_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE kind = 'optimizer'), 0) AS optimizer_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE kind = 'optimizer' AND name NOT LIKE 'aten::\_fused\_%' ESCAPE '\'), 0)
               > 0.5 * coalesce(sum(gpu_ns) FILTER (WHERE kind = 'optimizer'), 0) AS unfused_optimizer,
           coalesce(sum(gpu_ns) FILTER (WHERE kind IN ('gemm', 'conv', 'attention') AND dtype IN ('fp32', 'tf32')), 0)
               AS fp32_matmul_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE kind IN ('gemm', 'conv', 'attention') AND dtype = 'fp32'), 0)
               AS fp32_only_matmul_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE kind IN ('memory', 'copy') AND name LIKE 'triton\_%' ESCAPE '\'), 0)
               AS compiled_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE kind IS NULL), 0) AS unmodelled_op_ns,
           coalesce(sum(greatest(byte_loss_ns, 0)), 0) AS bandwidth_loss_ns,
           coalesce(sum(greatest(gpu_ns - greatest(flops / (op_tflops * 1e3 * 0.7), launch_floor_ns), 0))
                        FILTER (WHERE kind IN ('gemm', 'conv', 'attention')), 0) AS matmul_saving_ns,
           coalesce(sum(greatest(gpu_ns - greatest(bytes / (peak_gbps * 0.8), launch_floor_ns), 0))
                        FILTER (WHERE bytes > 0), 0) AS mbu_saving_ns
    FROM efficiency_op_losses GROUP BY source_id
),
gemms AS (  -- the three products that lose the most, named with their shapes
    SELECT source_id, string_agg(name || ' ' || shape || ' (' || round(gpu_ns / 1e6, 1) || ' ms in ' || n || ' calls at '
                                 || CAST(round(tflops) AS BIGINT) || ' TFLOP/s, ' || CAST(round(100 * tflops / op_tflops) AS BIGINT) || ' % of '
                                 || dtype || ' peak'
                                 || CASE WHEN len(unaligned) > 0
                                         THEN '; ' || array_to_string(unaligned, ', ') || ' no multiple of 64' ELSE '' END
                                 || ')', '; ' ORDER BY flop_loss_ns DESC) AS worst_gemms,
           bool_or(len(unaligned) > 0) AS unaligned
    FROM (SELECT *, row_number() OVER (PARTITION BY source_id ORDER BY flop_loss_ns DESC) AS k
          FROM efficiency_op_losses WHERE kind IN ('gemm', 'conv', 'attention') AND flop_loss_ns > 0)
    WHERE k <= 3 GROUP BY source_id
),
nonmatmul AS (  -- the three non-product ops with the most GPU time, ms per step
    SELECT source_id, string_agg(name || ' (' || round(ns / 1e6, 2) || ' ms)', ', ' ORDER BY ns DESC) AS top_nonmatmul
    FROM (SELECT l.source_id, l.name, sum(l.gpu_ns) / any_value(r.steps) AS ns,
                 row_number() OVER (PARTITION BY l.source_id ORDER BY sum(l.gpu_ns) DESC) AS k
          FROM efficiency_op_losses l JOIN efficiency_by_rank r USING (source_id)
          WHERE l.kind IN ('memory', 'copy', 'optimizer') GROUP BY l.source_id, l.name)
    WHERE k <= 3 GROUP BY source_id
),
weight_casts AS (  -- autocast's weight casts over the steady steps
    SELECT c.source_id, sum(w.cast_ns) AS weight_cast_ns, sum(w.cast_bytes) AS weight_cast_bytes
    FROM efficiency_weight_casts w JOIN efficiency_op_costs c USING (op_id) JOIN efficiency_steps USING (source_id, step)
    GROUP BY c.source_id
),
mix AS (  -- the non-product ops' GPU time by what they do (the op mix above)
    SELECT source_id,
           coalesce(sum(gpu_ns) FILTER (WHERE class = 'normalisation'), 0) AS norm_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE class = 'layout'), 0) AS layout_op_ns,
           coalesce(sum(gpu_ns) FILTER (WHERE class = 'elementwise'), 0) AS elementwise_ns,
           bool_or(kind = 'conv') AS convs
    FROM (SELECT *, CASE WHEN kind NOT IN ('memory', 'copy') THEN NULL
                         WHEN regexp_matches(name, '(batch|layer|group|rms|instance)_norm') THEN 'normalisation'
                         WHEN kind = 'copy' OR regexp_matches(name, '^aten::(permute|transpose|contiguous|cat|stack|'
                                                                    || 'constant_pad_nd|pad|flip|roll)$')
                             THEN 'layout'
                         ELSE 'elementwise' END AS class
          FROM efficiency_op_losses)
    GROUP BY source_id
),
transposes AS (  -- the NCHW↔NHWC kernels cuDNN runs inside convolutions of activations not in channels_last
    SELECT c.source_id, sum(k.gpu_ns) AS transpose_ns
    FROM efficiency_op_kernels k JOIN efficiency_op_costs c USING (op_id) JOIN efficiency_steps USING (source_id, step)
    WHERE c.kind = 'conv' AND (k.kernel ILIKE '%nchwToNhwc%' OR k.kernel ILIKE '%nhwcToNchw%')
    GROUP BY c.source_id
),
slow_bw AS (  -- the three ops furthest below peak bandwidth
    SELECT source_id, string_agg(name || ' ' || shape || ' (' || round(gpu_ns / 1e6, 2) || ' ms in ' || n || ' calls at '
                                 || CAST(round(gbps) AS BIGINT) || ' GB/s, ' || CAST(round(100 * gbps / peak_gbps) AS BIGINT) || ' % of peak)',
                                 '; ' ORDER BY byte_loss_ns DESC) AS worst_ops
    FROM (SELECT *, row_number() OVER (PARTITION BY source_id ORDER BY byte_loss_ns DESC) AS k
          FROM efficiency_op_losses WHERE bytes > 0 AND byte_loss_ns > 0)
    WHERE k <= 3 GROUP BY source_id
)
SELECT r.source_id, r.rank, r.steps, r.step_ns / r.steps AS step_ns, r.mfu_pct, r.hfu_pct, r.mbu_pct,
       r.achieved_tflops, r.achieved_gbps, r.peak_tflops, r.peak_gbps, r.coverage_pct, r.bound, r.workload,
       coalesce(r.gpu, r.device_name) AS gpu, r.dtype,
       CASE WHEN r.bound = 'memory' THEN r.bytes / r.peak_gbps ELSE r.model_flops / (r.peak_tflops * 1e3) END
           AS ideal_ns,
       p.gemm_loss_ns, p.attention_loss_ns, p.nonmatmul_ns, p.optimizer_ns, p.fp32_matmul_ns,
       p.unmodelled_op_ns + greatest(sum_work.work_ns - sum_work.modelled_ns - p.unmodelled_op_ns, 0) AS unmodelled_ns,
       greatest(r.step_ns - sum_work.work_ns, 0) AS idle_ns, p.bandwidth_loss_ns,
       p.matmul_saving_ns + p.nonmatmul_ns * 0.5 + coalesce(wc.weight_cast_ns, 0) AS mfu_saving_ns,
       p.mbu_saving_ns + coalesce(wc.weight_cast_ns, 0) AS mbu_saving_ns,
       nullif(wc.weight_cast_ns, 0) / r.steps AS weight_cast_step_ns,
       CASE WHEN wc.weight_cast_ns > 0 THEN wc.weight_cast_bytes / r.steps END AS weight_cast_step_bytes,
       g.worst_gemms, coalesce(g.unaligned, false) AS unaligned_gemms, n.top_nonmatmul,
       b.worst_ops,
       m.norm_ns / r.steps AS norm_step_ns, m.elementwise_ns / r.steps AS elementwise_step_ns,
       (m.layout_op_ns + coalesce(tr.transpose_ns, 0)) / r.steps AS layout_step_ns,
       nullif(array_to_string(list_transform(
           list_filter(list_sort([{'ms': m.norm_ns / r.steps / 1e6, 'what': 'normalisation'},
                                  {'ms': m.elementwise_ns / r.steps / 1e6, 'what': 'elementwise'},
                                  {'ms': (m.layout_op_ns + coalesce(tr.transpose_ns, 0)) / r.steps / 1e6,
                                   'what': 'layout (copies, casts, transposes)'},
                                  {'ms': p.optimizer_ns / r.steps / 1e6, 'what': 'optimizer'}], 'DESC'),
                       lambda x: x.ms >= 0.005),
           lambda x: x.what || ' ' || round(x.ms, 2) || ' ms'), ', '), '') AS op_mix,
       CASE WHEN r.workload = 'decode' THEN
                'Keep the GPU fed: capture the decode step in a CUDA graph (torch.compile(mode="reduce-overhead")) '
                || 'so launches stop leaving it idle, fuse the small elementwise and norm ops, and batch more '
                || 'sequences per step so each weight read serves more tokens.'
            WHEN r.workload = 'prefill' THEN
                'Fuse the elementwise and normalisation ops into their neighbours (torch.compile), and run more '
                || 'tokens per step (a larger batch or longer prompts) so each weight read serves more of them.'
            ELSE array_to_string(list_filter([
                CASE WHEN m.norm_ns + m.elementwise_ns >= 0.2 * p.nonmatmul_ns THEN
                    'Fuse the normalisation and elementwise ops into the products around them: torch.compile(model) '
                    || 'fuses them (and their backward) into a few kernels'
                    || CASE WHEN m.convs THEN ', and folds batch norm into fewer passes' ELSE '' END END,
                CASE WHEN wc.weight_cast_ns > 0 THEN
                    'Stop casting the fp32 weights to bf16 every step: keep the weights in bf16 (fp32 master weights '
                    || 'in the optimizer), or let torch.compile fuse the cast into the products' END,
                CASE WHEN m.convs THEN
                    'Keep the convolutions'' activations in channels_last (model.to(memory_format=torch.channels_last) '
                    || 'and the inputs too): cuDNN''s fastest bf16 kernels are NHWC, and an NCHW tensor costs a '
                    || 'transpose each way' END,
                CASE WHEN m.layout_op_ns >= 0.2 * p.nonmatmul_ns THEN
                    'Cut the layout copies (.contiguous(), permutes, casts): keep tensors in the layout and dtype their '
                    || 'consumer wants' END,
                CASE WHEN p.optimizer_ns >= 0.2 * p.nonmatmul_ns AND p.unfused_optimizer THEN
                    'Fuse the optimizer (AdamW(fused=True): one kernel for all the parameters) or step it less often '
                    || 'per sample (a larger batch)'
                     WHEN p.optimizer_ns >= 0.2 * p.nonmatmul_ns THEN
                    'Step the optimizer less often per sample (a larger batch): it is fused already' END,
                'A larger batch per GPU raises the FLOPs per byte of every op'], lambda x: x IS NOT NULL), '. ')
                || '.'
       END AS mbu_fix_text,
       array_to_string(list_filter([
           CASE WHEN g.unaligned THEN
               'Pad or choose the products'' dimensions to multiples of 64 (a vocabulary of 50257 → 50304), and '
               || 'batch small products into larger ones' END,
           CASE WHEN p.compiled_ns < 0.5 * p.nonmatmul_ns THEN
               'Fuse the elementwise, norm and loss ops into their neighbours (torch.compile, fused kernels such as a '
               || 'fused cross-entropy or RMSNorm)'
           ELSE 'The step is compiled, and Inductor fuses the ops that do no products already: what it leaves '
                || 'outside its kernels (the ops named above) and the products'' shapes are what is left to improve'
           END,
           CASE WHEN p.fp32_matmul_ns >= 0.05 * r.step_ns AND p.fp32_only_matmul_ns > 0 THEN
               'Run the fp32 products in bf16 (or TF32: torch.backends.cuda.matmul.allow_tf32)'
                WHEN p.fp32_matmul_ns >= 0.05 * r.step_ns THEN 'Run the TF32 products in bf16' END,
           CASE WHEN p.unfused_optimizer THEN
               'Fuse the optimizer (AdamW(fused=True): one kernel for all the parameters)' END],
           lambda x: x IS NOT NULL), '. ') || '.' AS mfu_fix_text
FROM efficiency_by_rank r
JOIN parts p USING (source_id)
JOIN (SELECT source_id, sum(work_ns) AS work_ns, sum(modelled_ns) AS modelled_ns FROM efficiency_steps
      GROUP BY source_id) sum_work USING (source_id)
LEFT JOIN gemms g USING (source_id)
LEFT JOIN nonmatmul n USING (source_id)
LEFT JOIN slow_bw b USING (source_id)
LEFT JOIN mix m USING (source_id)
LEFT JOIN transposes tr USING (source_id)
LEFT JOIN weight_casts wc USING (source_id)
WHERE r.note IS NULL
);
