-- trace.step_search: the steps of sources that the profiler did not mark, and of a range the user named
-- (--step-range): the candidates of trace.steps' ways 1, 3 and 4 (its header says how each is found), which
-- trace.steps chooses from. It applies where a source has no profiler steps or a step range is named (the row set
-- steps_to_find, tracedoc/store/modules.py): elsewhere it finds nothing (no candidate range, choice or repeating
-- kernel), and trace.steps makes the tables it reads of it empty itself, without planning these statements.
-- Times in ns.
-- reads: steps_to_find
-- include: trace.launches

-- Host ranges that can be steps (ranges numbered alike share a name). Columns: source_id, tid, name (as recorded),
-- family (the name with a trailing number as '#'), ts_ns, end_ns.
CREATE OR REPLACE TEMP TABLE trace_step_ranges AS
WITH r AS (
    SELECT source_id, tid, name, ts_ns, ts_ns + dur_ns AS end_ns,
           regexp_replace(name, '\s*#?\s*[0-9]+$', ' #') AS family
    FROM cpu_activity
    WHERE kind = 'annotation' AND dur_ns > 0 AND name NOT LIKE 'nccl%' AND name NOT LIKE 'ProfilerStep#%'
)
SELECT source_id, tid, name, CASE WHEN family = ' #' THEN name ELSE family END AS family, ts_ns, end_ns FROM r;

-- The launches of GPU work (a kernel, copy or memset) of sources without profiler steps: source_id, ts_ns (the
-- launch), name, gpu_ns (the work's start on the GPU) and dur_ns (its time there).
CREATE OR REPLACE TEMP TABLE trace_step_launches AS
SELECT l.source_id, l.launch_ns AS ts_ns, arg_min(g.name, g.ts_ns) AS name, min(g.ts_ns) AS gpu_ns,
       sum(g.dur_ns) AS dur_ns
FROM trace_launches l
JOIN gpu_activity g ON g.source_id = l.source_id AND g.correlation_id = l.correlation_id
WHERE g.kind IN ('kernel', 'memcpy', 'memset') AND l.source_id NOT IN (SELECT source_id FROM steps)
GROUP BY l.source_id, l.correlation_id, l.launch_ns;

-- Candidate step ranges of each source: the named range (1) or repeated top-level ranges (3). Columns: source_id,
-- tid, family, instances, launches (GPU launches inside its ranges), named (the user's choice).
CREATE OR REPLACE TEMP TABLE trace_step_candidates AS
WITH named AS (
    SELECT * FROM trace_step_ranges
    WHERE getvariable('step_range') IS NOT NULL
      AND (name = getvariable('step_range') OR family = getvariable('step_range') || ' #')
),
sequential AS (  -- families repeated at least 3 times on a thread whose ranges never overlap each other
    SELECT source_id, tid, family FROM (
        SELECT *, lag(end_ns) OVER (PARTITION BY source_id, tid, family ORDER BY ts_ns, end_ns) AS prev_end_ns
        FROM trace_step_ranges
        WHERE getvariable('step_range') IS NULL AND source_id NOT IN (SELECT source_id FROM steps))
    GROUP BY source_id, tid, family
    HAVING count(*) >= 3 AND bool_and(prev_end_ns IS NULL OR prev_end_ns <= ts_ns)
),
candidates AS (  -- their ranges, each with whether a range of another of these families contains it (its own
                 -- family's end before it starts, so the latest end before it is another family's)
    SELECT r.*, coalesce(max(r.end_ns) OVER (PARTITION BY r.source_id, r.tid ORDER BY r.ts_ns, r.end_ns DESC
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) >= r.end_ns
                    AS inside
    FROM trace_step_ranges r JOIN sequential USING (source_id, tid, family)
),
ranges AS (
    SELECT source_id, tid, family, ts_ns, end_ns, true AS named FROM named
    UNION ALL
    SELECT source_id, tid, family, ts_ns, end_ns, false FROM candidates
    WHERE (source_id, tid, family) NOT IN (SELECT (source_id, tid, family) FROM candidates WHERE inside)
),
before AS (  -- each source's launches counted through each launch time (those at one time together)
    SELECT source_id, ts_ns, count(*) OVER (PARTITION BY source_id ORDER BY ts_ns RANGE UNBOUNDED PRECEDING) AS n
    FROM trace_step_launches
),
edges AS (  -- a range's launches: those before its end less those before its start
    SELECT source_id, tid, family, ts_ns AS t, -1 AS sign FROM ranges
    UNION ALL
    SELECT source_id, tid, family, end_ns, 1 FROM ranges
),
covered AS (
    SELECT e.source_id, e.tid, e.family, sum(e.sign * coalesce(b.n, 0))::BIGINT AS launches
    FROM edges e ASOF LEFT JOIN before b ON b.source_id = e.source_id AND b.ts_ns < e.t
    GROUP BY e.source_id, e.tid, e.family
)
SELECT r.source_id, r.tid, r.family, count(*) AS instances, any_value(c.launches) AS launches,
       bool_or(r.named) AS named
FROM ranges r JOIN covered c USING (source_id, tid, family)
GROUP BY r.source_id, r.tid, r.family;

-- The chosen range of each source and the thread it is on (named first; else the most launches, within 10 % the
-- most instances).
CREATE OR REPLACE TEMP TABLE trace_step_choice AS
SELECT source_id, arg_max(family, (named, launches >= 0.9 * most, instances, launches, family, -tid)) AS family,
       arg_max(tid, (named, launches >= 0.9 * most, instances, launches, family, -tid)) AS tid
FROM (SELECT *, max(launches) OVER (PARTITION BY source_id) AS most FROM trace_step_candidates
      WHERE named OR launches > 0)
GROUP BY source_id;

-- The repeating kernel of each source without steps of any other kind: name, runs, median_gap_ns (on the GPU).
CREATE OR REPLACE TEMP TABLE trace_step_pace AS
WITH spaced AS (
    SELECT source_id, name, gpu_ns,
           gpu_ns - lag(gpu_ns) OVER (PARTITION BY source_id, name ORDER BY gpu_ns) AS gap_ns,
           row_number() OVER (PARTITION BY source_id, name ORDER BY gpu_ns) AS n,
           count(*) OVER (PARTITION BY source_id, name) AS runs,
           min(gpu_ns) OVER (PARTITION BY source_id, name) AS first_run_ns,
           max(gpu_ns) OVER (PARTITION BY source_id, name) AS last_run_ns
    FROM trace_step_launches
    WHERE source_id NOT IN (SELECT source_id FROM trace_step_choice)
),
steady AS (SELECT * FROM spaced WHERE gap_ns IS NOT NULL AND runs >= 4 AND n > runs / 4),
regular AS (
    SELECT source_id, name, any_value(runs) AS runs, median(gap_ns) AS median_gap_ns,
           any_value(first_run_ns) AS first_ns, any_value(last_run_ns) AS last_ns
    FROM steady GROUP BY source_id, name
    HAVING median(gap_ns) > 0 AND max(gap_ns) <= 2 * median(gap_ns) AND min(gap_ns) >= 0.5 * median(gap_ns)
),
busy AS (  -- the GPU time of the work started up to each point (a running sum), to read spans' shares from
    SELECT source_id, gpu_ns,
           sum(dur_ns) OVER (PARTITION BY source_id ORDER BY gpu_ns ROWS UNBOUNDED PRECEDING) AS before_ns,
           sum(dur_ns) OVER (PARTITION BY source_id) AS all_ns
    FROM trace_step_launches
),
covering AS (
    SELECT r.* FROM regular r
    ASOF JOIN busy a ON a.source_id = r.source_id AND r.first_ns >= a.gpu_ns
    ASOF JOIN busy b ON b.source_id = r.source_id AND r.last_ns >= b.gpu_ns
    WHERE b.before_ns - a.before_ns >= 0.5 * a.all_ns
)
SELECT source_id, arg_max(name, (runs, -first_ns)) AS name, max(runs) AS runs,
       arg_max(median_gap_ns, (runs, -first_ns)) AS median_gap_ns
FROM covering GROUP BY source_id;
