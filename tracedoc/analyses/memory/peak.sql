-- memory.peak: what is live at each GPU's peak (memory.timeline), by allocation site. Bytes.
--
-- Live at the peak: allocations recorded in the trace before the peak and not freed by then; what the totals held
-- that the trace never saw allocated (made before it started: parameters, optimizer state) is one row,
-- '(allocated before the trace)'. Sites from memory_sites (memory.timeline): the snapshot's frames, else the
-- user's Python frame, else the operator, else the annotation.
--
-- The peak by role (memory_peak_roles), each live allocation's role read from its stack (a snapshot's frames) and
-- the operators and annotations around it (memory_sites.context), the first that matches: 'parameters' (made by
-- nn/parameter.py, nn/init.py, or a module's _apply, to, cuda, reset_parameters, load_state_dict), 'optimizer state'
-- (inside torch/optim or an Optimizer.step annotation: the state and the step's temporaries), 'gradients' (in
-- the backward pass: autograd's engine, a …Backward operator, a 'backward' frame or range), 'activations' (in the
-- forward pass: a 'forward' frame or range, nn/modules, nn/functional: outputs and what autograd saves for the
-- backward pass), else 'other'; what the trace never saw allocated is '(allocated before the trace)'.
-- reads: memory_events, memory_segments, memory_blocks, memory_actions
-- include: memory.timeline
-- include: memory.snapshot

-- The role of an allocation from its stack and context (see above).
CREATE OR REPLACE TEMP MACRO memory_role(stack, context) AS
    CASE WHEN regexp_matches(coalesce(stack, ''),
                             '(nn/parameter\.py|nn/init\.py|\((_apply|to|cuda|reset_parameters|_?load_state_dict|_load_from_state_dict)\))')
             THEN 'parameters'
         WHEN regexp_matches(coalesce(stack, ''), 'optim/')
           OR regexp_matches(coalesce(context, ''), '(Optimizer\.|(^|> )optimizer( >|$))')
             THEN 'optimizer state'
         WHEN regexp_matches(coalesce(stack, ''), '\(backward\)')
           OR regexp_matches(coalesce(context, ''), '(autograd::|Backward|(^|> )backward( >|$))')
             THEN 'gradients'
         WHEN regexp_matches(coalesce(stack, ''), '(\(forward\)|nn/modules/|nn/functional)')
           OR regexp_matches(coalesce(context, ''), '(^|> )forward( >|$)')
             THEN 'activations'
         ELSE 'other' END;

-- Per source, GPU and site: the allocations live at the peak and their bytes, and what the trace never saw
-- allocated as one row.
CREATE OR REPLACE TEMP TABLE memory_peak_sites AS
WITH live AS (
    SELECT a.* FROM memory_allocs a JOIN memory_peaks p USING (source_id, device)
    WHERE a.ts_ns <= p.peak_ns AND (a.freed_ns IS NULL OR a.freed_ns > p.peak_ns)
),
named AS (
    SELECT l.source_id, l.rank, l.device, l.bytes, coalesce(n.site, '(unknown)') AS site
    FROM live l
    LEFT JOIN memory_sites n ON n.source_id = l.source_id AND n.device = l.device AND n.addr = l.addr
                            AND n.ts_ns = l.ts_ns
),
seen AS (
    SELECT source_id, any_value(rank) AS rank, device, site, count(*) AS allocations, sum(bytes) AS bytes,
           max(bytes) AS largest_bytes
    FROM named GROUP BY source_id, device, site
)
SELECT * FROM seen
UNION ALL
SELECT p.source_id, d.rank, p.device, '(allocated before the trace)', NULL, p.peak_bytes - coalesce(s.bytes, 0), NULL
FROM memory_peaks p JOIN memory_by_device d USING (source_id, device)
LEFT JOIN (SELECT source_id, device, sum(bytes) AS bytes FROM seen GROUP BY ALL) s USING (source_id, device)
WHERE p.peak_bytes - coalesce(s.bytes, 0) > 0;

-- Per source and GPU: bytes live at the peak by role (see above), and the allocations behind each.
CREATE OR REPLACE TEMP TABLE memory_peak_roles AS
WITH live AS (
    SELECT a.* FROM memory_allocs a JOIN memory_peaks p USING (source_id, device)
    WHERE a.ts_ns <= p.peak_ns AND (a.freed_ns IS NULL OR a.freed_ns > p.peak_ns)
),
seen AS (
    SELECT l.source_id, any_value(l.rank) AS rank, l.device, memory_role(n.stack, n.context) AS role,
           count(*) AS allocations, sum(l.bytes) AS bytes
    FROM live l
    LEFT JOIN memory_sites n ON n.source_id = l.source_id AND n.device = l.device AND n.addr = l.addr
                            AND n.ts_ns = l.ts_ns
    GROUP BY l.source_id, l.device, role
)
SELECT * FROM seen
UNION ALL
SELECT source_id, rank, device, site, NULL, bytes FROM memory_peak_sites WHERE site = '(allocated before the trace)';

-- What memory-headroom reads: per GPU, the peak against the device's memory, what of the peak was allocated before
-- the trace began (before_trace_bytes), and the advice (headroom_fix): where nearly all of it was (95 % or more: a
-- pool reserved up front, such as a serving engine's KV cache, or a training job's weights and state loaded before
-- profiling), the trace cannot say what holds it, and a step's activations are not what to cut.
CREATE OR REPLACE TEMP VIEW memory_headroom AS
SELECT d.*, 100.0 * d.peak_bytes / d.capacity_bytes AS peak_pct,
       100.0 * d.reserved_peak_bytes / d.capacity_bytes AS reserved_peak_pct,
       d.capacity_bytes - d.reserved_peak_bytes AS headroom_bytes, b.bytes AS before_trace_bytes,
       CASE WHEN b.bytes >= 0.95 * d.peak_bytes THEN
           'Nearly all of the peak was allocated before the trace began. A pool reserved up front on purpose (a '
           || 'serving engine''s KV cache: vLLM''s gpu_memory_utilization, SGLang''s mem_fraction_static) leaves '
           || 'this headroom by design: lower its share only where other work needs the GPU. A training job''s '
           || 'weights, gradients and optimizer state held from before: shard them (FSDP/ZeRO) or keep the '
           || 'optimizer state in lower precision. To see what holds it, record from the start '
           || '(torch.cuda.memory._record_memory_history() before the model loads).'
       ELSE
           'Lower the peak before inputs grow: activation checkpointing around the largest layers, a smaller '
           || 'micro-batch with gradient accumulation, `zero_grad(set_to_none=True)`, mixed precision, or sharding '
           || 'optimizer state and parameters (FSDP/ZeRO). The Memory section lists what is live at the peak.'
       END AS headroom_fix
FROM memory_by_device d
LEFT JOIN memory_peak_sites b ON b.source_id = d.source_id AND b.device = d.device
                             AND b.site = '(allocated before the trace)'
WHERE d.capacity_bytes > 0 AND d.ooms = 0;

-- The report's sites live at each GPU's peak (memory_peak_sites). Columns: rank, device, site, allocations, bytes.
CREATE OR REPLACE TEMP VIEW memory_report_peak_sites AS
SELECT rank, device, site, allocations, bytes FROM memory_peak_sites;
