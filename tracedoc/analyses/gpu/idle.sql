-- gpu.idle: every idle gap of every GPU, and why the GPU was idle.
--
-- A gap runs from the end of one busy interval (or the window start) to the start of the next (or the window
-- end). Its cause:
--   host_wait   the work that ended the gap was launched by the host after the GPU had gone idle: the GPU
--               waited for the CPU (launch overhead, Python, data loading, a sync that drained the queue);
--   kernel_wait the work was already queued and the gap is short (≤ 30 µs): launch/dependency latency between
--               kernels;
--   other       queued work that still waited longer (cross-stream events, peers in a collective, ...).
-- Host-wait gaps are split by length: short ones (< 100 µs, about the cost of a few kernel launches) come from
-- launch overhead, long ones from host work between launches. Times in ns.
-- include: gpu.busy

-- One row per idle gap.
-- Columns: source_id, rank, device, ts_ns/end_ns/dur_ns (the gap), launch_ts_ns (when the host launched the work
-- that ended it, NULL when unknown), cause (host_wait | kernel_wait | other), long_gap (dur_ns ≥ 100 µs).
CREATE OR REPLACE TEMP TABLE gpu_idle_gaps AS
WITH bounds AS (
    SELECT b.source_id, b.rank, b.device,
           coalesce(lag(b.end_ns) OVER (PARTITION BY b.source_id, b.device ORDER BY b.ts_ns), w.start_ns) AS ts_ns,
           b.ts_ns AS end_ns, b.first_correlation_id
    FROM gpu_busy_intervals b JOIN trace_windows w USING (source_id)
),
tail_gaps AS (
    -- after the device's last work until the window ends: nothing more was queued
    SELECT b.source_id, any_value(b.rank) AS rank, b.device, max(b.end_ns) AS ts_ns,
           any_value(w.end_ns) AS end_ns, NULL::BIGINT AS first_correlation_id
    FROM gpu_busy_intervals b JOIN trace_windows w USING (source_id)
    GROUP BY b.source_id, b.device
)
SELECT g.source_id, g.rank, g.device, g.ts_ns, g.end_ns, g.end_ns - g.ts_ns AS dur_ns, l.launch_ns AS launch_ts_ns,
       CASE WHEN l.launch_ns >= g.ts_ns THEN 'host_wait'
            WHEN g.end_ns - g.ts_ns <= 30000 THEN 'kernel_wait'
            ELSE 'other' END AS cause,
       g.end_ns - g.ts_ns >= 100000 AS long_gap
FROM (SELECT * FROM bounds UNION ALL SELECT * FROM tail_gaps) g
LEFT JOIN trace_launches l ON l.source_id = g.source_id AND l.correlation_id = g.first_correlation_id
WHERE g.end_ns > g.ts_ns;

-- Idle time per device by cause, ns and % of the window; busy_pct = 100 − idle_pct.
-- A table, a row per device: the report, gpu.launch, gpu.utilization and nvtx.idle read it, each a pass over
-- every gap otherwise.
CREATE OR REPLACE TEMP TABLE gpu_idle_by_device AS
SELECT w.source_id, w.rank, d.device, any_value(w.wall_ns) AS wall_ns,
       coalesce(sum(g.dur_ns), 0) AS idle_ns,
       coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'host_wait'), 0) AS host_wait_ns,
       coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'host_wait' AND NOT g.long_gap), 0) AS host_wait_short_ns,
       coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'host_wait' AND g.long_gap), 0) AS host_wait_long_ns,
       count(g.dur_ns) FILTER (WHERE g.cause = 'host_wait' AND g.long_gap) AS host_wait_long_count,
       coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'kernel_wait'), 0) AS kernel_wait_ns,
       coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'other'), 0) AS other_ns,
       100.0 * coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'host_wait' AND NOT g.long_gap), 0)
           / nullif(any_value(w.wall_ns), 0) AS host_wait_short_pct,
       100.0 * coalesce(sum(g.dur_ns) FILTER (WHERE g.cause = 'host_wait' AND g.long_gap), 0)
           / nullif(any_value(w.wall_ns), 0) AS host_wait_long_pct,
       100.0 * coalesce(sum(g.dur_ns), 0) / nullif(any_value(w.wall_ns), 0) AS idle_pct,
       100.0 - 100.0 * coalesce(sum(g.dur_ns), 0) / nullif(any_value(w.wall_ns), 0) AS busy_pct
FROM trace_wall w
JOIN (SELECT DISTINCT source_id, device FROM gpu_busy_intervals) d USING (source_id)
LEFT JOIN gpu_idle_gaps g ON g.source_id = w.source_id AND g.device = d.device
GROUP BY w.source_id, w.rank, d.device;

-- What the host was doing during long host-wait gaps: for each device, the user annotations and operators on
-- the CPU that overlap those gaps, with the overlapped time (ns). Names the user's own code; for exploring a
-- store (no built-in rule reads it: the host-bound finding names the host's time from attribution.host, which
-- gives every moment of a gap to one range instead of counting nested ranges each).
-- (The overlap join compares (source, time) keys packed into one HUGEINT so that DuckDB can run it as a range
-- join; an equality on source_id beside the two inequalities would make it compare every pair.)
-- stays a view
CREATE OR REPLACE TEMP VIEW gpu_idle_host_activity AS
WITH g AS (
    SELECT *, (source_id::HUGEINT << 64) + ts_ns AS k_start, (source_id::HUGEINT << 64) + end_ns AS k_end
    FROM gpu_idle_gaps WHERE cause = 'host_wait' AND long_gap
),
c AS (
    SELECT *, (source_id::HUGEINT << 64) + ts_ns AS k_start, (source_id::HUGEINT << 64) + ts_ns + dur_ns AS k_end
    FROM cpu_activity WHERE kind IN ('annotation', 'op') AND name NOT LIKE 'ProfilerStep#%'
)
SELECT g.source_id, g.rank, g.device, c.name, c.kind,
       sum(least(g.end_ns, c.ts_ns + c.dur_ns) - greatest(g.ts_ns, c.ts_ns)) AS overlap_ns
FROM g JOIN c ON c.k_start < g.k_end AND c.k_end > g.k_start
GROUP BY g.source_id, g.rank, g.device, c.name, c.kind;

-- The report's idle time per device (ms; gpu_idle_by_device). Columns: rank, device, wall_ms (the window),
-- busy_pct, idle_ms, host_wait_short_ms, host_wait_long_ms (host waits under and over 100 µs), kernel_wait_ms,
-- other_ms.
CREATE OR REPLACE TEMP VIEW gpu_report_idle AS
SELECT rank, device, wall_ns / 1e6 AS wall_ms, busy_pct, idle_ns / 1e6 AS idle_ms,
       host_wait_short_ns / 1e6 AS host_wait_short_ms, host_wait_long_ns / 1e6 AS host_wait_long_ms,
       kernel_wait_ns / 1e6 AS kernel_wait_ms, other_ns / 1e6 AS other_ms
FROM gpu_idle_by_device;
