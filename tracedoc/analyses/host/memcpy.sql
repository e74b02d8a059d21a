-- host.memcpy: copies between host and device, and those from or to pageable host memory.
--
-- A copy from pageable memory cannot run as DMA directly: the driver stages it through a pinned buffer and the
-- call blocks the host, so it neither overlaps compute nor lets the host run ahead. Times in ns, sizes in bytes.
-- include: gpu.busy
-- include: trace.framework

-- Per rank and direction: copies, bytes, GPU time (ns), effective bandwidth (GB/s), split by host memory kind.
-- A table, a row per rank, direction and memory kind: read by the pageable copies' rule and the report.
CREATE OR REPLACE TEMP TABLE host_copies_by_rank AS
SELECT source_id, rank, copy_kind, coalesce(host_memory, 'device') AS host_memory,
       count(*) AS copy_count, sum(bytes) AS total_bytes, sum(dur_ns) AS total_ns,
       sum(bytes) / nullif(sum(dur_ns), 0) AS bandwidth_gbps
FROM gpu_work WHERE kind = 'memcpy' GROUP BY ALL;

-- Per rank: copies from/to pageable memory, their bytes, GPU time (ns), share of the window (%), directions, and
-- fix_text: the advice, in PyTorch's terms where the trace is of a PyTorch program (trace.framework), else CUDA's.
CREATE OR REPLACE TEMP VIEW host_pageable_copies AS
SELECT c.source_id, c.rank, sum(c.copy_count) AS copy_count, sum(c.total_bytes) AS total_bytes,
       sum(c.total_ns) AS total_ns, 100.0 * sum(c.total_ns) / nullif(any_value(w.wall_ns), 0) AS time_pct,
       string_agg(DISTINCT c.copy_kind, ', ' ORDER BY c.copy_kind) AS directions, any_value(w.wall_ns) AS wall_ns,
       CASE WHEN coalesce(any_value(f.pytorch), true)
            THEN 'Copy from pinned memory: DataLoader(pin_memory=True), or tensor.pin_memory() once for buffers '
                 || 'reused every step, then .to(device, non_blocking=True). For device-to-host results, copy into '
                 || 'a preallocated pinned tensor.'
            ELSE 'Copy from pinned memory: allocate the host buffers that are copied every step with '
                 || 'cudaMallocHost (or register them once with cudaHostRegister), then copy with cudaMemcpyAsync '
                 || 'on a stream.'
       END AS fix_text
FROM host_copies_by_rank c JOIN trace_wall w USING (source_id)
LEFT JOIN trace_framework f USING (source_id)
WHERE c.host_memory = 'pageable'
GROUP BY c.source_id, c.rank;

-- The report's copies per rank, direction and host memory kind (host_copies_by_rank). Columns: rank, copy_kind,
-- host_memory, copy_count, total_bytes, total_ms (GPU time), bandwidth_gbps.
CREATE OR REPLACE TEMP VIEW host_report_copies AS
SELECT rank, copy_kind, host_memory, copy_count, total_bytes, total_ns / 1e6 AS total_ms, bandwidth_gbps
FROM host_copies_by_rank;
