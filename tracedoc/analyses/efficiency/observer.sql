-- efficiency.observer: the profiler's own cost on the host, and the step time of the run without it.
--
-- The PyTorch profiler slows the host it watches: every operator, runtime call and Python frame it records costs
-- the host a few microseconds of bookkeeping (more with record_shapes, with_stack, profile_memory). Where the GPU
-- sets the step's pace that cost hides behind the queued work; where the host does, the GPU waits for it and the
-- traced step is longer than the unprofiled one (an eager decode: twice as long).
--
--   traced step       the step's span: the host's ProfilerStep (or step range) or the GPU's span of the work
--                     launched in it, whichever is longer (trace.steps' span)
--   GPU floor         the GPU's busy time for the work launched in the step (kernels, copies, memsets on any
--                     stream, merged): the step cannot run faster than its own GPU work, profiled or not
--   host-paced idle   the traced step less the floor: time the GPU waited
--   critical events   host events (operators, runtime and driver calls, Python frames) that start while the GPU
--                     is idle: their bookkeeping lengthens the step; those that start while it is busy are hidden
--   per-event cost    k × the median duration of the trace's kernel launch calls (cudaLaunchKernel,
--                     cuLaunchKernel…): a launch call is the same small piece of host work in every program, and
--                     under the profiler it carries the profiler's callback, so its time scales with the host's
--                     speed and with what the profiler does per event. k is declared with the format
--                     (input_formats' profiler_k, profiler_k_least). PyTorch profiler: k = 0.55 (0.3 at the
--                     least), calibrated on two eager decode loops whose CUDA-event step time without the profiler
--                     is known (docs/efficiency.md): 0.58 on an H100 host without shapes, 0.55 on an H200 host with
--                     shapes. Nsight Systems (its CUDA API calls, runtime and driver, are the events): k = 1.1
--                     (0.6 at the least), from an eager PyTorch loop and a CuPy loop captured with
--                     -t cuda,nvtx,osrt whose step without nsys is known: 1.12 and 0.69
--   profiler cost     min(host-paced idle, critical events × per-event cost)
--   unprofiled step   traced step − profiler cost (k = 0.55), never under the floor; its range runs from the
--                     floor (the GPU's own work: the least the step can take) to the traced step less the cost at
--                     k = 0.3 (the least the profiler can have cost), never above the traced step
--   gpu_paced         the estimate lies within 10 % of the floor: without the profiler the GPU sets the pace
--   recorded with     what the trace shows the profiler ran with: shapes (op_shapes rows), stacks (Python frames),
--                     memory (allocator events); nsys for an Nsight Systems capture
-- profiler_cost_sum_ns: the cost over all the steady steps, for the findings whose idle it lengthens
-- (gpu.launch's launch-bound, attribution.host's gpu-idle-host-bound).
-- One row per trace with steady steps and launch calls of a format whose profiler's host cost is modelled
-- (input_formats' profiler_k: the PyTorch profiler, Nsight Systems); times are means per steady step, in ns.
-- include: trace.steps

-- The estimate per source (the columns the header describes).
CREATE OR REPLACE TEMP TABLE efficiency_observer AS
WITH spans AS (
    SELECT s.source_id, s.rank, s.step, s.ts_ns,
           greatest(s.dur_ns, coalesce(max(w.end_ns) - min(w.ts_ns), 0)) AS traced_ns
    FROM trace_steady_steps s
    LEFT JOIN trace_step_work w ON w.source_id = s.source_id AND w.step = s.step
    GROUP BY s.source_id, s.rank, s.step, s.ts_ns, s.dur_ns
),
busy AS (  -- the GPU's busy time for the step's own work, the union of what the step launched: each interval adds
           -- what it runs past the latest end of those started before it (in start order)
    SELECT source_id, step, sum(greatest(end_ns - greatest(ts_ns, prev_end_ns), 0)) AS floor_ns
    FROM (SELECT w.source_id, w.step, w.ts_ns, w.end_ns,
                 max(w.end_ns) OVER (PARTITION BY w.source_id, w.step ORDER BY w.ts_ns, w.end_ns
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end_ns
          FROM trace_step_work w JOIN trace_steady_steps s USING (source_id, step)
          WHERE w.end_ns > w.ts_ns)
    GROUP BY source_id, step
),
latest_end AS (  -- per source with steps, each start of its GPU work (any device, unclipped: a host that runs ahead
                 -- of the GPU launches while work from before the analysed window still runs) with the latest end of
                 -- the work started by then (work starting at the same time included: a RANGE frame)
    SELECT source_id, ts_ns,
           max(end_ns) OVER (PARTITION BY source_id ORDER BY ts_ns RANGE UNBOUNDED PRECEDING) AS end_ns
    FROM trace_step_work WHERE end_ns > ts_ns AND source_id IN (SELECT source_id FROM spans)
),
host_events AS (  -- each host event, hidden when the GPU was busy as it started: work that started at or before it
                  -- ends after it
    SELECT h.source_id, h.ts_ns, coalesce(w.end_ns > h.ts_ns, false) AS hidden
    FROM (SELECT source_id, ts_ns FROM cpu_activity  -- filtered before the ASOF join (DuckDB filters after it)
          WHERE kind IN ('op', 'runtime', 'driver', 'python') AND source_id IN (SELECT source_id FROM spans)) h
    ASOF LEFT JOIN latest_end w ON w.source_id = h.source_id AND h.ts_ns >= w.ts_ns
),
edges AS (  -- each step's start (edge -1) and end (edge 1)
    SELECT source_id, step, -1 AS edge, ts_ns FROM spans WHERE traced_ns > 0
    UNION ALL
    SELECT source_id, step, 1, ts_ns + traced_ns FROM spans WHERE traced_ns > 0
),
grid AS (  -- per source, the host events' time cut in at most about 65,536 buckets
    SELECT source_id, min(ts_ns) AS base_ns, greatest((max(ts_ns) - min(ts_ns)) // 65536, 1) AS width_ns
    FROM host_events GROUP BY source_id
),
events_bucketed AS (
    SELECT h.source_id, h.ts_ns, h.hidden, (h.ts_ns - g.base_ns) // g.width_ns AS bucket
    FROM host_events h JOIN grid g USING (source_id)
),
counts AS (  -- the host events (all, and the critical ones) of each bucket and of the buckets before it
    SELECT source_id, bucket, sum(n) OVER w AS events_through, sum(critical) OVER w AS critical_through
    FROM (SELECT source_id, bucket, count(*) AS n, count(*) FILTER (WHERE NOT hidden) AS critical
          FROM events_bucketed GROUP BY source_id, bucket)
    WINDOW w AS (PARTITION BY source_id ORDER BY bucket ROWS UNBOUNDED PRECEDING)
),
edges_bucketed AS (  -- an edge before a source's first event falls in bucket 0 or below (`//` rounds toward zero),
                     -- where no event starts before it
    SELECT e.source_id, e.step, e.edge, e.ts_ns, (e.ts_ns - g.base_ns) // g.width_ns AS bucket
    FROM edges e JOIN grid g USING (source_id)
),
events_in_edge_buckets AS MATERIALIZED (  -- the host events of the buckets an edge falls in, the few the join below
                                          -- reads: made apart, so that it builds its hash table on them (DuckDB
                                          -- took the edges for the larger side and built it on every event)
    SELECT * FROM events_bucketed h
    WHERE EXISTS (SELECT 1 FROM edges_bucketed e WHERE e.source_id = h.source_id AND e.bucket = h.bucket)
),
before AS (  -- at each edge, the host events that started before it: those of the buckets before its own, and
             -- those of its own bucket that start before it (an event at an edge's time is not before it)
    SELECT e.source_id, e.step, e.edge, c.events_through AS n, c.critical_through AS critical
    FROM edges_bucketed e ASOF JOIN counts c ON c.source_id = e.source_id AND e.bucket > c.bucket
    UNION ALL
    SELECT e.source_id, e.step, e.edge, 1, (NOT h.hidden)::INTEGER
    FROM edges_bucketed e JOIN events_in_edge_buckets h
      ON h.source_id = e.source_id AND h.bucket = e.bucket AND h.ts_ns < e.ts_ns
),
events AS (  -- the host events starting in each step's span: those before its end less those before its start
             -- (steps' spans may overlap, a span running to the end of the last work its step launched, so events
             -- are not placed step by step; counted through buckets, the events are not sorted with the edges)
    SELECT source_id, step, sum(edge * n)::BIGINT AS host_events, sum(edge * critical)::BIGINT AS critical_events
    FROM before
    GROUP BY source_id, step
),
launch_calls AS (  -- the median kernel launch call of each source that has them
    SELECT source_id, median(dur_ns) AS launch_call_ns FROM cpu_activity
    WHERE kind IN ('runtime', 'driver') AND name ILIKE '%LaunchKernel%' AND dur_ns IS NOT NULL
    GROUP BY source_id
),
launches AS (  -- a trace without kernel launch calls (CUDA graphs): its runtime calls (their median computed only
               -- there)
    SELECT * FROM launch_calls
    UNION ALL
    SELECT source_id, median(dur_ns) FROM cpu_activity
    WHERE kind IN ('runtime', 'driver') AND source_id NOT IN (SELECT source_id FROM launch_calls)
    GROUP BY source_id
),
per_step AS (
    SELECT sp.source_id, sp.rank, sp.step, sp.traced_ns, coalesce(b.floor_ns, 0) AS floor_ns,
           coalesce(e.host_events, 0) AS host_events, coalesce(e.critical_events, 0) AS critical_events,
           l.launch_call_ns, f.profiler_k AS k, f.profiler_k_least AS k_low
    FROM spans sp JOIN launches l USING (source_id) JOIN sources src USING (source_id)
    JOIN input_formats f ON f.format = src.format
    LEFT JOIN busy b USING (source_id, step) LEFT JOIN events e USING (source_id, step)
    WHERE f.profiler_k IS NOT NULL
),
costed AS (
    SELECT *, traced_ns - floor_ns AS idle_ns,
           least(traced_ns - floor_ns, critical_events * k * launch_call_ns) AS cost_ns,
           least(traced_ns - floor_ns, critical_events * k_low * launch_call_ns) AS cost_low_ns
    FROM per_step
),
options AS (
    SELECT src.source_id,
           EXISTS (SELECT 1 FROM op_shapes o WHERE o.source_id = src.source_id) AS shapes,
           EXISTS (SELECT 1 FROM cpu_activity c WHERE c.source_id = src.source_id AND c.kind = 'python') AS stacks,
           EXISTS (SELECT 1 FROM memory_events m WHERE m.source_id = src.source_id) AS memory,
           NOT f.operator_shapes AS nsys  -- a capture without operators: Nsight Systems'
    FROM sources src JOIN input_formats f ON f.format = src.format
)
SELECT c.source_id, any_value(c.rank) AS rank, count(*) AS steps,
       avg(c.traced_ns) AS traced_ns, avg(c.floor_ns) AS floor_ns, avg(c.idle_ns) AS idle_ns,
       avg(c.host_events) AS host_events, avg(c.critical_events) AS critical_events,
       any_value(c.launch_call_ns) AS launch_call_ns, any_value(c.k) * any_value(c.launch_call_ns) AS event_cost_ns,
       avg(c.cost_ns) AS profiler_cost_ns, sum(c.cost_ns) AS profiler_cost_sum_ns,
       avg(c.traced_ns - c.cost_ns) AS unprofiled_ns,
       avg(c.floor_ns) AS unprofiled_low_ns,
       avg(c.traced_ns - c.cost_low_ns) AS unprofiled_high_ns,
       avg(c.traced_ns - c.cost_ns) <= 1.1 * avg(c.floor_ns) AS gpu_paced,
       any_value(o.shapes) AS shapes, any_value(o.stacks) AS stacks, any_value(o.memory) AS memory,
       any_value(o.nsys) AS nsys
FROM costed c JOIN options o USING (source_id)
GROUP BY c.source_id;
