-- gpu.busy: when each GPU was doing work.
--
-- Work is every kernel, memcpy and memset (GPU-side synchronization records are waiting, not work). Busy
-- intervals are the union of work over all streams of a device, clipped to the trace window. Times in ns.
-- hands back: gpu_busy_by_device
-- include: trace.window
-- include: intervals.merge

-- GPU work inside the analysed window.
CREATE OR REPLACE TEMP VIEW gpu_work AS
SELECT a.*, a.ts_ns + a.dur_ns AS end_ns
FROM gpu_activity a JOIN trace_windows w USING (source_id)
WHERE a.kind IN ('kernel', 'memcpy', 'memset') AND a.ts_ns + a.dur_ns > w.start_ns AND a.ts_ns < w.end_ns;

-- The work as an interval set per device (intervals.merge), with what gpu_busy_intervals keeps of it.
CREATE OR REPLACE TEMP VIEW gpu_work_intervals AS
SELECT {'source_id': source_id, 'device': device} AS k, ts_ns AS s, end_ns AS e,
       source_id, rank, device, correlation_id AS first_correlation_id
FROM gpu_work;

-- Merged busy intervals per device: overlapping or touching work (on any stream) joined into one interval.
-- Columns: source_id, rank, device, ts_ns (start), end_ns (end), first_correlation_id (the correlation of the
-- interval's first activity, which tells who launched the work that ended the previous idle gap).
CREATE OR REPLACE TEMP TABLE gpu_busy_intervals AS
SELECT source_id, rank, device, s AS ts_ns, e AS end_ns, first_correlation_id
FROM intervals_merge('gpu_work_intervals');

-- Busy time per device. busy_ns: union of work; wall_ns: the window; busy_pct: busy_ns / wall_ns × 100.
CREATE OR REPLACE TEMP VIEW gpu_busy_by_device AS
SELECT b.source_id, b.rank, b.device,
       sum(least(b.end_ns, w.end_ns) - greatest(b.ts_ns, w.start_ns)) AS busy_ns,
       any_value(w.wall_ns) AS wall_ns,
       100.0 * sum(least(b.end_ns, w.end_ns) - greatest(b.ts_ns, w.start_ns)) / nullif(any_value(w.wall_ns), 0)
           AS busy_pct
FROM gpu_busy_intervals b JOIN trace_wall w USING (source_id)
GROUP BY b.source_id, b.rank, b.device;
