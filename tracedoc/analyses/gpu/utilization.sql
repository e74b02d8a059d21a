-- gpu.utilization: GPU busy share in equal time chunks (the "GPU low utilization" of nsys analyze's
-- gpu_time_util rule).
--
-- Each device's span, from its first work's start to its last work's end, is cut into n equal chunks of
-- ceil(span / n) ns, as nsys does. A chunk's busy % is the union of the device's busy intervals inside it over the
-- chunk's length (nsys sums the work's durations instead, so concurrent kernels can make a chunk look more than
-- 100 % busy; the union never does). Times in ns.
-- include: nvtx.projection

-- One row per device and chunk: chunk (0-based), ts_ns/dur_ns (the chunk), busy_pct.
CREATE OR REPLACE TEMP MACRO gpu_utilization_chunks(n_chunks) AS TABLE
WITH span AS (
    SELECT source_id, any_value(rank) AS rank, device, min(ts_ns) AS first_ns,
           CAST(ceil((max(end_ns) - min(ts_ns)) / n_chunks) AS BIGINT) AS chunk_ns
    FROM gpu_busy_intervals GROUP BY source_id, device
),
chunks AS (
    SELECT s.source_id, s.rank, s.device, c.chunk, s.first_ns + c.chunk * s.chunk_ns AS ts_ns, s.chunk_ns
    FROM span s CROSS JOIN (SELECT unnest(range(CAST(n_chunks AS BIGINT))) AS chunk) c
    WHERE s.chunk_ns > 0
),
pieces AS (
    SELECT b.source_id, b.device, b.ts_ns, b.end_ns,
           unnest(range((b.ts_ns - s.first_ns) // s.chunk_ns, (b.end_ns - 1 - s.first_ns) // s.chunk_ns + 1))
               AS chunk
    FROM gpu_busy_intervals b JOIN span s USING (source_id, device)
    WHERE s.chunk_ns > 0 AND b.end_ns > b.ts_ns
)
SELECT c.source_id, c.rank, c.device, c.chunk, c.ts_ns, c.chunk_ns AS dur_ns,
       100.0 * coalesce(sum(least(p.end_ns, c.ts_ns + c.chunk_ns) - greatest(p.ts_ns, c.ts_ns))
                            FILTER (WHERE p.ts_ns IS NOT NULL), 0) / c.chunk_ns AS busy_pct
FROM chunks c
LEFT JOIN pieces p ON p.source_id = c.source_id AND p.device = c.device AND p.chunk = c.chunk
GROUP BY c.source_id, c.rank, c.device, c.chunk, c.ts_ns, c.chunk_ns;

-- Per device: every column of gpu_idle_by_device and of nvtx_idle_by_device, plus chunks (n), low_chunks (chunks
-- under max_busy_pct busy), low_chunk_pct (their share of the chunks, %), min_chunk_busy_pct, the threshold
-- (chunk_busy_threshold_pct) and low_idle_ns (idle time inside the low chunks, ns).
CREATE OR REPLACE TEMP MACRO gpu_low_utilization(n_chunks, max_busy_pct) AS TABLE
WITH c AS (
    SELECT source_id, device, count(*) AS chunks,
           count(*) FILTER (WHERE busy_pct < max_busy_pct) AS low_chunks,
           100.0 * count(*) FILTER (WHERE busy_pct < max_busy_pct) / count(*) AS low_chunk_pct,
           min(busy_pct) AS min_chunk_busy_pct,
           CAST(sum(dur_ns * (100 - busy_pct) / 100) FILTER (WHERE busy_pct < max_busy_pct) AS BIGINT)
               AS low_idle_ns
    FROM gpu_utilization_chunks(n_chunks) GROUP BY source_id, device
)
SELECT i.*, c.chunks, c.low_chunks, c.low_chunk_pct, c.min_chunk_busy_pct, coalesce(c.low_idle_ns, 0) AS low_idle_ns,
       max_busy_pct AS chunk_busy_threshold_pct,
       n.nvtx_range, n.nvtx_range_idle_ns, n.nvtx_range_idle_pct, coalesce(n.nvtx_note, '') AS nvtx_note
FROM gpu_idle_by_device i
JOIN c USING (source_id, device)
LEFT JOIN nvtx_idle_by_device n USING (source_id, device);
