-- efficiency.ops: FLOPs and bytes of every operator, from the input shapes and dtypes a PyTorch trace recorded
-- (record_shapes=True: op_shapes), and the GPU time of the kernels each one launched. Measured on the sources
-- that recorded shapes; all others have no rows here.
--
-- Operators are the aten ops on the host (cpu_activity kind 'op', 'aten::…') and torch.compile's Triton kernels
-- (the profiler records each launch as an op named after the kernel, 'triton_poi_…', 'triton_red_…', with its
-- arguments' shapes and dtypes). The top-level op is an aten op no
-- other aten op on its thread encloses (aten::linear, not the aten::addmm inside it; in backward, the aten::mm an
-- autograd node runs): the operator view counts those. Its GPU time is the duration of every kernel, copy and
-- memset launched while it ran on its thread (nested ops included).
--
-- FLOPs follow torch.utils.flop_counter (FlopCounterMode), counted once at the outermost op of this set that
-- runs (aten::_scaled_dot_product_cudnn_attention, not the aten::_cudnn_attention_forward inside it):
--   mm, _scaled_mm  A[m,k]·B[k,n]                      2·m·k·n         (bias, α, β and the scales not counted)
--   addmm           bias, A[m,k], B[k,n]                2·m·k·n
--   bmm             A[b,m,k]·B[b,k,n]                   2·b·m·k·n
--   baddbmm         bias, A[b,m,k], B[b,k,n]            2·b·m·k·n
--   convolution     x[N,Cin,*S], w[Cout,Cin/g,*K]       2·N·Cout·(Cin/g)·∏K·∏S_out, S_out from stride, padding
--                   (aten::convolution, _convolution,   and dilation (Concrete Inputs); transposed: ∏S_in
--                   cudnn_convolution)
--   convolution_backward  grad_out[N,Cout,*S_out], x, w: the forward's FLOPs once for grad_input and once for
--                   grad_weight (output_mask from Concrete Inputs; both when absent)
--   attention fwd   q[b,h,s_q,d], k[b,h,s_k,d], v[b,h,s_k,d_v]   2·b·h·s_q·s_k·(d + d_v)   (QKᵀ and PV)
--   attention bwd   the same shapes                                2·b·h·s_q·s_k·(3·d + 2·d_v) (5 products: QKᵀ
--                   recomputed, dV, dP, dQ, dK)
-- for the SDPA flash, efficient and cuDNN ops ([b,h,s,d]) and _flash_attention_* / _efficient_attention_*
-- ([b,s,h,d]). A causal mask is not discounted (flop_counter's and torchtitan's convention: the model's FLOPs,
-- not the kernel's). Softmax, bias adds and scaling are not counted.
--
-- Bytes (the least the op must move through device memory: each input read once, each output written once):
--   GEMMs           (m·k + k·n + m·n)·itemsize (+ the bias);   attention: q, k, v and out (backward: grad_out,
--                   q, k, v, out read; dq, dk, dv written)
--   copies, casts   (copy_, to, _to_copy, clone, contiguous): the source read and written again
--   embedding       index_select, embedding: the rows gathered, read and written, and the indices
--   reductions      (sum, mean, max, argmax, norm, nll_loss, …): the inputs
--   in-place ops    (a trailing '_'): the inputs, and the first written back
--   other ops       the inputs, and an output the size of the largest
--   Triton kernels  (triton_poi_, _red_, _per_: pointwise and reductions Inductor fused) each tensor argument
--                   once: their arguments are their inputs and outputs; no FLOPs (they do no products)
--   Triton GEMM templates (triton_tem_ whose name holds the product it runs: _mm_, _addmm_, _bmm_, _baddbmm_;
--                   max-autotune's winners): A and B are the first two tensor arguments (after the bias of addmm
--                   and baddbmm), the output C[(b,) m, n] the last, whatever views they come as, so
--                   k = √(|A|·|B| / (|C|·b)) and FLOPs = 2·|C|·k; bytes: each tensor argument once. Other
--                   templates (flex attention) have no model
--   _fused_adam(w)_ and the optimizer's _foreach_* ops whose tensor lists the profiler left out (it records no
--                   shapes for long lists): the parameters' bytes (from the AccumulateGrad ops of backward) times
--                   7 (param, grad, exp_avg, exp_avg_sq read; param, exp_avg, exp_avg_sq written) for Adam(W);
--                   a _foreach_ op with its lists recorded: its lists, as an in-place op
-- The dtype of an op's FLOPs is its first tensor input's (fp32 counts as tf32 where its kernels' names say tf32).
-- A FLOP op on the autograd thread that is a forward op (addmm, an attention forward, a forward convolution, or
-- a product inside aten::linear/matmul) recomputes the forward (activation checkpointing): it counts in the
-- hardware's FLOPs, not the model's.
-- include: trace.steps

-- Bytes per element of a profiler "Input type" ('c10::BFloat16' → 2); NULL for what is no tensor.
CREATE OR REPLACE TEMP MACRO efficiency_itemsize(t) AS CASE
    WHEN t IN ('double', 'long int', 'long', 'c10::complex<float>') THEN 8
    WHEN t = 'c10::complex<double>' THEN 16
    WHEN t IN ('float', 'int', 'unsigned int') THEN 4
    WHEN t IN ('c10::Half', 'c10::BFloat16', 'short int', 'short') THEN 2
    WHEN t IN ('bool', 'unsigned char', 'signed char', 'char') OR t LIKE 'c10::Float8%' THEN 1 END;

-- The dtype label of a profiler "Input type": bf16, fp16, fp32, fp8, fp64, int8; NULL for others.
CREATE OR REPLACE TEMP MACRO efficiency_dtype(t) AS CASE
    WHEN t = 'c10::BFloat16' THEN 'bf16' WHEN t = 'c10::Half' THEN 'fp16' WHEN t = 'float' THEN 'fp32'
    WHEN t LIKE 'c10::Float8%' THEN 'fp8' WHEN t = 'double' THEN 'fp64'
    WHEN t IN ('signed char', 'unsigned char') THEN 'int8' END;

-- Elements of a shape (a scalar tensor's [] holds one).
CREATE OR REPLACE TEMP MACRO efficiency_numel(s) AS coalesce(list_product(s), 1.0);

-- Every aten op of the sources with shapes: source_id, rank, tid, name, ts_ns, dur_ns, end_ns, its op_shapes row's
-- input_dims, input_types and concrete_inputs as recorded (JSON text), top (no aten op on its thread encloses it).
-- The JSON is parsed where an op is read (efficiency_parsed_ops): most ops are nested and never are, and parsing
-- every op's took 0.3 of the 0.5 CPU-s of this table on a 100 MB trace with shapes.
CREATE OR REPLACE TEMP TABLE efficiency_op_events AS
WITH ops AS (
    SELECT c.source_id, c.rank, c.tid, c.name, c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns AS end_ns, c.external_id
    FROM cpu_activity c
    WHERE c.kind = 'op' AND (c.name LIKE 'aten::%' OR c.name LIKE 'triton\_%' ESCAPE '\')
      AND c.source_id IN (SELECT DISTINCT source_id FROM op_shapes)
)
SELECT o.source_id, o.rank, o.tid, o.name, o.ts_ns, o.dur_ns, o.end_ns, s.input_dims, s.input_types,
       s.concrete_inputs,
       o.ts_ns >= coalesce(max(o.end_ns) OVER (PARTITION BY o.source_id, o.tid ORDER BY o.ts_ns, o.dur_ns DESC
                                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1) AS top
FROM ops o
LEFT JOIN op_shapes s ON s.source_id = o.source_id AND s.external_id = o.external_id AND s.name = o.name
                     AND s.ts_ns = o.ts_ns;

-- The ops above that ``keep`` holds for (an expression over efficiency_op_events' columns), with their inputs
-- parsed: source_id, rank, tid, name, ts_ns, dur_ns, end_ns, dims (each input's shape, BIGINT[]; NULL for a tensor
-- list), lists (each input's shapes as a tensor list), types, concrete, top. The rows are kept before the JSON is
-- parsed (behind a view DuckDB parsed every row: it computes the parse that dims and lists share before filtering).
CREATE OR REPLACE TEMP MACRO efficiency_parsed_ops(keep) AS TABLE
SELECT source_id, rank, tid, name, ts_ns, dur_ns, end_ns,
       list_transform(from_json(input_dims, '["json"]'), lambda x: TRY_CAST(x AS BIGINT[])) AS dims,
       list_transform(from_json(input_dims, '["json"]'), lambda x: TRY_CAST(x AS BIGINT[][])) AS lists,
       from_json(input_types, '["varchar"]') AS types,
       from_json(concrete_inputs, '["varchar"]') AS concrete, top
FROM efficiency_op_events WHERE keep;

-- The top-level ops, numbered: op_id, source_id, rank, tid, name, ts_ns, dur_ns, end_ns, dims, lists, types,
-- concrete, step (the step whose host span it started in; NULL outside every step).
CREATE OR REPLACE TEMP TABLE efficiency_top_ops AS
SELECT row_number() OVER (ORDER BY e.source_id, e.tid, e.ts_ns) AS op_id, e.* EXCLUDE (top),
       CASE WHEN e.ts_ns < st.ts_ns + st.dur_ns THEN st.step END AS step
FROM efficiency_parsed_ops(top) e
ASOF LEFT JOIN trace_steps st ON st.source_id = e.source_id AND e.ts_ns >= st.ts_ns;

-- The launches of GPU work (kernels, copies, memsets) of those sources: source_id, tid, ts_ns (the launch on the
-- host), name, kind, dur_ns (its time on the GPU).
CREATE OR REPLACE TEMP TABLE efficiency_launches AS
SELECT c.source_id, c.tid, c.ts_ns, g.name, g.kind, g.dur_ns
FROM cpu_activity c
JOIN gpu_activity g ON g.source_id = c.source_id AND g.correlation_id = c.correlation_id
WHERE c.kind IN ('runtime', 'driver') AND c.correlation_id IS NOT NULL AND g.kind IN ('kernel', 'memcpy', 'memset')
  AND c.source_id IN (SELECT DISTINCT source_id FROM op_shapes);

-- GPU work per top-level op: op_id, kernel (name), kind, launches, gpu_ns (Σ duration).
CREATE OR REPLACE TEMP TABLE efficiency_op_kernels AS
SELECT t.op_id, l.name AS kernel, l.kind, count(*) AS launches, sum(l.dur_ns) AS gpu_ns
FROM efficiency_launches l
ASOF JOIN efficiency_top_ops t ON t.source_id = l.source_id AND t.tid = l.tid AND l.ts_ns >= t.ts_ns
WHERE l.ts_ns < t.end_ns
GROUP BY ALL;

-- The threads that run backward (autograd nodes ran there): source_id, tid.
CREATE OR REPLACE TEMP TABLE efficiency_backward_threads AS
SELECT DISTINCT source_id, tid FROM cpu_activity
WHERE kind = 'op' AND (name LIKE '%Backward0' OR name LIKE '%Backward1' OR name LIKE 'autograd::engine::%')
  AND source_id IN (SELECT DISTINCT source_id FROM op_shapes);

-- The FLOP ops: the outermost op of the modelled set on its thread, with its FLOPs, bytes and dtype. Columns:
-- source_id, tid, name, ts_ns, end_ns, op_id (its top-level op), flops, bytes, dtype, kind ('gemm' | 'attention' |
-- 'conv'), recompute (a forward op run again in backward), shape (its inputs' shapes, as text).
CREATE OR REPLACE TEMP TABLE efficiency_flop_ops AS
WITH modelled AS (
    SELECT e.*, e.ts_ns >= coalesce(max(e.end_ns) OVER (PARTITION BY e.source_id, e.tid ORDER BY e.ts_ns, e.dur_ns DESC
                                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1) AS outer_op
    FROM efficiency_parsed_ops(regexp_matches(name, '^triton_tem_.*_(mm|addmm|bmm|baddbmm)(_|$)')
       OR name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::_scaled_mm',
                     'aten::convolution', 'aten::_convolution', 'aten::cudnn_convolution',
                     'aten::convolution_backward',
                     'aten::_scaled_dot_product_flash_attention', 'aten::_scaled_dot_product_efficient_attention',
                     'aten::_scaled_dot_product_cudnn_attention', 'aten::_flash_attention_forward',
                     'aten::_efficient_attention_forward',
                     'aten::_scaled_dot_product_flash_attention_backward',
                     'aten::_scaled_dot_product_efficient_attention_backward',
                     'aten::_scaled_dot_product_cudnn_attention_backward', 'aten::_flash_attention_backward',
                     'aten::_efficient_attention_backward')) e
),
shaped AS (
    SELECT m.*, dims[1] AS a, dims[2] AS b, dims[3] AS c, dims[4] AS d,
           efficiency_itemsize(types[1]) AS isz, types[1] AS t0,
           -- attention shapes as (batch, heads, s_q, s_k, d_qk, d_v): [b,h,s,d] for SDPA, [b,s,h,d] otherwise
           m.name LIKE '%backward' AS bwd,
           m.name LIKE 'aten::_scaled_dot_product%' AS bhsd,
           -- a Triton GEMM template's tensor arguments: (bias,) A, B, ..., C
           m.name LIKE 'triton\_tem\_%' ESCAPE '\' AS template,
           list_filter(m.dims, lambda x: len(x) > 0) AS tensors,
           CASE WHEN regexp_matches(m.name, '_(addmm|baddbmm)(_|$)') THEN 1 ELSE 0 END AS bias_args
    FROM modelled m WHERE outer_op
),
attn AS (
    SELECT s.*,
           CASE WHEN bwd THEN b ELSE a END AS q, CASE WHEN bwd THEN c ELSE b END AS k,
           CASE WHEN bwd THEN d ELSE c END AS v
    FROM shaped s
),
formulas AS (
    SELECT *,
        CASE
            WHEN template AND len(tensors) >= 3 + bias_args THEN
                2.0 * efficiency_numel(tensors[-1])
                    * round(sqrt(efficiency_numel(tensors[1 + bias_args]) * efficiency_numel(tensors[2 + bias_args])
                                 / (efficiency_numel(tensors[-1])
                                    * CASE WHEN regexp_matches(name, '_b(addb)?mm(_|$)') THEN tensors[-1][1]
                                           ELSE 1 END)))
            WHEN name IN ('aten::mm', 'aten::_scaled_mm') AND len(a) = 2 AND len(b) = 2 THEN 2.0 * a[1] * a[2] * b[2]
            WHEN name = 'aten::addmm' AND len(b) = 2 AND len(c) = 2 THEN 2.0 * b[1] * b[2] * c[2]
            WHEN name = 'aten::bmm' AND len(a) = 3 AND len(b) = 3 THEN 2.0 * a[1] * a[2] * a[3] * b[3]
            WHEN name = 'aten::baddbmm' AND len(b) = 3 AND len(c) = 3 THEN 2.0 * b[1] * b[2] * b[3] * c[3]
            WHEN name LIKE '%attention%' AND len(q) = 4 AND len(k) = 4 AND len(v) = 4 THEN
                2.0 * q[1] * (CASE WHEN bhsd THEN q[2] * q[3] * k[3] ELSE q[3] * q[2] * k[2] END)
                    * (CASE WHEN bwd THEN 3 * q[4] + 2 * v[4] ELSE q[4] + v[4] END)
            WHEN name = 'aten::convolution_backward' AND len(a) >= 3 AND len(c) = len(a) THEN
                -- grad_out a = [N, Cout, *S_out], weight c = [Cout, Cin/g, *K]
                2.0 * a[1] * c[1] * c[2] * list_product(c[3:]) * list_product(a[3:])
                    * (CASE WHEN concrete IS NULL OR len(concrete) < 11 OR concrete[11] NOT LIKE '[%' THEN 2
                            ELSE (CASE WHEN concrete[11] ILIKE '[true%' OR concrete[11] ILIKE '[1%' THEN 1 ELSE 0 END)
                                 + (CASE WHEN split_part(concrete[11], ',', 2) ILIKE '%true%'
                                           OR trim(split_part(concrete[11], ',', 2)) = '1' THEN 1 ELSE 0 END) END)
            WHEN name IN ('aten::convolution', 'aten::_convolution') AND len(a) >= 3 AND len(b) = len(a)
                 AND len(concrete) >= 9 THEN
                2.0 * a[1] * b[1] * b[2] * list_product(b[3:])
                    * list_product(CASE WHEN lower(concrete[7]) IN ('true', '1') THEN a[3:]
                                   ELSE list_transform(a[3:], lambda x, i:
                                       (x + 2 * TRY_CAST(from_json(concrete[5], '["varchar"]')[i] AS BIGINT)
                                        - TRY_CAST(from_json(concrete[6], '["varchar"]')[i] AS BIGINT) * (b[2 + i] - 1) - 1)
                                       // TRY_CAST(from_json(concrete[4], '["varchar"]')[i] AS BIGINT) + 1) END)
            WHEN name = 'aten::cudnn_convolution' AND len(a) >= 3 AND len(b) = len(a) AND len(concrete) >= 6 THEN
                -- (input, weight, padding, stride, dilation, groups, ...)
                2.0 * a[1] * b[1] * b[2] * list_product(b[3:])
                    * list_product(list_transform(a[3:], lambda x, i:
                        (x + 2 * TRY_CAST(from_json(concrete[3], '["varchar"]')[i] AS BIGINT)
                         - TRY_CAST(from_json(concrete[5], '["varchar"]')[i] AS BIGINT) * (b[2 + i] - 1) - 1)
                        // TRY_CAST(from_json(concrete[4], '["varchar"]')[i] AS BIGINT) + 1))
        END AS flops,
        CASE
            WHEN template THEN list_sum(list_filter(list_transform(dims, lambda x, i: CASE WHEN len(x) > 0 THEN
                                   efficiency_numel(x) * efficiency_itemsize(types[i]) END), lambda y: y IS NOT NULL))
            WHEN name IN ('aten::mm', 'aten::_scaled_mm') THEN (a[1] * a[2] + b[1] * b[2] + a[1] * b[2]) * isz
            WHEN name = 'aten::addmm' THEN (b[1] * b[2] + c[1] * c[2] + b[1] * c[2] + efficiency_numel(a)) * isz
            WHEN name = 'aten::bmm' THEN (a[1] * a[2] * a[3] + b[1] * b[2] * b[3] + a[1] * a[2] * b[3]) * isz
            WHEN name = 'aten::baddbmm' THEN
                (b[1] * b[2] * b[3] + c[1] * c[2] * c[3] + b[1] * b[2] * c[3] + efficiency_numel(a)) * isz
            WHEN name LIKE '%attention%' THEN
                (CASE WHEN bwd THEN 2 * (efficiency_numel(q) + efficiency_numel(k) + efficiency_numel(v))
                                    + efficiency_numel(a) + efficiency_numel(q) / q[4] * v[4]
                      ELSE efficiency_numel(q) + efficiency_numel(k) + efficiency_numel(v)
                           + efficiency_numel(q) / q[4] * v[4] END) * efficiency_itemsize(types[CASE WHEN bwd THEN 2 ELSE 1 END])
            WHEN name LIKE '%conv%' THEN
                (efficiency_numel(a) + efficiency_numel(b) + coalesce(efficiency_numel(c), 0)) * 2 * isz
        END AS bytes,
        CASE WHEN name LIKE '%attention%' THEN 'attention' WHEN name LIKE '%conv%' THEN 'conv' ELSE 'gemm' END AS kind
    FROM attn
)
SELECT f.source_id, f.tid, f.name, f.ts_ns, f.end_ns, t.op_id, f.flops, f.bytes,
       efficiency_dtype(CASE WHEN f.name LIKE '%attention%backward' THEN f.types[2] ELSE f.types[1] END) AS dtype,
       f.kind,
       bt.tid IS NOT NULL AND (f.name IN ('aten::addmm', 'aten::baddbmm', 'aten::convolution', 'aten::_convolution',
                                          'aten::cudnn_convolution')
                               OR (f.kind = 'attention' AND NOT f.bwd)
                               OR t.name IN ('aten::linear', 'aten::matmul', 'aten::einsum')) AS recompute,
       array_to_string(list_transform(list_filter(f.dims, lambda x: len(x) > 0),
                                      lambda x: array_to_string(x, '×')), ' · ') AS shape
FROM formulas f
ASOF JOIN efficiency_top_ops t ON t.source_id = f.source_id AND t.tid = f.tid AND f.ts_ns >= t.ts_ns
LEFT JOIN efficiency_backward_threads bt ON bt.source_id = f.source_id AND bt.tid = f.tid;

-- (An UPDATE, not a view:) a FLOP op that launched no GPU work did no FLOPs on the GPU (a recomputation that checkpointing stopped early
-- starts its last product and raises before the kernel): its FLOPs count neither in the model's nor the hardware's.
-- The first launch at or after the op's start is found by an ASOF join: the op launched work when it comes before the
-- op's end (a correlated range test ran as a nested loop: 1.9 s CPU on a 200 MB trace, against under 0.05 s).
UPDATE efficiency_flop_ops SET flops = 0, bytes = 0
WHERE rowid NOT IN (SELECT f.rowid FROM efficiency_flop_ops f
                    ASOF JOIN efficiency_launches l ON l.source_id = f.source_id AND l.tid = f.tid AND l.ts_ns >= f.ts_ns
                    WHERE l.ts_ns < f.end_ns);

-- The parameters' bytes per source and step (the AccumulateGrad ops of backward: one per parameter gradient):
-- what an optimizer step reads per state tensor. Columns: source_id, step, param_bytes, dtype.
CREATE OR REPLACE TEMP TABLE efficiency_params AS
SELECT c.source_id, st.step,
       sum(efficiency_numel(TRY_CAST(json_extract(s.input_dims, '$[0]') AS BIGINT[]))
           * efficiency_itemsize(json_extract_string(s.input_types, '$[0]'))) AS param_bytes,
       mode(json_extract_string(s.input_types, '$[0]')
            ORDER BY json_extract_string(s.input_types, '$[0]')) AS dtype
FROM op_shapes s
JOIN cpu_activity c ON c.source_id = s.source_id AND c.external_id = s.external_id AND c.ts_ns = s.ts_ns
                   AND c.name = s.name AND c.kind = 'op'
ASOF JOIN trace_steps st ON st.source_id = c.source_id AND c.ts_ns >= st.ts_ns
WHERE s.name = 'torch::autograd::AccumulateGrad'
GROUP BY ALL;

-- One row per top-level op: op_id, source_id, rank, tid, name, step, ts_ns, cpu_ns, gpu_ns (its kernels, copies
-- and memsets), kernels (launches), flops (model FLOPs: its FLOP ops' not recomputing), hw_flops (all its FLOP
-- ops'), bytes (NULL: no byte model), dtype (of its FLOPs, else its first input's), kind ('gemm', 'attention',
-- 'conv', 'optimizer', 'copy', 'memory', or NULL without a model), shape (its inputs' shapes), tf32 (an fp32
-- product ran as TF32: the kernel's name says so).
CREATE OR REPLACE TEMP TABLE efficiency_op_costs AS
WITH f AS (
    SELECT op_id, sum(flops) FILTER (WHERE NOT recompute) AS flops, sum(flops) AS hw_flops, sum(bytes) AS bytes,
           arg_max(dtype, flops) AS dtype, arg_max(kind, flops) AS kind, arg_max(shape, flops) AS shape,
           count(*) FILTER (WHERE flops IS NULL) AS unmodelled
    FROM efficiency_flop_ops GROUP BY op_id
),
k AS (
    SELECT op_id, sum(gpu_ns) AS gpu_ns, sum(launches) AS kernels,
           bool_or(kernel ILIKE '%tf32%' OR kernel ILIKE '%xmma%tf32%') AS tf32,
           -- the element size a copy kernel's name gives (aten::cat's CatArrayBatchedCopy<OpaqueType<2u>, …>)
           max(TRY_CAST(regexp_extract(kernel, 'OpaqueType<(\d+)u?>', 1) AS INTEGER)) AS opaque_itemsize
    FROM efficiency_op_kernels GROUP BY op_id
),
inputs AS (  -- each input's bytes, for the memory model. The profiler records no dtype for a tensor list: the
             -- lists of an optimizer or of GradScaler's unscale hold the parameters' or their gradients' (their
             -- AccumulateGrad's), another op's lists the element size its kernels' names give, else the op has no
             -- model (lists_sized)
    SELECT t.op_id,
           list_transform(t.dims, lambda x, i: CASE WHEN t.types[i] IN ('TensorList', 'GenericList') THEN
               list_sum(list_transform(t.lists[i], lambda y: efficiency_numel(y)))
                   * CASE WHEN regexp_matches(t.name, '^aten::(_foreach|_fused_|_amp_foreach)')
                          THEN coalesce(efficiency_itemsize(p.dtype), 4) ELSE k.opaque_itemsize END
               ELSE efficiency_numel(x) * efficiency_itemsize(t.types[i]) END) AS in_bytes,
           -- addcmul with both factors of one shape: torch's optimizers pass the gradient twice (Adam's
           -- exp_avg_sq.addcmul_(grad, grad)), read once; the least the op must move counts it once
           regexp_matches(t.name, '^aten::(_foreach_)?addcmul_?$') AND t.dims[2] IS NOT DISTINCT FROM t.dims[3]
               AND t.lists[2] IS NOT DISTINCT FROM t.lists[3] AS squares,
           list_bool_or(list_transform(t.types, lambda x: x IN ('TensorList', 'GenericList'))) AS has_list,
           list_bool_and(list_transform(in_bytes, lambda x, i: t.types[i] NOT IN ('TensorList', 'GenericList')
                                                               OR x IS NOT NULL)) AS lists_sized,
           list_bool_and(list_transform(t.lists, lambda x, i: t.types[i] NOT IN ('TensorList', 'GenericList')
                                                              OR len(x) > 0)) AS lists_recorded,
           p.param_bytes
    FROM efficiency_top_ops t
    LEFT JOIN efficiency_params p ON p.source_id = t.source_id AND p.step IS NOT DISTINCT FROM t.step
    LEFT JOIN k USING (op_id)
    WHERE t.dims IS NOT NULL
),
mem AS (
    SELECT t.op_id,
        CASE
            WHEN t.name IN ('aten::_fused_adamw_', 'aten::_fused_adam_') AND NOT i.lists_recorded
                THEN 7 * i.param_bytes
            WHEN i.has_list AND NOT i.lists_sized THEN NULL  -- a list unrecorded or of unknown dtype: no model
            -- Inductor's Triton kernels: their arguments are their inputs and outputs, each moved once; a template
            -- whose name says no product (flex attention) has no model (a GEMM template's is efficiency_flop_ops')
            WHEN t.name LIKE 'triton\_tem\_%' ESCAPE '\' THEN NULL
            -- a kernel that fuses a gather or a scatter (embedding, nll_loss, gather, index, scatter) reads or
            -- writes a few rows of an argument, not all of it: no model (the logits' 0.5 GB counted whole made an
            -- 11 µs loss kernel move 49 TB/s)
            WHEN regexp_matches(t.name, '^triton_.*(embedding|nll_loss|gather|index|scatter)') THEN NULL
            WHEN t.name LIKE 'triton\_%' ESCAPE '\' THEN list_sum(list_filter(i.in_bytes, lambda x: x IS NOT NULL))
            WHEN t.name IN ('aten::copy_') THEN 2 * coalesce(i.in_bytes[2], i.in_bytes[1])
            WHEN t.name IN ('aten::to', 'aten::_to_copy', 'aten::clone', 'aten::contiguous')
                THEN 2 * i.in_bytes[1]
            WHEN t.name IN ('aten::embedding', 'aten::index_select') AND len(t.dims) >= 2 THEN
                2.0 * efficiency_numel(t.dims[CASE WHEN t.name = 'aten::embedding' THEN 2 ELSE 3 END])
                    * list_product(t.dims[1][2:]) * efficiency_itemsize(t.types[1])
                    + efficiency_numel(t.dims[CASE WHEN t.name = 'aten::embedding' THEN 2 ELSE 3 END]) * 8
            WHEN regexp_matches(t.name, '^aten::(sum|mean|amax|amin|max|min|argmax|argmin|norm|linalg_vector_norm|'
                                         || 'nll_loss.*|all|any|std|var|prod)$')
                THEN list_sum(list_filter(i.in_bytes, lambda x: x IS NOT NULL))
            WHEN t.name LIKE '%\_' ESCAPE '\' THEN
                list_sum(list_filter(i.in_bytes, lambda x: x IS NOT NULL)) + coalesce(i.in_bytes[1], 0)
                - CASE WHEN i.squares THEN coalesce(i.in_bytes[3], 0) ELSE 0 END
            ELSE list_sum(list_filter(i.in_bytes, lambda x: x IS NOT NULL))
                 + list_max(list_filter(i.in_bytes, lambda x: x IS NOT NULL))
        END AS bytes,
        CASE WHEN t.name LIKE 'aten::_fused_adam%' OR t.name LIKE 'aten::_foreach%' THEN 'optimizer'
             WHEN t.name IN ('aten::copy_', 'aten::to', 'aten::_to_copy', 'aten::clone', 'aten::contiguous')
                 THEN 'copy'
             ELSE 'memory' END AS kind
    FROM efficiency_top_ops t JOIN inputs i USING (op_id)
)
SELECT t.op_id, t.source_id, t.rank, t.tid, t.name, t.step, t.ts_ns, t.dur_ns AS cpu_ns,
       coalesce(k.gpu_ns, 0) AS gpu_ns, coalesce(k.kernels, 0) AS kernels,
       CASE WHEN f.op_id IS NOT NULL THEN f.flops ELSE 0.0 END AS flops,
       CASE WHEN f.op_id IS NOT NULL THEN f.hw_flops ELSE 0.0 END AS hw_flops,
       CASE WHEN f.op_id IS NOT NULL THEN f.bytes WHEN coalesce(k.gpu_ns, 0) = 0 THEN 0.0 ELSE m.bytes END AS bytes,
       CASE WHEN f.dtype = 'fp32' AND k.tf32 THEN 'tf32'
            ELSE coalesce(f.dtype, efficiency_dtype(t.types[1])) END AS dtype,
       CASE WHEN f.op_id IS NOT NULL THEN (CASE WHEN f.unmodelled = 0 THEN f.kind END)
            WHEN m.bytes IS NOT NULL THEN m.kind END AS kind,
       coalesce(f.shape, array_to_string(list_transform(list_filter(t.dims, lambda x: len(x) > 0),
                                                        lambda x: array_to_string(x, '×')), ' · ')) AS shape,
       coalesce(k.tf32, false) AS tf32
FROM efficiency_top_ops t
LEFT JOIN f USING (op_id)
LEFT JOIN k USING (op_id)
LEFT JOIN mem m USING (op_id);
