-- memory.fragmentation: memory the caching allocator reserves but no tensor uses. Bytes.
--
-- From a trace: reserved − allocated at the peak of reserved memory (the most the allocator held), per GPU. From a
-- snapshot: free space inside segments that also hold live blocks, which empty_cache() cannot return and which
-- serves only requests that fit its holes, the largest such hole (memory_viz's segsum), and the allocation site
-- whose live tensors pin most of those segments (`pinning_site`; `pinning_stranded_bytes`: the holes in them).
-- include: memory.timeline
-- include: memory.snapshot

CREATE OR REPLACE TEMP TABLE memory_fragmentation AS
WITH trace AS (
    SELECT source_id, any_value(rank) AS rank, device,
           arg_max(total_reserved, (total_reserved, -ts_ns)) AS reserved_bytes,
           arg_max(total_allocated, (total_reserved, -ts_ns)) AS allocated_bytes
    FROM memory_gpu_events WHERE kind <> 'oom' GROUP BY source_id, device
)
SELECT coalesce(t.source_id, s.trace_id) AS source_id, coalesce(t.rank, s.rank) AS rank,
       coalesce(t.device, s.device) AS device, s.snapshot_id,
       t.reserved_bytes AS trace_reserved_bytes, t.allocated_bytes AS trace_allocated_bytes,
       t.reserved_bytes - t.allocated_bytes AS trace_unused_bytes,
       s.reserved_bytes AS snapshot_reserved_bytes, s.allocated_bytes AS snapshot_allocated_bytes,
       s.free_in_used_segments_bytes AS stranded_bytes, s.largest_free_in_used_bytes AS largest_stranded_bytes,
       s.free_bytes AS snapshot_free_bytes, s.largest_free_bytes, s.expandable,
       s.pinning_site, s.pinning_stranded_bytes,
       100.0 * s.free_in_used_segments_bytes / nullif(s.reserved_bytes, 0) AS stranded_pct,
       100.0 * (t.reserved_bytes - t.allocated_bytes) / nullif(t.reserved_bytes, 0) AS trace_unused_pct
FROM trace t FULL JOIN memory_snapshot_summary s  -- a snapshot given alone is its own trace (memory.timeline)
  ON coalesce(s.trace_id, s.snapshot_id) = t.source_id AND s.device = t.device;
