-- gpu.kernels: where GPU time goes, by category and by kernel.
--
-- Categories come from the ingest (the profiler's own classification first, kernel names second):
-- compute, communication (NCCL: ncclKernel_* and ncclDevKernel_*), memcpy, memset. Times in ns.
-- include: gpu.busy

-- GPU time per rank and category: count of activities, summed duration (ns) and share of all GPU work time (%).
CREATE OR REPLACE TEMP VIEW gpu_time_by_category AS
SELECT source_id, rank, category, count(*) AS activity_count, sum(dur_ns) AS total_ns,
       100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER (PARTITION BY source_id) AS share_pct
FROM gpu_work GROUP BY source_id, rank, category;

-- The kernels that take the most GPU time per rank: launches, total/mean duration (ns), share of kernel time (%).
CREATE OR REPLACE TEMP VIEW gpu_top_kernels AS
SELECT source_id, rank, name, category, count(*) AS launch_count, sum(dur_ns) AS total_ns,
       avg(dur_ns) AS mean_ns,
       100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER (PARTITION BY source_id) AS share_pct
FROM gpu_work WHERE kind = 'kernel' GROUP BY source_id, rank, name, category;

-- The report's GPU time per rank and category (gpu_time_by_category). Columns: rank, category, activity_count,
-- total_ms, share_pct (of all GPU work time).
CREATE OR REPLACE TEMP VIEW gpu_report_time_by_category AS
SELECT rank, category, activity_count, total_ns / 1e6 AS total_ms, share_pct FROM gpu_time_by_category;

-- The report's top kernels: the 10 that take the most GPU time per rank (gpu_top_kernels). Columns: rank, name,
-- category, launch_count, total_ms, mean_us (mean duration), share_pct (of kernel time).
CREATE OR REPLACE TEMP VIEW gpu_report_top_kernels AS
SELECT rank, name, category, launch_count, total_ns / 1e6 AS total_ms, mean_ns / 1e3 AS mean_us, share_pct
FROM gpu_top_kernels QUALIFY row_number() OVER (PARTITION BY rank ORDER BY total_ns DESC) <= 10;

-- The kernels of the judged work, per rank, name and launch configuration — what a diff compares per step: on a
-- source with steps, the kernels launched in its steady steps (trace.steps: neither the warm-up's nor work queued
-- before the first step, which the window's prologue holds, so launches per step are those of a steady step);
-- without steps, the kernels in its window (gpu_work). Columns: rank, name, category, grid, block (NULL where not
-- recorded), count (launches), total_ms (Σ duration).
CREATE OR REPLACE TEMP VIEW gpu_judged_kernels AS
WITH judged AS (
    SELECT g.rank, g.name, g.category, g.grid, g.block, g.dur_ns
    FROM trace_step_work w JOIN trace_steady_steps s USING (source_id, step)
    JOIN gpu_activity g ON g.rowid = w.work_row
    WHERE w.kind = 'kernel'
    UNION ALL
    SELECT rank, name, category, grid, block, dur_ns FROM gpu_work
    WHERE kind = 'kernel' AND source_id NOT IN (SELECT source_id FROM trace_steady_steps)
)
SELECT rank, name, coalesce(any_value(category), 'compute') AS category, grid, block, count(*) AS count,
       sum(dur_ns) / 1e6 AS total_ms
FROM judged GROUP BY rank, name, grid, block ORDER BY rank, name, grid, block;
