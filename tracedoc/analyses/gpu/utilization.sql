-- gpu.utilization: GPU busy share in equal time chunks (the "GPU low utilization" of nsys analyze's
-- gpu_time_util rule).
--
-- The analysed window (trace.window: the steady steps and the GPU work they queued, the capture range, or the
-- whole trace without either) is cut into n equal chunks of ceil(window / n) ns: the same window as the device's busy share
-- (gpu_idle_by_device), so a device busy under half of the window has chunks under half busy too. (nsys cuts the
-- device's span, from its first work's start to its last work's end, instead; a trace whose GPU works in one burst
-- then looks busy in every chunk.) A chunk's busy % is the union of the device's busy intervals inside it over the
-- chunk's length (nsys sums the work's durations instead, so concurrent kernels can make a chunk look more than
-- 100 % busy; the union never does). Times in ns.
-- include: nvtx.idle

-- One row per device and chunk of the window: chunk (0-based), ts_ns/dur_ns (the chunk), busy_pct.
CREATE OR REPLACE TEMP MACRO gpu_utilization_chunks(n_chunks) AS TABLE
WITH span AS (
    SELECT d.source_id, d.rank, d.device, w.start_ns AS first_ns, w.end_ns AS last_ns,
           CAST(ceil((w.end_ns - w.start_ns) / n_chunks) AS BIGINT) AS chunk_ns
    FROM (SELECT source_id, any_value(rank) AS rank, device FROM gpu_busy_intervals GROUP BY source_id, device) d
    JOIN trace_windows w USING (source_id)
),
chunks AS (
    SELECT s.source_id, s.rank, s.device, c.chunk, s.first_ns + c.chunk * s.chunk_ns AS ts_ns, s.chunk_ns
    FROM span s CROSS JOIN (SELECT unnest(range(CAST(n_chunks AS BIGINT))) AS chunk) c
    WHERE s.chunk_ns > 0
),
clipped AS (  -- busy intervals inside the window
    SELECT b.source_id, b.device, greatest(b.ts_ns, s.first_ns) AS ts_ns, least(b.end_ns, s.last_ns) AS end_ns,
           s.first_ns, s.chunk_ns
    FROM gpu_busy_intervals b JOIN span s USING (source_id, device)
    WHERE s.chunk_ns > 0
),
pieces AS (
    SELECT source_id, device, ts_ns, end_ns,
           unnest(range((ts_ns - first_ns) // chunk_ns, (end_ns - 1 - first_ns) // chunk_ns + 1)) AS chunk
    FROM clipped WHERE end_ns > ts_ns
)
SELECT c.source_id, c.rank, c.device, c.chunk, c.ts_ns, c.chunk_ns AS dur_ns,
       100.0 * coalesce(sum(least(p.end_ns, c.ts_ns + c.chunk_ns) - greatest(p.ts_ns, c.ts_ns))
                            FILTER (WHERE p.ts_ns IS NOT NULL), 0) / c.chunk_ns AS busy_pct
FROM chunks c
LEFT JOIN pieces p ON p.source_id = c.source_id AND p.device = c.device AND p.chunk = c.chunk
GROUP BY c.source_id, c.rank, c.device, c.chunk, c.ts_ns, c.chunk_ns;

-- Per device: every column of gpu_idle_by_device and of nvtx_idle_by_device, plus chunks (n), low_chunks (chunks
-- under max_busy_pct busy), low_chunk_pct (their share of the chunks, %), min_chunk_busy_pct, the threshold
-- (chunk_busy_threshold_pct), low_idle_ns (idle time inside the low chunks, ns) and window_text (what the window
-- that busy_pct and the chunks share spans, in words).
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
       CASE WHEN w.kind = 'steps' AND w.step_count = 1 THEN 'its one step and the GPU work it queued'
            WHEN w.kind = 'steps' THEN 'its ' || w.step_count || ' steady steps and the GPU work they queued'
            WHEN w.kind = 'capture_range' THEN 'its profiler capture range'
            ELSE 'the whole trace, in which no steps were found' END AS window_text,
       n.nvtx_range, n.nvtx_range_idle_ns, n.nvtx_range_idle_pct, coalesce(n.nvtx_note, '') AS nvtx_note
FROM gpu_idle_by_device i
JOIN c USING (source_id, device)
JOIN trace_windows w USING (source_id)
LEFT JOIN nvtx_idle_by_device n USING (source_id, device);
