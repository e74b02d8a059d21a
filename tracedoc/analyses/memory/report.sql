-- memory.report: the report's ``memory`` section, one row per GPU, its details nested (STRUCT, LIST of STRUCT).
-- Bytes throughout; a figure the inputs cannot give is NULL.
--
-- memory_report_devices: per source and GPU with allocator events in a trace, what its figures count (basis:
-- 'allocator' or 'cuda', memory.timeline), the curve summarised, the peak and where it happened, the growth per
-- steady step, the sites behind the peak and the growth, fragmentation and out-of-memory failures; then the devices
-- of snapshots given without a trace of their run. A column added to a view is a key of the report's entries.
-- reads: memory_events, memory_segments, memory_blocks, memory_actions
-- include: memory.growth
-- include: memory.peak
-- include: memory.fragmentation
-- include: memory.oom

-- The report's memory entry per source and GPU of a trace. Columns: rank, device, basis, capacity_bytes,
-- peak_bytes, peak_at (step, op, site), reserved_bytes (at the end), reserved_peak_bytes, allocated_start_bytes,
-- allocated_end_bytes, growth_bytes_per_step, growth_r2, steady_steps, steps_to_oom (memory.growth), top_sites
-- (the five sites holding most at the peak: site, bytes, allocations), by_role (what is live at the peak by role,
-- memory_peak_roles: role, bytes, allocations; the allocator's basis only, else empty), growth_sites (the five behind the growth:
-- site, op, bytes_per_step, allocations), fragmentation (every column of memory_fragmentation but its keys; NULL
-- without a row) and ooms (step, requested_bytes, allocated_bytes, reserved_bytes, device_free_bytes, site, op);
-- source_id orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW memory_report_devices AS
WITH top_sites AS (
    SELECT source_id, device,
           list({'site': site, 'bytes': bytes, 'allocations': allocations} ORDER BY bytes DESC, site)[:5] AS sites
    FROM memory_peak_sites GROUP BY ALL
),
roles AS (
    SELECT source_id, device,
           list({'role': role, 'bytes': bytes, 'allocations': allocations} ORDER BY bytes DESC, role) AS roles
    FROM memory_peak_roles GROUP BY ALL
),
growth_sites AS (
    SELECT source_id, device,
           list({'site': site, 'op': op, 'bytes_per_step': bytes_per_step, 'allocations': allocations}
                ORDER BY bytes_per_step DESC, site)[:5] AS sites
    FROM memory_growth_sites GROUP BY ALL
),
fragmentation AS (
    SELECT f.source_id AS key_source, f.device AS key_device, any_value(x) AS fragmentation
    FROM memory_fragmentation f,
         LATERAL (SELECT f.* EXCLUDE (source_id, rank, device)) x
    GROUP BY ALL
),
ooms AS (
    SELECT source_id, device,
           list({'step': step, 'requested_bytes': requested_bytes, 'allocated_bytes': allocated_bytes,
                 'reserved_bytes': reserved_bytes, 'device_free_bytes': device_free_bytes, 'site': site, 'op': op}
                ORDER BY ts_ns) AS ooms
    FROM memory_ooms WHERE source_id IS NOT NULL GROUP BY ALL
)
SELECT d.rank, d.device, d.basis, d.capacity_bytes, d.peak_bytes,
       {'step': d.peak_step, 'op': d.peak_op, 'site': d.peak_site} AS peak_at,
       d.reserved_end AS reserved_bytes, d.reserved_peak_bytes,
       d.allocated_start AS allocated_start_bytes, d.allocated_end AS allocated_end_bytes,
       g.growth_bytes_per_step, g.r2 AS growth_r2, g.steady_steps, g.steps_to_oom,
       coalesce(t.sites, []) AS top_sites,
       CASE WHEN d.basis = 'allocator' THEN coalesce(r.roles, []) ELSE [] END AS by_role,
       coalesce(s.sites, []) AS growth_sites, f.fragmentation,
       coalesce(o.ooms, []) AS ooms, d.source_id
FROM memory_by_device d
LEFT JOIN memory_growth g USING (source_id, device)
LEFT JOIN top_sites t USING (source_id, device)
LEFT JOIN roles r USING (source_id, device)
LEFT JOIN growth_sites s USING (source_id, device)
LEFT JOIN fragmentation f ON f.key_source = d.source_id AND f.key_device = d.device
LEFT JOIN ooms o USING (source_id, device);

-- The report's memory entry per device of a snapshot given without a trace of its run, what a snapshot tells.
-- Columns: rank, capacity_bytes, peak_bytes, peak_at and growth_bytes_per_step NULL (a trace's figures), device,
-- basis ('allocator'), reserved_bytes and allocated_end_bytes (when it was dumped), top_sites (the five sites
-- holding most: site, bytes, allocations as blocks), fragmentation (as above) and ooms (requested_bytes,
-- device_free_bytes, site); snapshot_id orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW memory_report_snapshots AS
WITH top_sites AS (
    SELECT snapshot_id, device,
           list({'site': site, 'bytes': bytes, 'allocations': blocks} ORDER BY bytes DESC, site)[:5] AS sites
    FROM memory_snapshot_sites GROUP BY ALL
),
ooms AS (
    SELECT snapshot_id, device,
           list({'requested_bytes': requested_bytes, 'device_free_bytes': device_free_bytes, 'site': site}) AS ooms
    FROM memory_ooms WHERE source_id IS NULL GROUP BY ALL
)
SELECT NULL::INTEGER AS rank, f.device, 'allocator' AS basis, NULL::BIGINT AS capacity_bytes,
       NULL::BIGINT AS peak_bytes, NULL::STRUCT(step BIGINT, op VARCHAR, site VARCHAR) AS peak_at,
       f.snapshot_reserved_bytes AS reserved_bytes, f.snapshot_allocated_bytes AS allocated_end_bytes,
       NULL::DOUBLE AS growth_bytes_per_step, coalesce(t.sites, []) AS top_sites, x AS fragmentation,
       coalesce(o.ooms, []) AS ooms, f.snapshot_id
FROM memory_fragmentation f,
     LATERAL (SELECT f.* EXCLUDE (source_id, rank, device)) x
LEFT JOIN top_sites t ON t.snapshot_id = f.snapshot_id AND t.device = f.device
LEFT JOIN ooms o ON o.snapshot_id = f.snapshot_id AND o.device = f.device
WHERE f.source_id IS NULL;
