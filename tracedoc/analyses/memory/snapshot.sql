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
    FROM (SELECT b.source_id, b.device, b.segment_address, coalesce(b.site, '(no frames recorded)') AS site,
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
SELECT source_id AS snapshot_id, device, coalesce(site, '(no frames recorded)') AS site, any_value(stack) AS stack,
       count(*) AS blocks, sum(size) AS bytes
FROM memory_blocks WHERE state <> 'inactive' GROUP BY ALL;
