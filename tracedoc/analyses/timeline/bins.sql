-- timeline.bins: the dashboard timeline's work (timeline.lanes) binned in advance, for its wide views. Apart from the
-- lanes because only the timeline page reads it: the overview's links into the timeline need the lanes alone, so the
-- dashboard makes these once its first page is shown (tracedoc.pages.timeline.Timeline.make_bins).
-- include: timeline.lanes

-- Wide views of the work are drawn from it binned in advance, at two levels: bins of 1/12,800 and 1/102,400 of the
-- time span (8 and 64 per pixel column of a view of the whole trace, drawn 1,600 columns wide), the rows of
-- timeline_binned with c0, c1 counted in bins and sums after lo_ns. A view whose pixel column spans at least 4
-- bins of a level is read from that level's rows in view (timeline_rebinned), never from the intervals.
CREATE OR REPLACE TEMP TABLE timeline_levels AS
WITH span AS (SELECT min(ts_ns) AS lo_ns, max(end_ns) + 1 AS hi_ns FROM timeline_work)
SELECT level, lo_ns, hi_ns, greatest((hi_ns - lo_ns) // bins, 1) AS bin_ns
FROM span, (VALUES (0, 12800), (1, 102400)) AS levels(level, bins)
WHERE lo_ns IS NOT NULL;

-- The work's rows per level, lane, category and first and last bin (c0, c1): intervals, sums of starts and ends.
CREATE OR REPLACE TEMP TABLE timeline_work_bins AS
SELECT l.level, w.lane, w.category, (w.ts_ns - l.lo_ns) // l.bin_ns AS c0,
       greatest((w.ts_ns - l.lo_ns) // l.bin_ns, (w.end_ns - 1 - l.lo_ns) // l.bin_ns) AS c1,
       count(*) AS intervals, sum(w.ts_ns - l.lo_ns) AS sum_s, sum(w.end_ns - l.lo_ns) AS sum_e
FROM timeline_work w, timeline_levels l
GROUP BY ALL ORDER BY level, c0;

-- The view [x0_ns, x1_ns) of the work in pixel columns px_ns wide, as timeline_binned returns it, from the bins of
-- ``lvl``. Exact when x0_ns lies on a bin's edge and px_ns is a whole number of bins (the caller aligns the view
-- so): every bin then lies in one column. Intervals that start before the view are clipped to its start, as
-- timeline_binned clips them.
CREATE OR REPLACE TEMP MACRO timeline_rebinned(lvl, x0_ns, x1_ns, px_ns) AS TABLE
SELECT b.lane, b.category, greatest((b.c0 * l.bin_ns + l.lo_ns - x0_ns) // px_ns, 0) AS c0,
       (b.c1 * l.bin_ns + l.lo_ns - x0_ns) // px_ns AS c1, sum(b.intervals) AS intervals,
       sum(CASE WHEN b.c0 * l.bin_ns + l.lo_ns < x0_ns THEN 0  -- started before the view: clipped to its start
                ELSE b.sum_s + b.intervals * (l.lo_ns - x0_ns) END) AS sum_s,
       sum(b.sum_e + b.intervals * (l.lo_ns - x0_ns)) AS sum_e
FROM timeline_work_bins b JOIN timeline_levels l USING (level)
WHERE b.level = lvl AND b.c1 * l.bin_ns + l.lo_ns >= x0_ns AND b.c0 * l.bin_ns + l.lo_ns < x1_ns
GROUP BY ALL;
