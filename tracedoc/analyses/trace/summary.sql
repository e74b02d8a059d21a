-- trace.summary: the headline numbers of the report.
-- scope: job
-- uses: trace.steps
-- uses: trace.window
-- include: gpu.busy_time
-- include: trace.recording

-- What the summary reads of the steps (trace.steps) and the window (trace.window), made by those modules where
-- the store holds a timeline (see their columns there); elsewhere (an Nsight Compute report, a flight-recorder
-- dump) empty, so that their planning is not paid where they could hold no row.
-- trace_steps: the steps (trace.steps).
CREATE TEMP TABLE IF NOT EXISTS trace_steps (
    source_id INTEGER, rank INTEGER, step INTEGER, name VARCHAR, ts_ns BIGINT, dur_ns BIGINT, warmup BOOLEAN);
-- trace_wall: each source's window (trace.window).
CREATE TEMP TABLE IF NOT EXISTS trace_wall (
    source_id INTEGER, rank INTEGER, start_ns BIGINT, end_ns BIGINT, wall_ns BIGINT, step_count BIGINT);

-- One row: wall_ms (the longest rank window, ms; for kernel profiles without a timeline, e.g. Nsight Compute,
-- the summed duration of the profiled kernels), gpu_busy_pct (busy time over window time, all devices, %),
-- ranks (number of ranks), world_size (the job's ranks when a trace of a format that gives it, in input_formats,
-- says so, else NULL), steps (most steady steps seen on one rank), basis (what wall_ms measures: 'timeline'
-- with GPU activity, 'host-only timeline' when the timelines recorded no GPU activity, 'kernel profile', or NULL).
CREATE OR REPLACE TEMP VIEW trace_summary AS
SELECT coalesce((SELECT max(wall_ns) FROM trace_wall), (SELECT sum(duration_ns) FROM ncu_kernels)) / 1e6 AS wall_ms,
       CASE WHEN EXISTS (SELECT 1 FROM trace_recording WHERE gpu_events > 0) THEN 'timeline'
            WHEN (SELECT max(wall_ns) FROM trace_wall) IS NOT NULL THEN 'host-only timeline'
            WHEN EXISTS (SELECT 1 FROM ncu_kernels) THEN 'kernel profile' END AS basis,
       (SELECT 100.0 * sum(busy_ns) / nullif(sum(wall_ns), 0) FROM gpu_busy_by_device) AS gpu_busy_pct,
       (SELECT count(DISTINCT rank) FROM sources) AS ranks,
       (SELECT max(world_size) FROM sources WHERE format IN (SELECT format FROM input_formats WHERE world_size))
           AS world_size,
       (SELECT max(step_count) FROM trace_wall) AS steps;

-- The report's step durations on the host (trace.steps). Columns: rank, step, step_ms (its duration), warmup
-- (a warm-up step).
CREATE OR REPLACE TEMP VIEW trace_report_step_times AS
SELECT rank, step, dur_ns / 1e6 AS step_ms, warmup FROM trace_steps;
