-- memory.oom: out-of-memory failures, from a trace ('[OutOfMemory]' events) and a snapshot's history ('oom'
-- actions). Bytes, ns.
--
-- The failing request, what the allocator held then (allocated and reserved, from the trace), what CUDA said was
-- free (the snapshot), the site that asked (memory_sites: the snapshot's frames, else the trace's Python frame,
-- operator or annotation), the step it happened in, and the three sites that held most at the peak before it
-- (memory.peak). Reserved − allocated at the failure is memory the allocator held but could not use for the
-- request: when it exceeds the request, fragmentation caused the failure. Only the first ten failures of each
-- input are kept (a program that catches the error and tries again can fail thousands of times): more_ooms
-- counts the others (NULL: none).
--
-- A per-process cap (torch.cuda.set_per_process_memory_fraction, or a limit like it) fails a request while the device
-- still has room: `capped` when CUDA said more than the request was free (a snapshot's device_free) or, without a
-- snapshot, when reserved + the request is under 90 % of the device's memory (there, other processes' memory may
-- also be what ran out). The cap then lies between the reserved bytes and `cap_limit_bytes` (reserved + the
-- request: what the allocator would have held), at most `cap_pct` of the device's memory (from the trace header;
-- from a snapshot alone, CUDA's free memory plus the reserved bytes, which the device's memory is at least);
-- `cap_text` says so in words for the finding.
-- include: memory.timeline
-- include: memory.snapshot
-- include: memory.peak

CREATE OR REPLACE TEMP TABLE memory_ooms AS
WITH trace AS (
    SELECT e.source_id, e.rank, e.device, e.ts_ns, e.step, e.bytes AS requested_bytes,
           e.total_allocated AS allocated_bytes, e.total_reserved AS reserved_bytes, c.base_ns, e.tid
    FROM memory_gpu_events e LEFT JOIN memory_trace_clock c USING (source_id)
    WHERE e.kind = 'oom'
    QUALIFY row_number() OVER (PARTITION BY e.source_id ORDER BY e.ts_ns, e.device) <= 10
),
snap AS (
    SELECT a.source_id AS snapshot_id, ss.trace_id, ss.rank, a.device, a.time_ns, a.size AS requested_bytes,
           a.device_free, a.site, a.stack
    FROM memory_actions a LEFT JOIN memory_snapshot_sources ss ON ss.snapshot_id = a.source_id
    WHERE a.action = 'oom'
    QUALIFY row_number() OVER (PARTITION BY a.source_id ORDER BY a.time_ns, a.device, a.seq) <= 10
),
-- every failure of each input, of which the first ten are kept
counted AS (
    SELECT source_id, count(*) AS failures FROM memory_gpu_events WHERE kind = 'oom' GROUP BY ALL
    UNION ALL
    SELECT source_id, count(*) FROM memory_actions WHERE action = 'oom' GROUP BY ALL
),
joined AS (
    SELECT t.source_id, coalesce(t.rank, s.rank) AS rank, coalesce(t.device, s.device) AS device, t.ts_ns, t.step,
           coalesce(t.requested_bytes, s.requested_bytes) AS requested_bytes, t.allocated_bytes, t.reserved_bytes,
           s.device_free AS device_free_bytes, s.site AS snapshot_site, s.stack, s.snapshot_id, t.tid
    FROM trace t FULL JOIN snap s  -- a snapshot given alone is its own trace (memory_snapshot_events)
      ON coalesce(s.trace_id, s.snapshot_id) = t.source_id AND s.device = t.device
     AND s.requested_bytes = t.requested_bytes AND abs(s.time_ns - (t.ts_ns + coalesce(t.base_ns, 0))) < 5000000
)
SELECT j.* EXCLUDE (tid), n.op, coalesce(j.snapshot_site, n.site) AS site,
       nullif(greatest(coalesce(c.failures, 0), coalesce(cs.failures, 0), 10) - 10, 0) AS more_ooms,
       coalesce(j.device_free_bytes > j.requested_bytes,
                j.reserved_bytes + j.requested_bytes < 0.9 * d.capacity_bytes) AS capped,
       j.reserved_bytes - j.allocated_bytes AS unused_reserved_bytes,
       d.capacity_bytes, d.peak_bytes,
       (SELECT string_agg(site || ' ' || format_bytes(CAST(bytes AS BIGINT)), ', ' ORDER BY bytes DESC)
        FROM (SELECT * FROM memory_peak_sites p WHERE p.source_id = j.source_id AND p.device = j.device
              ORDER BY bytes DESC LIMIT 3)) AS largest_live
FROM joined j
LEFT JOIN memory_sites n ON n.source_id = j.source_id AND n.device = j.device AND n.addr IS NULL
                        AND n.ts_ns = j.ts_ns
LEFT JOIN memory_by_device d ON d.source_id = j.source_id AND d.device = j.device
LEFT JOIN counted c ON c.source_id = j.source_id
LEFT JOIN counted cs ON cs.source_id = j.snapshot_id;

-- What the oom rule reads: each failure (memory_ooms) with the cap it hit, in bytes and in words, where it hit one,
-- and the advice to record a snapshot only where none was given.
CREATE OR REPLACE TEMP VIEW memory_oom_findings AS
WITH o AS (
    SELECT o.*,
           CASE WHEN capped THEN reserved_bytes + requested_bytes END AS cap_limit_bytes,
           CASE WHEN capped THEN 100.0 * (reserved_bytes + requested_bytes)
                                 / nullif(coalesce(capacity_bytes, device_free_bytes + reserved_bytes), 0) END AS cap_pct
    FROM memory_ooms o
)
SELECT o.*,
       CASE WHEN capped THEN
           'The device was not full' ||
           coalesce(' (CUDA still had ' || format_bytes(CAST(device_free_bytes AS BIGINT)) || ' free)', '') ||
           ': the process''s own memory cap stopped it' ||
           CASE WHEN device_free_bytes IS NULL THEN ' (or other processes'' memory on the GPU)' ELSE '' END ||
           coalesce(', a cap between ' || format_bytes(CAST(reserved_bytes AS BIGINT)) || ' (reserved) and ' ||
                    format_bytes(CAST(cap_limit_bytes AS BIGINT)) || ' (reserved + the request)' ||
                    coalesce(', ' || printf('%.1f', 100.0 * reserved_bytes / nullif(capacity_bytes, 0)) || '–' ||
                             printf('%.1f', cap_pct) || '% of the device',
                             ', under ' || printf('%.1f', cap_pct) || '% of the device', ''), '') ||
           ': torch.cuda.set_per_process_memory_fraction, or a container or MIG limit.'
       END AS cap_text,
       CASE WHEN capped THEN 'Raise the cap (`torch.cuda.set_per_process_memory_fraction`) if the job may use more of '
                             || 'the device; else stay under it. ' END AS cap_fix,
       CASE WHEN snapshot_id IS NULL THEN ' Record the failure with `torch.cuda.memory._record_memory_history()` and '
                                          || '`_dump_snapshot()` to see every live tensor''s stack.' END AS record_advice
FROM o;

-- The report's failed requests of a trace, on memory_report_curve's time axis (memory_ooms). Columns: rank,
-- device, t_ms, requested_bytes, allocated_bytes, site; ts_ns orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW memory_report_oom_points AS
SELECT o.rank, o.device, (o.ts_ns - m.t0_ns) / 1e6 AS t_ms, o.requested_bytes, o.allocated_bytes, o.site, o.ts_ns
FROM memory_ooms o JOIN memory_origin m USING (source_id) WHERE o.ts_ns IS NOT NULL;
