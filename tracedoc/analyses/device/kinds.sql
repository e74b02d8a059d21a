-- device.kinds: what kind of device activity each timeline input recorded, to say why no GPU verdict was possible.
--
-- tracedoc analyses CUDA and ROCm (HIP) kernels, copies and memsets. A trace without any may have been recorded
-- without its GPU side (trace.recording), may hold device activity of a kind tracedoc does not analyse (MTIA's
-- 'mtia_ccp_events'; the CUPTI range profiler's per-kernel counters, 'cuda_profiler_range', which replace the
-- kernel timeline), or may come from a job that ran on the CPU alone (the profiler listed no GPU: an empty
-- deviceProperties, and no CUDA or HIP runtime call). An unanalysed category is device-side when most of its events
-- lie on processes that hold no host operator, annotation or runtime call: Kineto writes device activity under the
-- device's index, not the host process.
-- include: trace.recording

-- One row per unanalysed category of a source: events (count), dur_ns (summed, ns) and on_device (true when most
-- of its events are on processes without host activity).
CREATE OR REPLACE TEMP VIEW device_other_categories AS
WITH host_pids AS (
    SELECT DISTINCT source_id, pid FROM cpu_activity
    WHERE kind IN ('op', 'annotation', 'runtime', 'driver', 'python') AND pid IS NOT NULL
      AND source_id IN (SELECT source_id FROM torch_other_events)
)
SELECT o.source_id, o.category, sum(o.events) AS events, sum(o.dur_ns) AS dur_ns,
       sum(o.events) FILTER (WHERE h.pid IS NULL) > sum(o.events) / 2 AS on_device
FROM torch_other_events o
LEFT JOIN host_pids h ON h.source_id = o.source_id AND h.pid = TRY_CAST(o.pid AS BIGINT)
GROUP BY o.source_id, o.category;

-- Per timeline source: every column of trace_recording, plus device_events (events of device-side categories
-- tracedoc does not analyse, count), device_categories (those categories with their counts, most first, e.g.
-- 'mtia_ccp_events: 1,313'), profiler_ranges (CUPTI range-profiler ranges among them, count), host_only_events
-- (host_events without those device events), declared_gpus (deviceProperties entries; NULL without the member),
-- backend (distributedInfo.backend), cpu_only (the profiler listed no GPU, and the trace holds no CUDA or HIP call,
-- no GPU activity and no device events), and device_fix (what would let the device be analysed). A table: three
-- rules read it.
CREATE OR REPLACE TEMP TABLE device_kinds AS
WITH dev AS (
    SELECT source_id, sum(events) AS device_events,
           string_agg(category || ': ' || format('{:,}', events), ', ' ORDER BY events DESC, category)
               AS device_categories,
           coalesce(sum(events) FILTER (WHERE lower(category) = 'cuda_profiler_range'), 0) AS profiler_ranges
    FROM device_other_categories WHERE on_device GROUP BY source_id
)
SELECT r.*, coalesce(d.device_events, 0) AS device_events, d.device_categories,
       coalesce(d.profiler_ranges, 0) AS profiler_ranges,
       r.host_events - coalesce(d.device_events, 0) AS host_only_events,
       h.device_properties AS declared_gpus, h.backend,
       coalesce(h.device_properties = 0 AND r.api_calls = 0 AND r.gpu_events = 0
                AND coalesce(d.device_events, 0) = 0, false) AS cpu_only,
       CASE WHEN coalesce(d.profiler_ranges, 0) > 0
            THEN 'These are the CUPTI range profiler''s per-kernel counters (torch.profiler''s experimental_config '
                 || 'with profiler_metrics), recorded instead of the kernel timeline: for a timeline tracedoc can '
                 || 'analyse, record the same steps again without profiler_metrics.'
            ELSE 'tracedoc reads CUDA and ROCm (HIP) GPU activity only: open this trace with a tool that reads '
                 || 'this device''s events (Perfetto''s trace viewer shows them; HTA reads MTIA traces).'
       END AS device_fix
FROM trace_recording r
LEFT JOIN dev d USING (source_id)
LEFT JOIN torch_headers h USING (source_id);
