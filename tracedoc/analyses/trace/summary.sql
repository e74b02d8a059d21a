-- trace.summary: the headline numbers of the report.
-- include: gpu.busy

-- One row: wall_ms (the longest rank window, ms), gpu_busy_pct (busy time over window time, all devices, %),
-- ranks (number of ranks), steps (most profiler steps seen on one rank).
CREATE OR REPLACE TEMP VIEW trace_summary AS
SELECT (SELECT max(wall_ns) FROM trace_wall) / 1e6 AS wall_ms,
       (SELECT 100.0 * sum(busy_ns) / nullif(sum(wall_ns), 0) FROM gpu_busy_by_device) AS gpu_busy_pct,
       (SELECT count(DISTINCT rank) FROM sources) AS ranks,
       (SELECT max(step_count) FROM trace_wall) AS steps;

-- Step durations per rank (ms), from ProfilerStep annotations.
CREATE OR REPLACE TEMP VIEW trace_step_times AS
SELECT rank, step, dur_ns / 1e6 AS step_ms FROM steps ORDER BY rank, step;
