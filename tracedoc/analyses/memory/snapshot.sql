-- memory.snapshot: the allocator snapshots (memory_segments, memory_blocks, memory_actions) summarised, and tied to
-- the trace of the same run. Bytes, ns.
--
-- Joining: a snapshot's history times are µs since the epoch, a trace's are its own clock plus
-- baseTimeNanoseconds (memory_trace_clock). An allocation of the trace and one of the snapshot's history are the
-- same when their device, address and size agree and they happened within 5 ms of each other on that common clock;
-- the snapshot then names the trace's allocation with its Python frames (and the trace gives it a step and an op).
-- A snapshot belongs to the trace with most such matches.
-- reads: memory_events, memory_segments, memory_blocks, memory_actions

-- Trace allocations matched to the snapshot's history: source_id and ts_ns are the trace's.
CREATE OR REPLACE TEMP TABLE memory_snapshot_matches AS
SELECT e.source_id, e.device, e.addr, e.ts_ns, a.source_id AS snapshot_id,
       arg_min(a.site, abs(a.time_ns - (e.ts_ns + c.base_ns))) AS site,
       arg_min(a.stack, abs(a.time_ns - (e.ts_ns + c.base_ns))) AS stack
FROM memory_events e
JOIN memory_trace_clock c USING (source_id)
JOIN memory_actions a ON a.action = 'alloc' AND a.device = e.device AND a.addr = e.addr AND a.size = e.bytes
                     AND a.time_ns BETWEEN e.ts_ns + c.base_ns - 5000000 AND e.ts_ns + c.base_ns + 5000000
WHERE e.kind = 'alloc'
GROUP BY e.source_id, e.device, e.addr, e.ts_ns, a.source_id;

-- Each snapshot with the trace it belongs to (NULL when none matched) and its rank.
CREATE OR REPLACE TEMP TABLE memory_snapshot_sources AS
WITH best AS (
    SELECT snapshot_id, arg_max(source_id, n) AS trace_id, max(n) AS matched
    FROM (SELECT snapshot_id, source_id, count(*) AS n FROM memory_snapshot_matches GROUP BY ALL) GROUP BY ALL
),
snaps AS (
    SELECT source_id FROM memory_segments UNION SELECT source_id FROM memory_actions
)
SELECT s.source_id AS snapshot_id, b.trace_id, coalesce(b.matched, 0) AS matched,
       (SELECT count(*) FROM memory_actions a WHERE a.source_id = s.source_id AND a.action = 'alloc') AS allocs,
       src.rank, src.path
FROM snaps s LEFT JOIN best b ON b.snapshot_id = s.source_id
LEFT JOIN sources src ON src.source_id = b.trace_id;

-- The snapshots given without a trace of their run whose history is read as a trace's events: those of at most
-- 500,000 allocations (torch keeps 100,000 entries by default). A longer history would cost minutes and gigabytes
-- to replay (2.5 million entries: 4 times the CPU of reading the file, 2 GiB); such a snapshot is reported as it
-- was when dumped.
CREATE OR REPLACE TEMP VIEW memory_snapshot_histories AS
SELECT snapshot_id FROM memory_snapshot_sources WHERE trace_id IS NULL AND allocs BETWEEN 1 AND 500000;

-- The history of each snapshot given without a trace of its run, as a trace's allocator events (memory_events'
-- columns; source_id the snapshot's, ts_ns its time since the epoch, rank and tid unknown) with each event's site
-- and stack: 'alloc', 'free' (free_completed: the block free again) and 'oom'. The totals after each event are
-- counted back from the dump: allocated is the segments' allocated bytes at the dump, less what was allocated
-- after the event, plus what was freed after it; reserved likewise from the segments' size (segment_alloc,
-- segment_free). A history is the allocator's last entries (a ring buffer), so counting back is exact over it.
-- What came after an event is the whole history's sum less the running sum up to it: a running sum is one pass,
-- where a frame from the next row to the partition's end took 7 times the CPU (1.26 M entries: 15 s against 2 s).
CREATE OR REPLACE TEMP TABLE memory_snapshot_events AS
WITH alone AS (SELECT snapshot_id AS source_id FROM memory_snapshot_histories),
dump AS (
    SELECT source_id, device, sum(allocated_size) AS allocated, sum(total_size) AS reserved
    FROM memory_segments GROUP BY ALL
),
history AS (
    SELECT a.*,
           CASE a.action WHEN 'alloc' THEN a.size WHEN 'free_completed' THEN -a.size ELSE 0 END AS allocated_delta,
           CASE a.action WHEN 'segment_alloc' THEN a.size WHEN 'segment_free' THEN -a.size ELSE 0 END AS reserved_delta
    FROM memory_actions a SEMI JOIN alone USING (source_id)
    WHERE a.time_ns IS NOT NULL AND a.device >= 0 AND a.size >= 0
),
totals AS (
    SELECT h.*,
           coalesce(d.allocated, 0) - (sum(h.allocated_delta) OVER whole - sum(h.allocated_delta) OVER upto)
               AS total_allocated,
           coalesce(d.reserved, 0) - (sum(h.reserved_delta) OVER whole - sum(h.reserved_delta) OVER upto)
               AS total_reserved
    FROM history h LEFT JOIN dump d USING (source_id, device)
    WINDOW whole AS (PARTITION BY h.source_id, h.device),
           upto AS (PARTITION BY h.source_id, h.device ORDER BY h.seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT source_id, CAST(NULL AS INTEGER) AS rank, CAST(NULL AS BIGINT) AS tid, time_ns AS ts_ns,
       CASE action WHEN 'alloc' THEN 'alloc' WHEN 'free_completed' THEN 'free' ELSE 'oom' END AS kind,
       1 AS device_type, device, CASE WHEN action <> 'oom' THEN addr END AS addr,
       CASE WHEN action = 'free_completed' THEN -size ELSE size END AS bytes,
       total_allocated, total_reserved, site, stack
FROM totals WHERE action IN ('alloc', 'free_completed', 'oom');

-- The annotated ranges of each snapshot given without a trace (record_function ranges, ProfilerStep#N among them:
-- torch records them in the history when they open and close): the k-th START of a name on a device with its k-th
-- END. Columns: source_id, device, name, ts_ns, end_ns.
CREATE OR REPLACE TEMP TABLE memory_snapshot_ranges AS
WITH marks AS (
    SELECT *, row_number() OVER (PARTITION BY source_id, device, name, stage ORDER BY time_ns) AS k
    FROM memory_annotations
    WHERE time_ns IS NOT NULL
      AND source_id IN (SELECT snapshot_id FROM memory_snapshot_histories)
)
SELECT s.source_id, s.device, s.name, s.time_ns AS ts_ns, e.time_ns AS end_ns
FROM marks s JOIN marks e ON e.source_id = s.source_id AND e.device IS NOT DISTINCT FROM s.device
                         AND e.name = s.name AND e.k = s.k AND e.stage = 'END'
WHERE s.stage = 'START' AND e.time_ns >= s.time_ns;

-- The steps of each snapshot given without a trace: its ProfilerStep#N ranges (memory_snapshot_ranges), less the
-- last ones cut short (under a tenth of the median step: the step the profiler opens as it stops). Without them,
-- a repeating allocation pattern: of the allocations of one stack and size made at least 4 times, the one made
-- most often at a steady pace (after the first quarter of them, every gap to the next within a factor 2 of their
-- median, as trace.steps' repeating kernel; then the steadiest, then the first), each step running from one such
-- allocation to the next ('allocation pattern #k'). Warm-up steps as
-- trace.steps': the first ones, for as long as each lasts more than twice the median step (at most half the
-- steps). Columns as trace_steps: source_id, rank (NULL), step, name, ts_ns, dur_ns, warmup.
CREATE OR REPLACE TEMP TABLE memory_snapshot_steps AS
WITH profiler AS (
    SELECT source_id, name, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns
    FROM memory_snapshot_ranges WHERE name LIKE 'ProfilerStep#%' GROUP BY ALL
),
repeats AS (  -- without them: each allocation with the time to the next one of the same stack and size
    SELECT a.source_id, a.device, a.stack, a.size, a.time_ns, row_number() OVER w AS k,
           lead(a.time_ns) OVER w - a.time_ns AS gap_ns
    FROM memory_actions a
    WHERE a.action = 'alloc' AND a.stack IS NOT NULL AND a.time_ns IS NOT NULL
      AND a.source_id IN (SELECT snapshot_id FROM memory_snapshot_histories)
      AND a.source_id NOT IN (SELECT source_id FROM profiler)
    WINDOW w AS (PARTITION BY a.source_id, a.device, a.stack, a.size ORDER BY a.time_ns)
),
keys AS (
    SELECT source_id, device, stack, size, count(*) AS times, min(time_ns) AS first_ns
    FROM repeats GROUP BY ALL HAVING count(*) >= 4
),
pattern AS (  -- the allocation made most often at a steady pace, as trace.steps' repeating kernel
    SELECT * FROM (
        SELECT source_id, device, stack, size, any_value(times) AS times, any_value(first_ns) AS first_ns,
               max(gap_ns) / median(gap_ns) AS spread
        FROM repeats r JOIN keys k USING (source_id, device, stack, size)
        WHERE r.gap_ns IS NOT NULL AND r.k > k.times // 4
        GROUP BY source_id, device, stack, size
        HAVING max(gap_ns) <= 2 * median(gap_ns) AND min(gap_ns) >= median(gap_ns) / 2)
    QUALIFY row_number() OVER (PARTITION BY source_id ORDER BY times DESC, spread, first_ns, stack, size) = 1
),
marks AS (
    SELECT * FROM profiler
    UNION ALL
    SELECT r.source_id, 'allocation pattern #' || r.k AS name, r.time_ns AS ts_ns, r.time_ns + r.gap_ns AS end_ns
    FROM repeats r SEMI JOIN pattern p USING (source_id, device, stack, size)
    WHERE r.gap_ns IS NOT NULL
),
timed AS (
    SELECT *, end_ns - ts_ns AS dur_ns, median(end_ns - ts_ns) OVER (PARTITION BY source_id) AS median_ns
    FROM marks WHERE end_ns > ts_ns
),
kept AS (  -- the trailing steps cut short left out
    SELECT * FROM timed t
    WHERE t.dur_ns >= t.median_ns / 10
       OR EXISTS (SELECT 1 FROM timed l WHERE l.source_id = t.source_id AND l.ts_ns > t.ts_ns
                  AND l.dur_ns >= l.median_ns / 10)
),
ordered AS (
    SELECT *, row_number() OVER (PARTITION BY source_id ORDER BY ts_ns) AS n,
           count(*) OVER (PARTITION BY source_id) AS steps
    FROM kept
),
slow AS (
    SELECT source_id, least(coalesce(min(n) FILTER (WHERE dur_ns <= 2 * median_ns), any_value(steps) + 1) - 1,
                            any_value(steps) // 2) AS slow_steps
    FROM ordered GROUP BY source_id
)
SELECT o.source_id, CAST(NULL AS INTEGER) AS rank, TRY_CAST(regexp_extract(o.name, '#([0-9]+)$', 1) AS INTEGER) AS step,
       o.name, o.ts_ns, o.dur_ns, o.n <= s.slow_steps AS warmup
FROM ordered o JOIN slow s USING (source_id);

-- Per snapshot and device, what its segments hold when it was dumped (as memory_viz's segsum): reserved, allocated
-- (live blocks), free inside segments, free inside segments that also hold live blocks (memory the allocator cannot
-- give back with empty_cache), the largest free block, segments, and expandable segments; and the site whose live
-- blocks pin most of that stranded space (each segment with holes counted for the site holding most of its live
-- bytes: `pinning_site`, `pinning_stranded_bytes` the holes in the segments it pins).
CREATE OR REPLACE TEMP TABLE memory_snapshot_summary AS
WITH blocks AS (
    SELECT source_id, device, segment_address,
           sum(size) FILTER (WHERE state = 'inactive') AS free_bytes,
           max(size) FILTER (WHERE state = 'inactive') AS largest_free,
           sum(size) FILTER (WHERE state <> 'inactive') AS live_bytes
    FROM memory_blocks GROUP BY ALL
),
segment_pins AS (  -- per segment with holes and live blocks: the site holding most of its live bytes
    SELECT source_id, device, segment_address, arg_max(site, (bytes, site)) AS site,
           any_value(free_bytes) AS stranded_bytes
    FROM (SELECT b.source_id, b.device, b.segment_address, coalesce(b.site, CASE WHEN b.stack IS NULL THEN '(no frames recorded)' ELSE '(no Python frames)' END) AS site,
                 sum(b.size) AS bytes, any_value(g.free_bytes) AS free_bytes
          FROM memory_blocks b
          JOIN blocks g USING (source_id, device, segment_address)
          WHERE b.state <> 'inactive' AND coalesce(g.free_bytes, 0) > 0
          GROUP BY ALL)
    GROUP BY ALL
),
pins AS (
    SELECT source_id, device, arg_max(site, (bytes, site)) AS site, max(bytes) AS bytes
    FROM (SELECT source_id, device, site, sum(stranded_bytes) AS bytes FROM segment_pins GROUP BY ALL)
    GROUP BY ALL
)
SELECT s.source_id AS snapshot_id, ss.trace_id, ss.rank, s.device,
       count(*) AS segments, sum(s.total_size) AS reserved_bytes, sum(s.allocated_size) AS allocated_bytes,
       sum(coalesce(b.free_bytes, 0)) AS free_bytes,
       sum(coalesce(b.free_bytes, 0)) FILTER (WHERE coalesce(b.live_bytes, 0) > 0) AS free_in_used_segments_bytes,
       max(b.largest_free) AS largest_free_bytes,
       max(b.largest_free) FILTER (WHERE coalesce(b.live_bytes, 0) > 0) AS largest_free_in_used_bytes,
       bool_or(s.is_expandable) AS expandable,
       any_value(p.site) AS pinning_site, any_value(p.bytes) AS pinning_stranded_bytes
FROM memory_segments s
LEFT JOIN blocks b ON b.source_id = s.source_id AND b.device = s.device AND b.segment_address = s.address
LEFT JOIN memory_snapshot_sources ss ON ss.snapshot_id = s.source_id
LEFT JOIN pins p ON p.source_id = s.source_id AND p.device IS NOT DISTINCT FROM s.device
GROUP BY s.source_id, ss.trace_id, ss.rank, s.device;

-- Per snapshot, device and site: the live blocks when it was dumped.
CREATE OR REPLACE TEMP TABLE memory_snapshot_sites AS
SELECT source_id AS snapshot_id, device, coalesce(site, CASE WHEN stack IS NULL THEN '(no frames recorded)' ELSE '(no Python frames)' END) AS site, any_value(stack) AS stack,
       count(*) AS blocks, sum(size) AS bytes
FROM memory_blocks WHERE state <> 'inactive' GROUP BY ALL;
