-- timeline.lanes: what the dashboard's timeline draws, one lane per row, and the queries it runs per view.
--
-- Per rank, top to bottom: a lane of profiler steps, a lane of host annotations (the user's outermost NVTX
-- ranges and PyTorch user annotations), then one lane per GPU device and stream. Times in ns on each trace's own
-- clock (ranks recorded on one host share it). The macros read only the view's time range, so a view costs a
-- scan of the intervals and returns at most one row per lane, category and pixel column (binned) or the intervals
-- themselves (a zoomed-in view), never the whole trace.

-- Every interval the timeline can draw: lane_group 0 steps, 1 annotations, 2 GPU activity (device and stream -1
-- outside GPU lanes); category is the GPU activity's category, or 'step' / 'annotation'.
CREATE OR REPLACE TEMP VIEW timeline_intervals AS
SELECT rank, 0 AS lane_group, -1 AS device, -1 AS stream, 'step' AS category, 'ProfilerStep#' || step AS name,
       ts_ns, dur_ns
FROM steps
UNION ALL
SELECT rank, 1, -1, -1, 'annotation', name, ts_ns, dur_ns
FROM nvtx_ranges WHERE depth = 0 AND NOT coalesce(is_op, false)
UNION ALL
SELECT rank, 1, -1, -1, 'annotation', name, ts_ns, dur_ns
FROM cpu_activity WHERE kind = 'annotation' AND name NOT LIKE 'ProfilerStep#%'
UNION ALL
SELECT rank, 2, device, stream, category, name, ts_ns, dur_ns
FROM gpu_activity;

-- The lanes, numbered from 0 (top) in rank order; label: e.g. 'rank 0 · GPU 1 · stream 7'.
CREATE OR REPLACE TEMP TABLE timeline_lanes AS
SELECT row_number() OVER (ORDER BY rank, lane_group, device, stream) - 1 AS lane, rank, lane_group, device, stream,
       'rank ' || rank || CASE lane_group WHEN 0 THEN ' · steps' WHEN 1 THEN ' · annotations'
                                          ELSE ' · GPU ' || device || ' · stream ' || stream END AS label
FROM (SELECT DISTINCT rank, lane_group, device, stream FROM timeline_intervals);

-- The intervals with their lane and end (ns).
CREATE OR REPLACE TEMP VIEW timeline_events AS
SELECT l.lane, i.category, i.name, i.ts_ns, i.ts_ns + i.dur_ns AS end_ns
FROM timeline_intervals i JOIN timeline_lanes l USING (rank, lane_group, device, stream);

-- The intervals overlapping the view [x0_ns, x1_ns): lane, category, name, ts_ns, end_ns.
CREATE OR REPLACE TEMP MACRO timeline_in_view(x0_ns, x1_ns) AS TABLE
SELECT lane, category, name, ts_ns, end_ns FROM timeline_events WHERE ts_ns < x1_ns AND end_ns > x0_ns;

-- The view [x0_ns, x1_ns) binned into pixel columns px_ns wide: per lane and category, the intervals starting
-- in one column merged into one (start_ns: the first start, end_ns: the last end, both clipped to the view;
-- intervals: how many). Exact at pixel resolution: a gap the merge covers lies inside the column.
CREATE OR REPLACE TEMP MACRO timeline_binned(x0_ns, x1_ns, px_ns) AS TABLE
SELECT lane, category, min(greatest(ts_ns, x0_ns)) AS start_ns, max(least(end_ns, x1_ns)) AS end_ns,
       count(*) AS intervals
FROM timeline_in_view(x0_ns, x1_ns)
GROUP BY lane, category, (greatest(ts_ns, x0_ns) - x0_ns) // px_ns;
