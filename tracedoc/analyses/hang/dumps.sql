-- hang.dumps: which flight-recorder dump speaks for each rank, the records it holds, and the process groups.
--
-- A rank may leave several dumps side by side: the automatic one written when a collective timed out and
-- on-demand ones (_dump_nccl_trace as pickle or JSON). Per rank and backend one is used: the dump whose latest
-- recorded time is the latest (it saw the most), then the automatic dump's name form `<prefix><rank>` (no
-- extension, ends with the rank: trace_rank_1), then a pickle (it carries Python stacks), then the most records,
-- then the path. Dumps without records are set aside: the generic recorder (_dump_fr_trace) stays empty on NCCL
-- jobs.
-- Times in ns since the Unix epoch, on each rank's host clock.
-- reads: fr_dumps
-- scope: job

-- One row per dump file: used (whether the analyses read it) and a note saying why.
CREATE OR REPLACE TEMP VIEW hang_dumps AS
WITH d AS (
    SELECT f.*, s.rank, s.path, regexp_extract(s.path, '[^/\\]+$') AS file,
           regexp_full_match(regexp_extract(s.path, '[^/\\]+$'), '[^.]*\D' || s.rank) AS automatic_name
    FROM fr_dumps f JOIN sources s USING (source_id)
),
ranked AS (
    SELECT source_id, rank, backend, file,
           row_number() OVER (PARTITION BY rank, backend
                              ORDER BY last_event_ns DESC NULLS LAST, automatic_name DESC, has_frames DESC,
                                       entry_count DESC, path) AS pick,
           count(*) OVER (PARTITION BY rank, backend) AS dumps_of_rank
    FROM d WHERE entry_count > 0
)
SELECT d.source_id, d.rank, d.path, d.file, d.backend, d.version, d.encoding, d.comm_lib_version, d.entry_count,
       d.first_record_id, d.last_event_ns, d.has_frames,
       coalesce(r.pick = 1, false) AS used,
       CASE WHEN d.entry_count = 0
                THEN 'not used: holds no records (the generic recorder of _dump_fr_trace stays empty on NCCL jobs)'
            WHEN r.pick > 1 THEN 'not used: rank ' || d.rank || ' is read from ' || chosen.file
            WHEN r.dumps_of_rank > 1 THEN 'used: chosen among ' || r.dumps_of_rank || ' dumps of rank ' || d.rank
                                               || ' (latest records first, then the automatic dump)'
            ELSE 'used' END AS note
FROM d
LEFT JOIN ranked r USING (source_id)
LEFT JOIN ranked chosen ON chosen.rank = r.rank AND chosen.backend = r.backend AND chosen.pick = 1;

-- 'name (file:line) ← caller (file:line) ← …': the first n frames of a stack, innermost first.
CREATE OR REPLACE TEMP MACRO hang_stack_text(frames, n) AS
    array_to_string(list_transform(frames[1:n], lambda f: coalesce(f.name, '?') || ' ('
        || coalesce(regexp_extract(f.filename, '[^/\\]+$'), '?') || ':' || coalesce(CAST(f.line AS VARCHAR), '?')
        || ')'), ' ← ');

-- A list of ranks as text, runs of three or more as ranges: [0, 1, 3, 4, ..., 999] → '0, 1, 3–999' (a job of a
-- thousand ranks names its waiting ranks in a few characters, not thousands).
CREATE OR REPLACE TEMP MACRO hang_ranks_text(ranks) AS (
    SELECT array_to_string(list_transform(starts, lambda st, k:
               CASE WHEN coalesce(starts[k + 1] - 1, len(l)) = st THEN CAST(l[st] AS VARCHAR)
                    WHEN coalesce(starts[k + 1] - 1, len(l)) = st + 1 THEN l[st] || ', ' || l[st + 1]
                    ELSE l[st] || '–' || l[coalesce(starts[k + 1] - 1, len(l))] END), ', ')
    FROM (SELECT l, list_filter(range(1, len(l) + 1), lambda i: i = 1 OR l[i] <> l[i - 1] + 1) AS starts
          FROM (SELECT list_sort(list_distinct(ranks)) AS l))
);

-- One frame as 'file:line (function)'.
CREATE OR REPLACE TEMP MACRO hang_frame_text(f) AS
    f.filename || ':' || coalesce(CAST(f.line AS VARCHAR), '?') || ' (' || coalesce(f.name, '?') || ')';

-- The innermost frame outside torch itself: where the user's code made the call.
CREATE OR REPLACE TEMP MACRO hang_user_frame(frames) AS
    hang_frame_text(list_filter(frames, lambda x: NOT (x.filename LIKE '%/torch/%' OR x.filename LIKE 'torch/%'))[1]);

-- The records of the used dumps, with their rank. done: the operation completed (gloo records no GPU events, so
-- its records never leave 'scheduled': for them, retired means completed). call_site: hang_user_frame of frames.
CREATE OR REPLACE TEMP VIEW hang_entries AS
SELECT d.rank, e.*,
       coalesce(e.state = 'completed' OR (e.backend = 'gloo' AND e.retired), false) AS done,
       hang_user_frame(e.frames) AS call_site
FROM fr_entries e JOIN hang_dumps d ON d.source_id = e.source_id AND d.used;

-- Process groups per backend: description and expected member ranks (the union of what the used dumps' pg_config
-- and records say). label: 'name (desc)', e.g. '0 (default_pg)'. A pg_config group without a name is left out:
-- Gloo groups (torch 2.13) register their ranks before they are named, so their pg_config says '' where the
-- records say '0'.
CREATE OR REPLACE TEMP TABLE hang_groups AS
WITH known AS (
    SELECT d.backend, g.pg_name, g.pg_desc, g.ranks
    FROM fr_process_groups g JOIN hang_dumps d ON d.source_id = g.source_id AND d.used
    WHERE d.backend IS NOT NULL AND g.pg_name IS NOT NULL AND g.pg_name <> ''
    UNION ALL
    SELECT backend, pg_name, pg_desc, [rank] FROM hang_entries WHERE backend IS NOT NULL AND pg_name IS NOT NULL
)
SELECT backend, pg_name, max(pg_desc) AS pg_desc,
       pg_name || coalesce(' (' || nullif(max(pg_desc), '') || ')', '') AS label,
       list_sort(list_distinct(flatten(list(ranks) FILTER (WHERE ranks IS NOT NULL)))) AS ranks
FROM known GROUP BY backend, pg_name;

-- The report's flight-recorder dump files (hang_dumps). Columns: rank, path, version, encoding, comm_lib_version,
-- entries (records it holds), used (whether the analyses read it), note (why).
CREATE OR REPLACE TEMP VIEW hang_report_dumps AS
SELECT rank, path, version, encoding, comm_lib_version, entry_count AS entries, used, note FROM hang_dumps;
