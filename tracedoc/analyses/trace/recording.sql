-- trace.recording: what each timeline input recorded, to say when the GPU side is missing.
--
-- A PyTorch profiler trace recorded without ProfilerActivity.CUDA (or an Nsight Systems report captured without
-- `--trace=cuda`) holds host operators and often the CUDA runtime calls that launched kernels, but no kernels,
-- copies or memsets: every GPU rule then has nothing to judge and the report would read "no problems".
-- One row per timeline source (a format of kind 'timeline' in input_formats: torch, nsys): counts of host ops,
-- runtime/driver calls (launch calls among them) and GPU activity rows; host_ms: the source's host activity span
-- (ms), host_start_ns and host_end_ns its bounds (the ranks of one job record at once, separate runs apart);
-- how_to_record: how its format records GPU activity (input_formats).
-- hands back: trace_recording
-- A table, a row per source: read by trace.summary and device.kinds, each a scan of every event otherwise.
CREATE OR REPLACE TEMP TABLE trace_recording AS
WITH cpu AS (
    SELECT source_id,
           count(*) FILTER (WHERE kind = 'op') AS host_ops,
           count(*) FILTER (WHERE kind IN ('runtime', 'driver')) AS api_calls,
           count(*) FILTER (WHERE kind IN ('runtime', 'driver')
                            AND (name ILIKE '%launch%' OR name ILIKE 'cudaGraphLaunch%')) AS launch_calls,
           count(*) AS host_events,
           (max(ts_ns + dur_ns) - min(ts_ns)) / 1e6 AS host_ms, min(ts_ns) AS host_start_ns,
           max(ts_ns + dur_ns) AS host_end_ns
    FROM cpu_activity GROUP BY source_id
), gpu AS (
    SELECT source_id, count(*) AS gpu_events FROM gpu_activity GROUP BY source_id
)
SELECT s.source_id, s.rank, s.path, s.format,
       coalesce(cpu.host_ops, 0) AS host_ops, coalesce(cpu.api_calls, 0) AS api_calls,
       coalesce(cpu.launch_calls, 0) AS launch_calls, coalesce(cpu.host_events, 0) AS host_events,
       cpu.host_ms, cpu.host_start_ns, cpu.host_end_ns, coalesce(gpu.gpu_events, 0) AS gpu_events,
       f.how_to_record
FROM sources s
JOIN input_formats f ON f.format = s.format AND f.kind = 'timeline'
LEFT JOIN cpu USING (source_id)
LEFT JOIN gpu USING (source_id);
