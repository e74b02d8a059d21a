-- trace.launches: when the host launched each piece of GPU work, which places the work in the steps (trace.steps)
-- and tells a launch's latency (gpu.idle).
-- Times in ns.

-- When and on which thread the host launched each correlation id of GPU work (a kernel, copy or memset: its first
-- runtime or driver call, the least (ts_ns, pid, tid)): source_id, correlation_id, launch_ns, pid, tid. GPU work
-- whose correlation is not here was launched before the trace began. Only the calls of GPU work are grouped: an
-- export's CUDA calls are mostly not. The work's distinct ids are joined, not semi-joined: DuckDB then builds its
-- hash table on them, not on the calls (on a 77 MB export 1.1 M calls against 0.4 M ids). The thread, which the
-- NVTX projection reads (nvtx.projection), is found in the same aggregate, of one struct: that projection grouped
-- the calls again for it (0.5 s on a 199 MB export), where the struct costs 0.03 s here.
CREATE OR REPLACE TEMP TABLE trace_launches AS
SELECT source_id, correlation_id, first.ts_ns AS launch_ns, first.pid, first.tid
FROM (SELECT c.source_id, c.correlation_id, min({'ts_ns': c.ts_ns, 'pid': c.pid, 'tid': c.tid}) AS first
      FROM cpu_activity c
      JOIN (SELECT DISTINCT source_id, correlation_id FROM gpu_activity
            WHERE kind IN ('kernel', 'memcpy', 'memset')) g
        ON g.source_id = c.source_id AND g.correlation_id = c.correlation_id
      WHERE c.kind IN ('runtime', 'driver') AND c.correlation_id IS NOT NULL
      GROUP BY c.source_id, c.correlation_id);
