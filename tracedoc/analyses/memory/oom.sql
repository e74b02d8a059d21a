-- memory.oom: out-of-memory failures, from a trace ('[OutOfMemory]' events) and a snapshot's history ('oom'
-- actions). Bytes, ns.
--
-- The failing request, what the allocator held then (allocated and reserved, from the trace), what CUDA said was
-- free (the snapshot), the site that asked (the snapshot's frames, else the trace's Python frame or operator), and
-- the step it happened in, and the three sites that held most at the peak before it (memory.peak). Reserved − allocated at the failure is memory the allocator held but could not use for
-- the request: when it exceeds the request, fragmentation caused the failure.
-- reads: memory_events, memory_segments, memory_blocks, memory_actions
-- include: memory.timeline
-- include: memory.snapshot
-- include: memory.peak

CREATE OR REPLACE TEMP TABLE memory_ooms AS
WITH trace AS (
    SELECT e.source_id, e.rank, e.device, e.ts_ns, e.step, e.bytes AS requested_bytes,
           e.total_allocated AS allocated_bytes, e.total_reserved AS reserved_bytes, c.base_ns, e.tid
    FROM memory_gpu_events e LEFT JOIN memory_trace_clock c USING (source_id)
    WHERE e.kind = 'oom'
),
snap AS (
    SELECT a.source_id AS snapshot_id, ss.trace_id, ss.rank, a.device, a.time_ns, a.size AS requested_bytes,
           a.device_free, a.site, a.stack
    FROM memory_actions a LEFT JOIN memory_snapshot_sources ss ON ss.snapshot_id = a.source_id
    WHERE a.action = 'oom'
),
joined AS (
    SELECT t.source_id, coalesce(t.rank, s.rank) AS rank, coalesce(t.device, s.device) AS device, t.ts_ns, t.step,
           coalesce(t.requested_bytes, s.requested_bytes) AS requested_bytes, t.allocated_bytes, t.reserved_bytes,
           s.device_free AS device_free_bytes, s.site AS snapshot_site, s.stack, s.snapshot_id, t.tid
    FROM trace t FULL JOIN snap s
      ON s.trace_id = t.source_id AND s.device = t.device AND s.requested_bytes = t.requested_bytes
     AND abs(s.time_ns - (t.ts_ns + t.base_ns)) < 5000000
),
frames AS (
    SELECT j.source_id, j.device, j.ts_ns,
           arg_max(memory_user_frame(c.name), c.ts_ns)
               FILTER (WHERE c.kind = 'python' AND memory_user_frame(c.name) IS NOT NULL) AS py_site,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'op') AS op
    FROM joined j
    JOIN cpu_activity c ON c.source_id = j.source_id AND c.tid = j.tid AND c.ts_ns <= j.ts_ns
                       AND j.ts_ns <= c.ts_ns + c.dur_ns AND c.kind IN ('op', 'python')
    GROUP BY ALL
)
SELECT j.* EXCLUDE (tid), f.op, coalesce(j.snapshot_site, f.py_site, f.op) AS site,
       j.reserved_bytes - j.allocated_bytes AS unused_reserved_bytes,
       d.capacity_bytes, d.peak_bytes,
       (SELECT string_agg(site || ' ' || format_bytes(CAST(bytes AS BIGINT)), ', ' ORDER BY bytes DESC, site)
        FROM (SELECT * FROM memory_peak_sites p WHERE p.source_id = j.source_id AND p.device = j.device
              ORDER BY bytes DESC, site LIMIT 3)) AS largest_live
FROM joined j
LEFT JOIN frames f ON f.source_id = j.source_id AND f.device = j.device AND f.ts_ns = j.ts_ns
LEFT JOIN memory_by_device d ON d.source_id = j.source_id AND d.device = j.device;

-- The report's failed requests of a trace, on memory_report_curve's time axis (memory_ooms). Columns: rank,
-- device, t_ms, requested_bytes, allocated_bytes, site; ts_ns orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW memory_report_oom_points AS
SELECT o.rank, o.device, (o.ts_ns - m.t0_ns) / 1e6 AS t_ms, o.requested_bytes, o.allocated_bytes, o.site, o.ts_ns
FROM memory_ooms o JOIN memory_origin m USING (source_id) WHERE o.ts_ns IS NOT NULL;
