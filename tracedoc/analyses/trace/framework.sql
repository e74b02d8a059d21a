-- trace.framework: what ran the program a trace recorded, so that advice names only the APIs the trace shows.
--
-- Advice such as "remove per-step .item()" or "let DDP all-reduce buckets" fits a PyTorch program and a DDP job;
-- on an Nsight Systems trace of a C++ or JAX program, or of a job that all-reduces by hand, it sends the reader
-- after code that is not there. The evidence is read from the names the trace holds, once per distinct name.
-- One row per timeline source: pytorch (a format whose host ranges are PyTorch's operators, the PyTorch
-- profiler's, in input_formats; or aten:: ranges, PyTorch's kernels or Python frames in another, such as an Nsight
-- Systems trace), ddp (DistributedDataParallel's annotations), fsdp (FSDP's annotations).
-- A table, a row per source: on a large store (whose views stay views) the views that read it, a rule's or the
-- report's, would each work it out again from every host event's name.
CREATE OR REPLACE TEMP TABLE trace_framework AS
WITH host_names AS (
    SELECT source_id,
           bool_or(name LIKE 'aten::%' OR kind = 'python') AS torch_ops,
           bool_or(name LIKE 'DistributedDataParallel%' OR name LIKE 'DDP::%') AS ddp,
           bool_or(name LIKE 'FSDP::%' OR name LIKE 'FullyShardedDataParallel%') AS fsdp
    FROM (SELECT DISTINCT source_id, kind, name FROM cpu_activity)
    GROUP BY source_id
), kernel_names AS (
    SELECT source_id, bool_or(name LIKE '%at::native::%' OR name LIKE '%at::cuda::%') AS torch_kernels
    FROM (SELECT DISTINCT source_id, name FROM gpu_activity WHERE kind = 'kernel')
    GROUP BY source_id
)
SELECT s.source_id,
       f.host_ranges IS NOT DISTINCT FROM 'pytorch operators' OR coalesce(h.torch_ops, false)
           OR coalesce(k.torch_kernels, false) AS pytorch,
       coalesce(h.ddp, false) AS ddp,
       coalesce(h.fsdp, false) AS fsdp
FROM sources s
JOIN input_formats f ON f.format = s.format AND f.kind = 'timeline'
LEFT JOIN host_names h USING (source_id)
LEFT JOIN kernel_names k USING (source_id);
