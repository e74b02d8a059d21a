-- efficiency.report: the report's ``operators`` section, one row per rank and aten op, the kernels it launched
-- nested (LIST of STRUCT). ms, FLOPs, bytes, %.
--
-- The ops with the most GPU time in the steady steps (40 per rank), each with the five
-- kernels it spent most time in (efficiency.operators).
-- include: efficiency.operators

-- The report's operator view per rank (efficiency_operators, kept to the 40 ops with the most GPU time of each
-- source). Columns: rank, op, count, cpu_ms and gpu_ms (host and GPU time), share_pct, flops, tflops, bytes, gbps,
-- intensity, roofline_pct, kind, dtype, shape, kernels (the five with the most GPU time: name, count, ms);
-- source_id and gpu_ns order the rows and are left out of the report.
CREATE OR REPLACE TEMP VIEW efficiency_report_operators AS
WITH kernels AS (
    SELECT source_id, op,
           list({'name': kernel, 'count': launches, 'ms': gpu_ns / 1e6} ORDER BY gpu_ns DESC, kernel)[:5] AS kernels
    FROM efficiency_operator_kernels GROUP BY ALL
)
SELECT o.rank, o.op, o.count, o.cpu_ns / 1e6 AS cpu_ms, o.gpu_ns / 1e6 AS gpu_ms, o.share_pct, o.flops, o.tflops,
       o.bytes, o.gbps, o.intensity, o.roofline_pct, o.kind, o.dtype, o.shape, coalesce(k.kernels, []) AS kernels,
       o.source_id, o.gpu_ns
FROM efficiency_operators o LEFT JOIN kernels k USING (source_id, op)
WHERE o.gpu_ns > 0
QUALIFY row_number() OVER (PARTITION BY o.source_id ORDER BY o.gpu_ns DESC, o.op) <= 40;
