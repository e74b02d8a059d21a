-- memory.peak: what is live at each GPU's peak (memory.timeline), by allocation site. Bytes.
--
-- Live at the peak: allocations recorded in the trace before the peak and not freed by then; what the totals held
-- that the trace never saw allocated (made before it started: parameters, optimizer state) is one row,
-- '(allocated before the trace)'. Sites from memory_sites (memory.timeline): the snapshot's frames, else the
-- user's Python frame, else the operator, else the annotation.
-- include: memory.timeline
-- include: memory.snapshot

CREATE OR REPLACE TEMP TABLE memory_peak_sites AS
WITH live AS (
    SELECT a.* FROM memory_allocs a JOIN memory_peaks p USING (source_id, device)
    WHERE a.ts_ns <= p.peak_ns AND (a.freed_ns IS NULL OR a.freed_ns > p.peak_ns)
),
named AS (
    SELECT l.source_id, l.rank, l.device, l.bytes, coalesce(n.site, '(unknown)') AS site
    FROM live l
    LEFT JOIN memory_sites n ON n.source_id = l.source_id AND n.device = l.device AND n.addr = l.addr
                            AND n.ts_ns = l.ts_ns
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
