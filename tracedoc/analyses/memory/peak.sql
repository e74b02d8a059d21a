-- memory.peak: what is live at each GPU's peak (memory.timeline), by allocation site. Bytes.
--
-- Live at the peak: allocations recorded in the trace before the peak and not freed by then; what the totals held
-- that the trace never saw allocated (made before it started: parameters, optimizer state) is one row,
-- '(allocated before the trace)'. Sites as memory.growth: the snapshot's frames, else the user's Python frame,
-- else the operator, else the annotation.
-- reads: memory_events, memory_segments, memory_blocks, memory_actions
-- include: memory.timeline
-- include: memory.snapshot

CREATE OR REPLACE TEMP TABLE memory_peak_sites AS
WITH live AS (
    SELECT a.* FROM memory_allocs a JOIN memory_peaks p USING (source_id, device)
    WHERE a.ts_ns <= p.peak_ns AND (a.freed_ns IS NULL OR a.freed_ns > p.peak_ns)
),
frames AS (
    SELECT l.source_id, l.device, l.addr, l.ts_ns,
           arg_max(memory_user_frame(c.name), c.ts_ns)
               FILTER (WHERE c.kind = 'python' AND memory_user_frame(c.name) IS NOT NULL) AS py_site,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'op') AS op,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'annotation' AND c.name NOT LIKE 'ProfilerStep#%') AS annotation
    FROM live l
    JOIN cpu_activity c ON c.source_id = l.source_id AND c.tid = l.tid AND c.ts_ns <= l.ts_ns
                       AND l.ts_ns <= c.ts_ns + c.dur_ns AND c.kind IN ('op', 'python', 'annotation')
    GROUP BY ALL
),
named AS (
    SELECT l.source_id, l.rank, l.device, l.bytes, coalesce(j.site, f.py_site, f.op, f.annotation, '(unknown)') AS site
    FROM live l
    LEFT JOIN frames f USING (source_id, device, addr, ts_ns)
    LEFT JOIN memory_snapshot_matches j ON j.source_id = l.source_id AND j.device = l.device AND j.addr = l.addr
                                       AND j.ts_ns = l.ts_ns
),
seen AS (
    SELECT source_id, any_value(rank) AS rank, device, site, count(*) AS allocations, sum(bytes) AS bytes,
           max(bytes) AS largest_bytes
    FROM named GROUP BY source_id, device, site
)
SELECT * FROM seen
UNION ALL
SELECT p.source_id, d.rank, p.device, '(allocated before the trace)', NULL, p.peak_bytes - coalesce(s.bytes, 0), NULL
FROM memory_peaks p JOIN memory_by_device d USING (source_id, device)
LEFT JOIN (SELECT source_id, device, sum(bytes) AS bytes FROM seen GROUP BY ALL) s USING (source_id, device)
WHERE p.peak_bytes - coalesce(s.bytes, 0) > 0;

-- What memory-headroom reads: per GPU, the peak against the device's memory.
CREATE OR REPLACE TEMP VIEW memory_headroom AS
SELECT d.*, 100.0 * d.peak_bytes / d.capacity_bytes AS peak_pct,
       100.0 * d.reserved_peak_bytes / d.capacity_bytes AS reserved_peak_pct,
       d.capacity_bytes - d.reserved_peak_bytes AS headroom_bytes
FROM memory_by_device d WHERE d.capacity_bytes > 0 AND d.ooms = 0;

-- The report's sites live at each GPU's peak (memory_peak_sites). Columns: rank, device, site, allocations, bytes.
CREATE OR REPLACE TEMP VIEW memory_report_peak_sites AS
SELECT rank, device, site, allocations, bytes FROM memory_peak_sites;
