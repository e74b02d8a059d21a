-- gpu.gaps: long stretches in which a GPU does nothing (the "GPU starvation" of nsys analyze's gpu_gaps rule).
--
-- A gap lies between two busy intervals of a device (the union of its kernels, memcpys and memsets on all
-- streams); the idle time before the device's first and after its last work is not a gap. Time the profiler itself
-- spent (nsys_overhead: CUPTI buffer flushes and the like, clipped to the device's first-to-last work) counts as
-- busy, as in nsys, so a gap the profiler caused is not reported. Times in ns.
-- include: gpu.busy
-- include: intervals.gaps

-- Each device's span, from its first work's start to its last work's end (ns).
CREATE OR REPLACE TEMP VIEW gpu_gaps_spans AS
SELECT source_id, any_value(rank) AS rank, device, min(ts_ns) AS first_ns, max(end_ns) AS last_ns
FROM gpu_busy_intervals GROUP BY source_id, device;

-- What counts as busy, as an interval set per device (intervals.gaps): the busy intervals, and the profiler's
-- overhead clipped to the span.
CREATE OR REPLACE TEMP VIEW gpu_gaps_busy AS
SELECT {'source_id': source_id, 'device': device} AS k, ts_ns AS s, end_ns AS e FROM gpu_busy_intervals
UNION ALL
SELECT {'source_id': s.source_id, 'device': s.device}, greatest(o.ts_ns, s.first_ns),
       least(o.ts_ns + o.dur_ns, s.last_ns)
FROM nsys_overhead o JOIN gpu_gaps_spans s ON s.source_id = o.source_id
WHERE o.ts_ns < s.last_ns AND o.ts_ns + o.dur_ns > s.first_ns;

-- Every gap of every device. Columns: source_id, rank, device, ts_ns/end_ns/dur_ns (the gap).
CREATE OR REPLACE TEMP TABLE gpu_gaps_all AS
SELECT s.source_id, s.rank, s.device, g.s AS ts_ns, g.e AS end_ns, g.e - g.s AS dur_ns
FROM intervals_gaps('gpu_gaps_busy') g
JOIN gpu_gaps_spans s ON s.source_id = g.k.source_id AND s.device IS NOT DISTINCT FROM g.k.device;

-- Gaps of at least min_gap_ms per device: how many, their total and longest length (ns), where the longest
-- starts (ns into the trace: after its first recorded activity; of gaps as long, the first), their share of the
-- window (%), and the user
-- annotation (NVTX range or profiler annotation) that covers at least half of the longest gap and is shortest
-- (the host's innermost work then; NULL when none).
CREATE OR REPLACE TEMP MACRO gpu_gaps_long(min_gap_ms) AS TABLE
WITH long AS (
    SELECT * FROM gpu_gaps_all WHERE dur_ns >= min_gap_ms * 1e6
),
per_device AS (
    SELECT source_id, any_value(rank) AS rank, device, count(*) AS gap_count, sum(dur_ns) AS gap_ns,
           max(dur_ns) AS longest_gap_ns, arg_max(ts_ns, (dur_ns, -ts_ns)) AS longest_ts_ns
    FROM long GROUP BY source_id, device
)
SELECT p.source_id, p.rank, p.device, p.gap_count, p.gap_ns, p.longest_gap_ns,
       p.longest_ts_ns - t.capture_start_ns AS longest_gap_at_ns,
       100.0 * p.gap_ns / nullif(w.wall_ns, 0) AS gap_pct,
       min_gap_ms AS min_gap_ms, w.wall_ns,
       (SELECT arg_min(c.name, (c.dur_ns, c.name)) FROM cpu_activity c
        WHERE c.source_id = p.source_id AND c.kind = 'annotation'
          AND least(c.ts_ns + c.dur_ns, p.longest_ts_ns + p.longest_gap_ns) - greatest(c.ts_ns, p.longest_ts_ns)
              >= 0.5 * p.longest_gap_ns) AS host_annotation
FROM per_device p JOIN trace_wall w USING (source_id) JOIN trace_windows t USING (source_id);
