-- memory.timeline: GPU memory over time per device, from the allocator events of a trace (memory_events: the
-- PyTorch profiler's with profile_memory=True, or Nsight Systems' CUDA memory events with
-- --cuda-memory-usage=true), with the steps on the same axis. Bytes, ns.
--
-- Every event carries the allocator's totals just after it (Total Allocated: bytes in live tensors; Total
-- Reserved: bytes the caching allocator holds from CUDA), so the curve is a step plot of those totals. The peak is
-- the highest Total Allocated; it happens in a step (the ProfilerStep#N it falls in) and inside an operator (the
-- innermost one on the allocating thread). Memory allocated before the trace started appears in the totals only.
-- A snapshot given without a trace of its run is read the same way: its history as the events
-- (memory_snapshot_events), its ProfilerStep#N annotations as the steps (memory_snapshot_steps).
-- reads: memory_events, memory_segments, memory_blocks, memory_actions
-- include: trace.steps
-- include: memory.snapshot

-- A site from a Python frame as the profiler names it, 'run.py(48): forward' → 'run.py:48 (forward)'; NULL for
-- the framework's frames (torch/, built-ins, the standard library's context managers): the user's innermost frame
-- is where a fix goes.
CREATE OR REPLACE TEMP MACRO memory_user_frame(name) AS
    CASE WHEN name IS NULL OR regexp_matches(name, '^(torch/|<built-in|<frozen|nn\.Module|contextlib\.py|functools\.py|threading\.py|typing\.py|site-packages/|.*/site-packages/|.*/torch/)')
         THEN NULL
         ELSE regexp_replace(name, '^(.*)\(([0-9]+)\): (.*)$', '\1:\2 (\3)') END;

-- The steps memory is measured in: the traces' (trace.steps) and those of snapshots given alone
-- (memory_snapshot_steps). Columns: source_id, step, ts_ns, dur_ns, warmup.
CREATE OR REPLACE TEMP VIEW memory_step_spans AS
SELECT source_id, step, ts_ns, dur_ns, warmup FROM trace_steps
UNION ALL
SELECT source_id, step, ts_ns, dur_ns, warmup FROM memory_snapshot_steps;

-- The allocator events on GPUs (not the CPU's, device type 0) of the traces and of the snapshots given alone, each
-- with its step (NULL outside every step), whether that step is a warm-up step, and the site and stack a
-- snapshot's history gives it (NULL in a trace).
CREATE OR REPLACE TEMP TABLE memory_gpu_events AS
SELECT e.*, s.step, coalesce(s.warmup, true) AS warmup
FROM (SELECT *, CAST(NULL AS VARCHAR) AS site, CAST(NULL AS VARCHAR) AS stack FROM memory_events
      UNION ALL BY NAME SELECT * FROM memory_snapshot_events) e
LEFT JOIN memory_step_spans s ON s.source_id = e.source_id AND e.ts_ns >= s.ts_ns AND e.ts_ns < s.ts_ns + s.dur_ns
WHERE coalesce(e.device_type, 1) <> 0 AND coalesce(e.device, 0) >= 0;

-- Each allocation with when it was freed (the next event at its address on its device, when that is a free;
-- NULL: still held when the trace ended).
CREATE OR REPLACE TEMP TABLE memory_allocs AS
WITH ev AS (
    SELECT *, lead(kind) OVER w AS next_kind, lead(ts_ns) OVER w AS next_ts
    FROM memory_gpu_events WHERE kind IN ('alloc', 'free') AND addr IS NOT NULL
    WINDOW w AS (PARTITION BY source_id, device, addr ORDER BY ts_ns, kind)
)
SELECT source_id, rank, tid, device, addr, bytes, ts_ns, step, warmup, site, stack,
       CASE WHEN next_kind = 'free' THEN next_ts END AS freed_ns
FROM ev WHERE kind = 'alloc' AND bytes > 0;

-- Per source, device and step: allocated and reserved bytes at the step's end, the highest allocated inside it,
-- and the step's position among the steady steps (n, 1-based; NULL for warm-up steps).
CREATE OR REPLACE TEMP TABLE memory_steps AS
WITH dev AS (SELECT DISTINCT source_id, rank, device FROM memory_gpu_events),
ends AS (
    SELECT d.source_id, d.rank, d.device, s.step, s.warmup, s.ts_ns, s.dur_ns, s.ts_ns + s.dur_ns AS end_ns
    FROM dev d JOIN memory_step_spans s USING (source_id)
),
at_end AS (
    SELECT e.*, m.total_allocated AS allocated_end, m.total_reserved AS reserved_end
    FROM ends e ASOF LEFT JOIN memory_gpu_events m
      ON m.source_id = e.source_id AND m.device = e.device AND e.end_ns >= m.ts_ns
),
inside AS (
    SELECT source_id, device, step, max(total_allocated) AS allocated_max, max(total_reserved) AS reserved_max
    FROM memory_gpu_events WHERE step IS NOT NULL GROUP BY ALL
)
SELECT a.source_id, a.rank, a.device, a.step, a.warmup, a.ts_ns, a.dur_ns, a.allocated_end, a.reserved_end,
       i.allocated_max, i.reserved_max,
       CASE WHEN NOT a.warmup THEN row_number() OVER (PARTITION BY a.source_id, a.device, a.warmup
                                                      ORDER BY a.ts_ns) END AS n
FROM at_end a LEFT JOIN inside i USING (source_id, device, step);

-- The peak of each source and device: the event after which the most was allocated (the first such), and the
-- address it allocated.
CREATE OR REPLACE TEMP TABLE memory_peaks AS
SELECT source_id, device, arg_min(ts_ns, (-total_allocated, ts_ns)) AS peak_ns, max(total_allocated) AS peak_bytes,
       arg_min(addr, (-total_allocated, ts_ns)) AS peak_addr,
       arg_min(tid, (-total_allocated, ts_ns)) AS tid, arg_min(step, (-total_allocated, ts_ns)) AS step
FROM memory_gpu_events WHERE kind <> 'oom' AND total_allocated IS NOT NULL GROUP BY ALL;

-- The site of each allocation a memory view names (live at a peak, or never freed) and of each failed request:
-- one lookup, in one order, for the peak, the growth, the OOM and what is live. A site is where a fix goes, the
-- first of: the snapshot's frames (a snapshot's own history, or the trace's allocation matched in a snapshot:
-- memory.snapshot; the user's innermost frame, ingest/memory/memory_snapshot.py leaving out the unwinder, CPython, C++
-- and torch's own files), the user's innermost Python frame on the allocating thread (memory_user_frame), the
-- innermost operator there, the innermost annotation there (an NVTX range, or a record_function range of a
-- snapshot's history: autograd's backward thread has no Python frames; ProfilerStep#N left out). op and
-- annotation are also given apart, and context: the operators and annotations around it, outermost first
-- (' > '-separated). addr is NULL for a failed request.
CREATE OR REPLACE TEMP TABLE memory_sites AS
WITH wanted AS (
    SELECT a.source_id, a.device, a.addr, a.ts_ns, a.tid, a.site, a.stack
    FROM memory_allocs a LEFT JOIN memory_peaks p USING (source_id, device)
    WHERE a.freed_ns IS NULL OR (a.ts_ns <= p.peak_ns AND a.freed_ns > p.peak_ns)
    UNION
    SELECT source_id, device, NULL, ts_ns, tid, site, stack FROM memory_gpu_events WHERE kind = 'oom'
),
frames AS (
    SELECT w.source_id, w.device, w.addr, w.ts_ns,
           arg_max(memory_user_frame(c.name), c.ts_ns)
               FILTER (WHERE c.kind = 'python' AND memory_user_frame(c.name) IS NOT NULL) AS py_site,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'op') AS op,
           arg_max(c.name, c.ts_ns) FILTER (WHERE c.kind = 'annotation' AND c.name NOT LIKE 'ProfilerStep#%') AS annotation,
           string_agg(c.name, ' > ' ORDER BY c.ts_ns) FILTER (WHERE c.kind IN ('op', 'annotation')) AS context
    FROM wanted w
    JOIN cpu_activity c ON c.source_id = w.source_id AND c.tid = w.tid AND c.ts_ns <= w.ts_ns
                       AND w.ts_ns <= c.ts_ns + c.dur_ns AND c.kind IN ('op', 'python', 'annotation')
    GROUP BY ALL
),
marks AS (  -- a snapshot's own annotations (memory.snapshot)
    SELECT w.source_id, w.device, w.addr, w.ts_ns, arg_max(r.name, r.ts_ns) AS annotation,
           string_agg(r.name, ' > ' ORDER BY r.ts_ns) AS context
    FROM wanted w
    JOIN memory_snapshot_ranges r ON r.source_id = w.source_id AND r.ts_ns <= w.ts_ns AND w.ts_ns <= r.end_ns
                                 AND r.name NOT LIKE 'ProfilerStep#%'
    GROUP BY ALL
)
SELECT w.source_id, w.device, w.addr, w.ts_ns, f.op, coalesce(f.annotation, m.annotation) AS annotation,
       coalesce(w.site, j.site, f.py_site, f.op, f.annotation, m.annotation) AS site,
       coalesce(w.stack, j.stack) AS stack, coalesce(f.context, m.context) AS context
FROM wanted w
LEFT JOIN marks m ON m.source_id = w.source_id AND m.device = w.device AND m.addr IS NOT DISTINCT FROM w.addr
                 AND m.ts_ns = w.ts_ns
LEFT JOIN frames f ON f.source_id = w.source_id AND f.device = w.device AND f.addr IS NOT DISTINCT FROM w.addr
                  AND f.ts_ns = w.ts_ns
LEFT JOIN memory_snapshot_matches j ON j.source_id = w.source_id AND j.device = w.device AND j.addr = w.addr
                                   AND j.ts_ns = w.ts_ns;

-- At each peak: the innermost operator on the allocating thread (else annotation: an NVTX range) and the site of
-- the allocation that made it (memory_sites).
CREATE OR REPLACE TEMP TABLE memory_peak_where AS
SELECT p.source_id, p.device, coalesce(s.op, s.annotation) AS op, s.site
FROM memory_peaks p
JOIN memory_sites s ON s.source_id = p.source_id AND s.device = p.device AND s.addr = p.peak_addr
                   AND s.ts_ns = p.peak_ns;

-- One row per source and GPU: the curve summarised. capacity_bytes: the device's memory from the trace header.
-- basis: what the totals count, as the source's format declares its memory events (input_formats.memory_events):
-- 'allocator' (a PyTorch trace: the caching allocator's tensors and its reserve) or 'cuda' (an Nsight Systems
-- export: memory taken from CUDA, both totals alike; in a PyTorch job the allocator's reserve).
CREATE OR REPLACE TEMP TABLE memory_by_device AS
SELECT e.source_id, any_value(e.rank) AS rank, e.device,
       coalesce(any_value(f.memory_events), 'allocator') AS basis,
       count(*) FILTER (WHERE e.kind <> 'oom') AS events,
       min(e.ts_ns) AS first_ns, max(e.ts_ns) AS last_ns,
       arg_min(e.total_allocated, e.ts_ns) AS allocated_start, arg_max(e.total_allocated, e.ts_ns) AS allocated_end,
       arg_max(e.total_reserved, e.ts_ns) AS reserved_end,
       max(e.total_reserved) AS reserved_peak_bytes,
       any_value(p.peak_bytes) AS peak_bytes, any_value(p.peak_ns) AS peak_ns, any_value(p.step) AS peak_step,
       any_value(w.op) AS peak_op, any_value(w.site) AS peak_site,
       any_value(d.total_memory_bytes) AS capacity_bytes,
       count(*) FILTER (WHERE e.kind = 'oom') AS ooms
FROM memory_gpu_events e
LEFT JOIN memory_peaks p USING (source_id, device)
LEFT JOIN memory_peak_where w USING (source_id, device)
LEFT JOIN devices d ON d.source_id = e.source_id AND d.device = e.device
LEFT JOIN sources s ON s.source_id = e.source_id
LEFT JOIN input_formats f ON f.format = s.format
GROUP BY e.source_id, e.device;

-- The origin of each source's memory times (the first allocator event or step): the Memory page's curve and steps
-- are drawn in ms from it.
CREATE OR REPLACE TEMP TABLE memory_origin AS
SELECT source_id, min(ts_ns) AS t0_ns
FROM (SELECT source_id, ts_ns FROM memory_gpu_events
      UNION ALL SELECT source_id, ts_ns FROM trace_steps WHERE source_id IN (SELECT source_id FROM memory_gpu_events))
GROUP BY source_id;

-- The curve to draw: per source and GPU, the allocator's totals in at most 2,000 equal slices of its time, each
-- slice's highest allocated and reserved (so no peak is lost however many events there are) at its first event.
CREATE OR REPLACE TEMP TABLE memory_curve AS
WITH ev AS (
    SELECT e.source_id, e.rank, e.device, e.ts_ns - o.t0_ns AS t_ns, e.total_allocated, e.total_reserved
    FROM memory_gpu_events e JOIN memory_origin o USING (source_id)
    WHERE e.total_allocated IS NOT NULL
),
span AS (SELECT source_id, device, min(t_ns) AS lo, max(t_ns) AS hi FROM ev GROUP BY ALL)
SELECT ev.source_id, ev.rank, ev.device,
       floor((ev.t_ns - span.lo) * 2000.0 / greatest(span.hi - span.lo, 1))::BIGINT AS slice,
       min(ev.t_ns) AS t_ns, max(ev.total_allocated) AS allocated, max(ev.total_reserved) AS reserved
FROM ev JOIN span USING (source_id, device)
GROUP BY ALL;

-- The report's memory per source, GPU and step (memory_steps; bytes, ms from memory_origin). Columns: rank,
-- device, step, warmup, allocated_end_bytes and reserved_end_bytes (at the step's end), allocated_max_bytes (the
-- most allocated inside it), start_ms, end_ms.
CREATE OR REPLACE TEMP VIEW memory_report_steps AS
SELECT s.rank, s.device, s.step, s.warmup, s.allocated_end AS allocated_end_bytes,
       s.reserved_end AS reserved_end_bytes, s.allocated_max AS allocated_max_bytes,
       (s.ts_ns - o.t0_ns) / 1e6 AS start_ms, (s.ts_ns + s.dur_ns - o.t0_ns) / 1e6 AS end_ms
FROM memory_steps s JOIN memory_origin o USING (source_id);

-- The report's memory curve per source and GPU (memory_curve): allocated and reserved over time, at most 2,000
-- points, each the highest of its slice of time. Columns: rank, device, t_ms (from the first allocator event or
-- step), allocated_bytes, reserved_bytes; t_ns orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW memory_report_curve AS
SELECT rank, device, t_ns / 1e6 AS t_ms, allocated AS allocated_bytes, reserved AS reserved_bytes, t_ns
FROM memory_curve;
