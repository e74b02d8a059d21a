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
--                     is idle: reported, as the share of the host's events the GPU visibly waited on
--   per-event cost    k × the median duration of the trace's kernel launch calls (cudaLaunchKernel,
--                     cuLaunchKernel…): a launch call is the same small piece of host work in every program, and
--                     under the profiler it carries the profiler's callback, so its time scales with the host's
--                     speed and with what the profiler does per event. k is declared with the format
--                     (input_formats' profiler_k, profiler_k_least). PyTorch profiler: k = 0.55 (0.3 at the
--                     least), calibrated on eager decode loops whose CUDA-event step time without the profiler
--                     is known (docs/efficiency.md). Nsight Systems (its CUDA API calls, runtime and driver, are the
--                     events): k = 1.1 (0.6 at the least), from an eager PyTorch loop and a CuPy loop captured with
--                     -t cuda,nvtx,osrt whose step without nsys is known
--   replay            the steady steps run again without the profiler's cost: each point of the host's time
--                     (a launch of GPU work, a wait) comes earlier by the per-event cost of every host event
--                     before it (counted in the time buckets above: a bucket's events are not told apart); each
--                     piece of GPU work starts no earlier than its replayed launch nor before the work ahead of it
--                     on its device ends (overlapped work adds what it runs past the rest; the gap the GPU left
--                     while the piece was already queued is kept: the GPU's own overhead, or a wait for another
--                     stream); a sync call on a launching thread that waited for all the work launched before it
--                     (cudaDeviceSynchronize, cudaStreamSynchronize, a synchronous copy, cudaFree…, ending after
--                     that work) holds the host until the replayed work ends, one that returned with work still
--                     queued does not. Between two such waits (a stretch) the replay lasts as long as the longer of
--                     its host part and its GPU part, so the events that start while the GPU is still busy count
--                     where the host barely keeps ahead. A run's GPU work starts after the work queued before it.
--                     Steps parted by more than a tenth of a step are replayed apart
--   profiler cost     the replay without the per-event cost less the replay with it, per steady step: the replay
--                     without the cost stands for the trace as it was recorded, so what the replay leaves out (the
--                     steps' spans as the trace draws them, host time the profiler did not record) is not taken
--                     for the profiler's
--   unprofiled step   the traced step less the profiler cost at the format's k, never under the floor; its range runs
--                     from the floor (the GPU's own work: the least the step can take) to the traced step less the
--                     cost at the least k
--   gpu_paced         the estimate lies within 10 % of the floor: without the profiler the GPU sets the pace
--   unprofiled_idle_pct  the estimate's time above the floor, % of the estimate: how much the GPU would idle
--                     without the profiler (launch-bound and gpu-idle-host-bound are critical only above their share)
--   recorded with     what the trace shows the profiler ran with: shapes (op_shapes rows), stacks (Python frames),
--                     memory (allocator events); nsys for an Nsight Systems capture
-- profiler_cost_sum_ns: the cost over all the steady steps (the cost per step × the steps), for the findings whose
-- idle it lengthens (gpu.launch's launch-bound, attribution.host's gpu-idle-host-bound).
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
    SELECT source_id, bucket, n, sum(n) OVER w AS events_through, sum(critical) OVER w AS critical_through
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
options AS (
    SELECT src.source_id,
           EXISTS (SELECT 1 FROM op_shapes o WHERE o.source_id = src.source_id) AS shapes,
           EXISTS (SELECT 1 FROM cpu_activity c WHERE c.source_id = src.source_id AND c.kind = 'python') AS stacks,
           EXISTS (SELECT 1 FROM memory_events m WHERE m.source_id = src.source_id) AS memory,
           NOT f.operator_shapes AS nsys  -- a capture without operators: Nsight Systems'
    FROM sources src JOIN input_formats f ON f.format = src.format
),
steady_runs AS (  -- each source's steady steps in runs, a run broken where a gap of more than a tenth of a step
                  -- parts two steps (a trace tiled from copies, work between the steps): the time between runs is
                  -- no step's, and the replay starts each run again
    SELECT source_id, run, min(ts_ns) AS start_ns, max(ts_ns + dur_ns) AS end_ns, count(*) AS steps
    FROM (SELECT *, sum(broken::INTEGER) OVER (PARTITION BY source_id ORDER BY ts_ns, step ROWS UNBOUNDED PRECEDING)
                    AS run
          FROM (SELECT source_id, step, ts_ns, dur_ns,
                       coalesce(ts_ns - lag(ts_ns + dur_ns) OVER (PARTITION BY source_id ORDER BY ts_ns, step)
                                > 0.1 * median(dur_ns) OVER (PARTITION BY source_id), false) AS broken
                FROM trace_steady_steps WHERE source_id IN (SELECT source_id FROM per_step)))
    GROUP BY source_id, run
),
cost AS (  -- the per-event cost at k and at the least k
    SELECT DISTINCT source_id, k * launch_call_ns AS c, k_low * launch_call_ns AS c_low FROM per_step
),
syncs AS (  -- the runs' sync calls on the threads that launch GPU work. cudaFree is one: it synchronizes the device
            -- before it frees
    SELECT s.source_id, r.run, s.ts_ns, s.dur_ns
    FROM (SELECT c.source_id, c.ts_ns, c.dur_ns FROM cpu_activity c  -- filtered before the ASOF join
          JOIN (SELECT DISTINCT source_id, pid, tid FROM trace_launches) USING (source_id, pid, tid)
          WHERE c.kind IN ('runtime', 'driver') AND c.name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize',
              'cudaEventSynchronize', 'cudaMemcpy', 'cudaMemset', 'cuCtxSynchronize', 'cuStreamSynchronize',
              'cuEventSynchronize', 'hipDeviceSynchronize', 'hipStreamSynchronize', 'hipEventSynchronize',
              'hipMemcpy', 'hipMemcpyWithStream', 'hipMemset', 'hipCtxSynchronize', 'cudaFree', 'cuMemFree_v2',
              'hipFree')
            AND c.source_id IN (SELECT source_id FROM steady_runs)) s
    ASOF JOIN steady_runs r ON r.source_id = s.source_id AND s.ts_ns >= r.start_ns
    WHERE s.ts_ns < r.end_ns
),
done_at AS (  -- at each sync call and each run's start, the latest end of the work launched before it: the launches,
              -- the calls and the starts in time order (a launch at a call's or a start's time comes after it)
    SELECT source_id, run, point, ts_ns, dur_ns, done_ns
    FROM (SELECT *, max(end_ns) OVER (PARTITION BY source_id ORDER BY ts_ns, launched ROWS UNBOUNDED PRECEDING)
                    AS done_ns
          FROM (SELECT source_id, NULL AS run, 'launch' AS point, launch_ns AS ts_ns, NULL AS dur_ns, end_ns,
                       true AS launched
                FROM trace_step_work WHERE launch_ns IS NOT NULL AND source_id IN (SELECT source_id FROM steady_runs)
                UNION ALL
                SELECT source_id, run, 'sync', ts_ns, dur_ns, NULL, false FROM syncs
                UNION ALL
                SELECT source_id, run, 'run', start_ns, NULL, NULL, false FROM steady_runs))
    WHERE point <> 'launch'
),
waits AS (  -- the sync calls that waited for the GPU: all the work launched before one had ended by its end (one that
            -- returned with work still queued, the host ahead, does not cut the replay), those that start at one
            -- time taken as one, each with the stretch it opens (1, 2, … in its run)
    SELECT source_id, run, ts_ns, end_ns, row_number() OVER (PARTITION BY source_id, run ORDER BY ts_ns) AS stretch
    FROM (SELECT source_id, run, ts_ns, max(ts_ns + dur_ns) AS end_ns FROM done_at
          WHERE point = 'sync' AND done_ns <= ts_ns + dur_ns
          GROUP BY source_id, run, ts_ns)
),
backlog AS (  -- the work queued before each run that the GPU still ran at its start (the latest end of the work
              -- launched before it, or recorded with no launch: launched before the trace began): the run's first
              -- stretch starts its GPU work no earlier, with the profiler or without (a GPU that sets the pace
              -- starts a run behind the host)
    SELECT d.source_id, d.run,
           greatest(coalesce(d.done_ns - d.ts_ns, 0), coalesce(u.done_ns - d.ts_ns, 0), 0) AS backlog_ns
    FROM done_at d
    LEFT JOIN (SELECT source_id, max(end_ns) AS done_ns FROM trace_step_work WHERE launch_ns IS NULL
               GROUP BY source_id) u ON u.source_id = d.source_id
    WHERE d.point = 'run'
),
bounds AS (  -- the stretches' bounds, each with the host events that started before its time bucket (the buckets'
             -- counts above: a bucket's events are not told apart, a few microseconds of the replay): a stretch
             -- starts at its run's start or where the wait that opens it ends, and the host's part of it ends where
             -- the wait that closes it starts, or at its run's end
    SELECT b.source_id, b.run, b.stretch, b.bound, b.ts_ns, coalesce(c.events_through, 0) AS before
    FROM (SELECT b.*, (b.ts_ns - g.base_ns) // g.width_ns AS bucket
          FROM (SELECT source_id, run, 0 AS stretch, 'start' AS bound, start_ns AS ts_ns FROM steady_runs
          UNION ALL
          SELECT source_id, run, stretch, 'start', end_ns FROM waits
          UNION ALL
          SELECT source_id, run, stretch - 1, 'end', ts_ns FROM waits
          UNION ALL
          SELECT r.source_id, r.run, coalesce(w.stretches, 0), 'end', r.end_ns
          FROM steady_runs r
          LEFT JOIN (SELECT source_id, run, max(stretch) AS stretches FROM waits GROUP BY source_id, run) w
            USING (source_id, run)) b
          JOIN grid g USING (source_id)) b
    ASOF LEFT JOIN counts c ON c.source_id = b.source_id AND b.bucket > c.bucket
),
stretches AS (  -- each stretch's start, and the host's end of it in the replay: its time from the start, every host
                -- event between them shortened by the cost (at k, at the least k, and at none: the replay of the
                -- trace as it was recorded)
    SELECT s.source_id, s.run, s.stretch, s.ts_ns AS start_ns, s.before AS start_before, c.c, c.c_low,
           (e.ts_ns - s.ts_ns) - c.c * (e.before - s.before) AS host_end_ns,
           (e.ts_ns - s.ts_ns) - c.c_low * (e.before - s.before) AS host_end_low_ns,
           e.ts_ns - s.ts_ns AS host_end_traced_ns
    FROM bounds s JOIN bounds e USING (source_id, run, stretch) JOIN cost c USING (source_id)
    WHERE s.bound = 'start' AND e.bound = 'end'
),
queued AS (  -- the runs' GPU work on each device in the order it started, each piece counting what it ran past the
             -- latest end of the work started before it (work overlapped on another stream costs nothing more: the
             -- device's busy time, as for the floor) and the gap the GPU left before it while it was already queued
             -- (launched before that end): the GPU's own overhead, or the wait for another stream's work
    SELECT source_id, device, work_row, launch_ns, ts_ns,
           greatest(end_ns - greatest(ts_ns, coalesce(ahead_ns, ts_ns)), 0)
           + CASE WHEN launch_ns < ahead_ns THEN greatest(ts_ns - ahead_ns, 0) ELSE 0 END AS dur_ns
    FROM (SELECT source_id, device, work_row, launch_ns, ts_ns, end_ns,
                 max(end_ns) OVER (PARTITION BY source_id, device ORDER BY ts_ns, end_ns, work_row
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ahead_ns
          FROM trace_step_work  -- with the work launched before the trace began, which only ever runs ahead
          WHERE end_ns > ts_ns AND source_id IN (SELECT source_id FROM steady_runs))
),
placed AS (  -- each piece of GPU work launched in a run, with the run, the stretch and the host events before its
             -- launch's bucket: the launches, the runs' starts, ends and waits, and the buckets' ends in time order,
             -- a launch taking the last start and wait before it (a launch at a run's start is in the run, one at
             -- its end is not, and one at a wait's start is in the stretch that wait closes) and the events of the
             -- buckets that end by its time (its own bucket's not: they are not told apart)
    SELECT * FROM (
        SELECT source_id, device, work_row, launch_ns, ts_ns, dur_ns, coalesce(sum(n) OVER w, 0) AS before,
               last_value(run IGNORE NULLS) OVER w AS run, last_value(in_run IGNORE NULLS) OVER w AS in_run,
               last_value(stretch IGNORE NULLS) OVER w AS stretch
        FROM (SELECT source_id, device, work_row, launch_ns, ts_ns, dur_ns, NULL AS n, NULL AS run,
                     NULL::BOOLEAN AS in_run, NULL AS stretch, launch_ns AS at_ns, 2 AS tie
              FROM queued WHERE launch_ns IS NOT NULL  -- launches the host recorded (a source that records none
                                                       -- has its work placed by its start on the GPU)
                AND source_id IN (SELECT DISTINCT source_id FROM trace_launches)
              UNION ALL
              SELECT c.source_id, NULL, NULL, NULL, NULL, NULL, c.n, NULL, NULL, NULL,
                     g.base_ns + (c.bucket + 1) * g.width_ns, -1
              FROM counts c JOIN grid g USING (source_id)
              WHERE c.source_id IN (SELECT source_id FROM steady_runs)
              UNION ALL
              SELECT source_id, NULL, NULL, NULL, NULL, NULL, NULL, run, false, NULL, end_ns, 0 FROM steady_runs
              UNION ALL
              SELECT source_id, NULL, NULL, NULL, NULL, NULL, NULL, run, true, 0, start_ns, 1 FROM steady_runs
              UNION ALL
              SELECT source_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, stretch, ts_ns, 3 FROM waits)
        WINDOW w AS (PARTITION BY source_id ORDER BY at_ns, tie ROWS UNBOUNDED PRECEDING))
    WHERE work_row IS NOT NULL AND in_run
),
chained AS (  -- each piece at its launch in the replay (after the backlog, in a run's first stretch), with the work
              -- before it on its device (in the order of the runs, stretches and starts)
    SELECT p.source_id, p.run, p.stretch, p.device, p.dur_ns,
           greatest(at_traced_ns - s.c * (p.before - s.start_before), b.backlog_ns) AS at_ns,
           greatest(at_traced_ns - s.c_low * (p.before - s.start_before), b.backlog_ns) AS at_low_ns,
           greatest(at_traced_ns, b.backlog_ns) AS at_traced_ns,
           sum(p.dur_ns) OVER (PARTITION BY p.source_id, p.device ORDER BY p.run, p.stretch, p.ts_ns, p.work_row
                               ROWS UNBOUNDED PRECEDING) - p.dur_ns AS through_ns
    FROM placed p
    JOIN stretches s ON s.source_id = p.source_id AND s.run = p.run AND s.stretch = p.stretch
    LEFT JOIN backlog b ON b.source_id = p.source_id AND b.run = p.run AND p.stretch = 0,
    LATERAL (SELECT p.launch_ns - s.start_ns AS at_traced_ns)
),
gpu_ends AS (  -- per stretch, the GPU's end in the replay: on each device, no earlier than each piece's replayed launch
               -- plus the work from it to the stretch's last piece (the stretch's work through its last piece less
               -- the work before that piece)
    SELECT source_id, run, stretch, max(end_ns) AS end_ns, max(end_low_ns) AS end_low_ns,
           max(end_traced_ns) AS end_traced_ns
    FROM (SELECT source_id, run, stretch, max(through_ns + dur_ns) AS done_ns,
                 max(at_ns - through_ns) + done_ns AS end_ns, max(at_low_ns - through_ns) + done_ns AS end_low_ns,
                 max(at_traced_ns - through_ns) + done_ns AS end_traced_ns
          FROM chained GROUP BY source_id, run, stretch, device)
    GROUP BY source_id, run, stretch
),
replay AS (  -- what the profiler's cost takes off the runs' replay, a stretch lasting as long as its host or its GPU
             -- work, per step: the replay without the cost less the replay with it (at k, and at the least k). The
             -- replay without any cost stands for the traced step here, not the traced step itself, so that what
             -- the model leaves out (host time the profiler did not record, the steps' own spans) falls out of the
             -- difference. Never below nothing, nor the least k's above k's (a launch inside another thread's wait
             -- comes later as the cost grows)
    SELECT source_id, sum(greatest(end_traced_ns, 0)) AS as_recorded_ns,
           greatest(as_recorded_ns - sum(greatest(end_ns, 0)), 0) / any_value(steps) AS cost_ns,
           least(greatest(as_recorded_ns - sum(greatest(end_low_ns, 0)), 0) / any_value(steps), cost_ns) AS cost_low_ns
    FROM (SELECT h.source_id, r.steps, greatest(h.host_end_ns, g.end_ns) AS end_ns,
                 greatest(h.host_end_low_ns, g.end_low_ns) AS end_low_ns,
                 greatest(h.host_end_traced_ns, g.end_traced_ns) AS end_traced_ns
          FROM stretches h LEFT JOIN gpu_ends g USING (source_id, run, stretch)
          JOIN (SELECT source_id, sum(steps) AS steps FROM steady_runs GROUP BY source_id) r USING (source_id))
    GROUP BY source_id
)
-- The unprofiled step: the traced step less what the profiler cost it, never under the floor (no replay: no cost).
SELECT c.source_id, any_value(c.rank) AS rank, count(*) AS steps,
       avg(c.traced_ns) AS traced_ns, avg(c.floor_ns) AS floor_ns, avg(c.traced_ns - c.floor_ns) AS idle_ns,
       avg(c.host_events) AS host_events, avg(c.critical_events) AS critical_events,
       any_value(c.launch_call_ns) AS launch_call_ns, any_value(c.k) * any_value(c.launch_call_ns) AS event_cost_ns,
       greatest(avg(c.traced_ns) - coalesce(any_value(r.cost_ns), 0), avg(c.floor_ns)) AS unprofiled_ns,
       avg(c.traced_ns) - unprofiled_ns AS profiler_cost_ns,
       profiler_cost_ns * count(*) AS profiler_cost_sum_ns,
       avg(c.floor_ns) AS unprofiled_low_ns,
       greatest(avg(c.traced_ns) - coalesce(any_value(r.cost_low_ns), 0), avg(c.floor_ns)) AS unprofiled_high_ns,
       unprofiled_ns <= 1.1 * avg(c.floor_ns) AS gpu_paced,
       100.0 * (unprofiled_ns - avg(c.floor_ns)) / nullif(unprofiled_ns, 0) AS unprofiled_idle_pct,
       any_value(o.shapes) AS shapes, any_value(o.stacks) AS stacks, any_value(o.memory) AS memory,
       any_value(o.nsys) AS nsys
FROM per_step c LEFT JOIN replay r USING (source_id) JOIN options o USING (source_id)
GROUP BY c.source_id;
