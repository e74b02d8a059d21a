-- trace.steps: the steps of each source, which of them are warm-up, and how they were found.
--
-- A step is a span of the host's time; GPU work belongs to the step during which the host launched it. Each
-- source takes its steps from the first of these that it has:
--   1. the range the user named (--step-range NAME: SET VARIABLE step_range): host ranges (NVTX ranges,
--      record_function annotations) of that name, or that name and a number ('step 3' for 'step');
--   2. the profiler's steps: ProfilerStep#N (the store's steps table: a PyTorch trace, or nsys with
--      torch's NVTX ranges), or a Proton trace's step scopes (step_N: windows on the GPU, tracedoc/ingest/chrome/proton.py);
--   3. a repeated user range: host ranges of one name (a number at its end aside: 'step 3' and 'step 4' are one
--      name, 'step #') opened at least 3 times on one thread, one after the other (never inside each other), at
--      the top level of the repeated ranges (not inside ranges of another such name: a train_step's forward and
--      its micro-batches are not steps), during which the host launched GPU work. Of such names, the one whose
--      ranges cover the most launches wins (within 10 % of the most: the one repeated most often). Their
--      durations on the host need not be alike: a host running ahead of the GPU returns from some steps early
--      and waits in others. NCCL's own ranges (ncclAllReduce…) are not steps;
--   4. the repeating kernel, as nsys's cuda_gpu_kern_pace looks at one kernel over time: among kernels launched
--      at least 4 times, those that run evenly spaced on the GPU (after the first quarter of them, which may be
--      warm-up, every interval between two starts within a factor 2 of their median), whose runs span most of
--      the GPU's work (at least half its time on the GPU lies between their first and last run: a kernel that
--      repeats in one phase of a trace does not make its steps, and start-up's little work does not count) and,
--      of those, the one run most often (then the first); step k runs from the host's launch of its k-th run to
--      that of the next.
-- Steps found by 1 or 3 keep the number their ranges carry ('step 3'), else they are numbered 1, 2, … in time
-- order, as are those found by 4. Warm-up steps are the first ones, for as long as
-- each lasts more than twice the median step (at most half the steps): the first iterations pay for cuBLAS and
-- NCCL set-up, allocator growth and autotuning, and are not the steady state. Times in ns.
-- hands back: trace_steps, trace_step_method, trace_step_slow
-- uses: trace.step_search
-- include: trace.launches

-- Where no source lacks the profiler's steps and no step range is named, trace.step_search (which finds steps
-- otherwise) does not run, and what it makes is empty: its host ranges that can be steps,
CREATE TEMP TABLE IF NOT EXISTS trace_step_ranges (source_id INTEGER, tid BIGINT, name VARCHAR, family VARCHAR,
                                                   ts_ns BIGINT, end_ns BIGINT);
-- the launches of sources without profiler steps,
CREATE TEMP TABLE IF NOT EXISTS trace_step_launches (source_id INTEGER, ts_ns BIGINT, name VARCHAR, gpu_ns BIGINT,
                                                     dur_ns HUGEINT);
-- the range chosen,
CREATE TEMP TABLE IF NOT EXISTS trace_step_choice (source_id INTEGER, family VARCHAR, tid BIGINT);
-- and the repeating kernel.
CREATE TEMP TABLE IF NOT EXISTS trace_step_pace (source_id INTEGER, name VARCHAR, runs BIGINT, median_gap_ns DOUBLE);

-- Every source's steps before warm-up is told: source_id, rank, step, name, ts_ns, dur_ns. A step's number is the
-- profiler's N, the number the ranges carry ('step 3': 3) when each has its own, else its position (1, 2, …); its
-- name is the range's ('ProfilerStep#3', 'train_step', 'step 3'), or 'step N' for the repeating kernel's.
CREATE OR REPLACE TEMP TABLE trace_steps_found AS
WITH ranges AS (
    SELECT r.source_id, src.rank, r.name, r.ts_ns, r.end_ns - r.ts_ns AS dur_ns,
           row_number() OVER (PARTITION BY r.source_id ORDER BY r.ts_ns, r.end_ns) AS position,
           TRY_CAST(regexp_extract(r.name, '([0-9]+)$', 1) AS INTEGER) AS numbered
    FROM trace_step_ranges r JOIN trace_step_choice c USING (source_id, tid, family) JOIN sources src USING (source_id)
),
own_numbers AS (  -- sources whose ranges each carry a number of their own
    SELECT source_id FROM ranges GROUP BY source_id HAVING count(DISTINCT numbered) = count(*)
)
SELECT s.source_id, s.rank, s.step, s.name, s.ts_ns, s.dur_ns FROM steps s
WHERE s.source_id NOT IN (SELECT source_id FROM trace_step_choice WHERE getvariable('step_range') IS NOT NULL)
UNION ALL
SELECT source_id, rank,
       CASE WHEN source_id IN (SELECT source_id FROM own_numbers) THEN numbered ELSE position END::INTEGER,
       name, ts_ns, dur_ns
FROM ranges
UNION ALL
SELECT source_id, rank, step::INTEGER, 'step ' || step, ts_ns, next_ns - ts_ns
FROM (SELECT l.source_id, src.rank, l.ts_ns, lead(l.ts_ns) OVER (PARTITION BY l.source_id ORDER BY l.ts_ns) AS next_ns,
             row_number() OVER (PARTITION BY l.source_id ORDER BY l.ts_ns) AS step
      FROM trace_step_launches l JOIN trace_step_pace p USING (source_id, name) JOIN sources src USING (source_id))
WHERE next_ns IS NOT NULL;

-- The GPU work (kernels, copies, memsets) of sources with steps, with when the host launched it (launch_ns; NULL:
-- before the trace began) and the step it was launched in (NULL: outside every step). A source that records no
-- launch at all (a trace of the GPU alone: Proton's) has its work placed by its start on the GPU, which stands for
-- its launch. Columns: source_id, rank, device, kind, category, work_row (the work's row in gpu_activity, its
-- rowid: where its name, grid and block are, text a long trace would otherwise hold a copy of here for every
-- launch; rowids hold because no row of gpu_activity is deleted once the store is made, and a delete followed by
-- a checkpoint would renumber them), dur_ns, ts_ns, end_ns, blocks (a kernel's thread blocks), launch_ns, step.
CREATE OR REPLACE TEMP TABLE trace_step_work AS
WITH gpu_alone AS (  -- sources whose host recorded no launch calls (of the calls, the distinct sources: NOT IN over
                     -- the calls themselves builds a hash table of them all)
    SELECT source_id FROM trace_steps_found
    WHERE source_id NOT IN (SELECT DISTINCT source_id FROM cpu_activity
                            WHERE kind IN ('runtime', 'driver') AND correlation_id IS NOT NULL)
),
stepped AS (  -- the step each launch of GPU work fell in (the ASOF join sorts these narrow rows, not the work's)
    SELECT l.source_id, l.correlation_id, l.launch_ns,
           CASE WHEN l.launch_ns < s.ts_ns + s.dur_ns THEN s.step END AS step
    FROM (SELECT * FROM trace_launches WHERE source_id IN (SELECT source_id FROM trace_steps_found)) l
    ASOF LEFT JOIN trace_steps_found s ON l.source_id = s.source_id AND l.launch_ns >= s.ts_ns
),
work AS (
    SELECT g.*, g.rowid AS work_row, st.launch_ns, st.step
    FROM gpu_activity g LEFT JOIN stepped st USING (source_id, correlation_id)
    WHERE g.kind IN ('kernel', 'memcpy', 'memset') AND g.source_id IN (SELECT source_id FROM trace_steps_found)
      AND g.source_id NOT IN (SELECT source_id FROM gpu_alone)
    UNION ALL BY NAME
    SELECT g.*, g.ts_ns AS launch_ns, CASE WHEN g.ts_ns < s.ts_ns + s.dur_ns THEN s.step END AS step
    FROM (SELECT *, rowid AS work_row FROM gpu_activity  -- these sources' work alone (DuckDB filters after an ASOF
                                                         -- join, not before)
          WHERE kind IN ('kernel', 'memcpy', 'memset') AND source_id IN (SELECT source_id FROM gpu_alone)) g
    ASOF LEFT JOIN trace_steps_found s ON g.source_id = s.source_id AND g.ts_ns >= s.ts_ns
)
SELECT source_id, rank, device, kind, category, work_row, dur_ns, ts_ns, ts_ns + dur_ns AS end_ns,
       CASE WHEN kind = 'kernel' THEN list_product(TRY_CAST(string_split(grid, ',') AS BIGINT[])) END AS blocks,
       launch_ns, step
FROM work;

-- Each source's steps in order, with how long each lasted: source_id, rank, step, name, ts_ns, dur_ns (the host's
-- span), span_ns (the longer of that and the span of its work on the GPU, first start to last end: the GPU's span
-- shows a step that waited on earlier warm-up work), n (its position), steps (the source's steps), median_ns
-- (the median span_ns of the source's steps).
CREATE OR REPLACE TEMP TABLE trace_step_spans AS
WITH spans AS (
    SELECT f.*, greatest(f.dur_ns, coalesce(w.span_ns, 0)) AS span_ns
    FROM trace_steps_found f
    LEFT JOIN (SELECT source_id, step, max(end_ns) - min(ts_ns) AS span_ns FROM trace_step_work
               WHERE step IS NOT NULL GROUP BY source_id, step) w USING (source_id, step)
)
SELECT *, row_number() OVER (PARTITION BY source_id ORDER BY ts_ns, step) AS n,
       count(*) OVER (PARTITION BY source_id) AS steps,
       median(span_ns) OVER (PARTITION BY source_id) AS median_ns
FROM spans;

-- How many leading steps of each source last more than twice the median, in a row (at most half its steps): the
-- steps its own trace shows warming up. Columns: source_id, slow_steps.
CREATE OR REPLACE TEMP TABLE trace_step_slow AS
SELECT source_id, least(coalesce(min(n) FILTER (WHERE span_ns <= 2 * median_ns), any_value(steps) + 1) - 1,
                        any_value(steps) // 2) AS slow_steps
FROM trace_step_spans GROUP BY source_id;

-- The job's warm-up steps, one row: steps. Ranks step together (a rank still warming up holds the others up at
-- the collectives), so every rank leaves out as many warm-up steps as the rank that has the most. A distributed
-- run's worker, which holds some ranks and not the job, is given the job's (scale.job).
CREATE OR REPLACE TEMP TABLE trace_warmup AS
SELECT coalesce(max(slow_steps), 0) AS steps FROM trace_step_slow;

-- The steps of each source: source_id, rank, step, name, ts_ns, dur_ns (the host's span), warmup (a warm-up step:
-- not the steady state): its first ones, as many as the job's warm-up steps (at most half its steps).
CREATE OR REPLACE TEMP TABLE trace_steps AS
SELECT source_id, rank, step, name, ts_ns, dur_ns, n <= least((SELECT steps FROM trace_warmup), steps // 2) AS warmup
FROM trace_step_spans;

-- How each source's steps were found, for the report: source_id, method ('range', 'profiler', 'kernel' or NULL
-- without steps), detail (the range's or kernel's name; the profiler's steps' name with N for their number, when
-- not ProfilerStep#N: 'step_N'), steps (steady steps), warmup_steps.
CREATE OR REPLACE TEMP VIEW trace_step_method AS
SELECT src.source_id, src.rank,
       CASE WHEN c.family IS NOT NULL THEN 'range' WHEN p.name IS NOT NULL THEN 'kernel'
            WHEN s.source_id IS NOT NULL THEN 'profiler' END AS method,
       coalesce(c.family, p.name, s.detail) AS detail,
       coalesce(t.steps, 0) AS steps, coalesce(t.warmup_steps, 0) AS warmup_steps
FROM sources src
LEFT JOIN trace_step_choice c USING (source_id)
LEFT JOIN trace_step_pace p USING (source_id)
LEFT JOIN (SELECT source_id, any_value(regexp_replace(name, '[0-9]+$', 'N'))
                                 FILTER (WHERE name NOT LIKE 'ProfilerStep#%') AS detail
           FROM steps GROUP BY source_id) s USING (source_id)
LEFT JOIN (SELECT source_id, count(*) FILTER (WHERE NOT warmup) AS steps, count(*) FILTER (WHERE warmup) AS warmup_steps
           FROM trace_steps GROUP BY source_id) t USING (source_id);

-- The steady steps (warm-up steps left out): what per-step analyses measure. Columns as trace_steps.
CREATE OR REPLACE TEMP VIEW trace_steady_steps AS
SELECT source_id, rank, step, ts_ns, dur_ns FROM trace_steps WHERE NOT warmup;
