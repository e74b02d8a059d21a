-- hang.progress: how far each member rank of each process group got, and when it issued what.
--
-- Collectives are matched across ranks by (backend, group, collective sequence number): every member issues the
-- group's collectives in the same order, so #3 on rank 0 and #3 on rank 1 must be the same call. Members of a
-- coalesced group share one number and are folded into one row; their own records carry no GPU events and stay
-- 'scheduled', so the group's state is that of its 'coalesced' record: a number is done when any record of it is.
-- Point-to-point records are left out (their numbers count per rank, not per group). Times in ns on each rank's
-- host clock; waits in ms. Also: who is stuck in which collective (hang_waits) and who arrived last.
--
-- How long a rank waited is *measured* only when its dump says the collective started: with
-- TORCH_NCCL_ENABLE_TIMING=1 the dump stamps a started collective with the time it was written. Without it (the
-- default) a stuck collective stays 'scheduled' with no start time, and so do all Gloo records: the dump then holds
-- only enqueue and completion-discovery times, and the time from the enqueue to the latest of them is a lower
-- bound of the wait, not a measure of it (it is often a few ms, when the previous collective's completion was
-- discovered just after the stuck one was enqueued).
-- reads: fr_dumps
-- scope: job
-- include: hang.dumps

-- One row per rank and collective. op: the operation ('a+b' for a coalesced group); in_sizes/in_dtypes and
-- out_sizes/out_dtypes as text ('[[3, 4]]', 'Float'); described: 'all_reduce [[3, 4]] Float'; done: completed on
-- this rank; state_label: completed | started | scheduled; created_ns: when the host enqueued it; started_ns:
-- when the rank's watchdog or dump first saw it started (NULL without TORCH_NCCL_ENABLE_TIMING, and for Gloo);
-- variable_sizes: an operation whose tensor sizes may legitimately differ between ranks (all-to-all, gather,
-- scatter); frames/call_site: the Python stack and the user's call site.
CREATE OR REPLACE TEMP TABLE hang_collectives AS
SELECT *, op || ' ' || in_sizes || ' ' || in_dtypes AS described FROM (
SELECT backend, pg_name, rank, collective_seq_id AS seq,
       string_agg(coalesce(op, '?'), '+' ORDER BY op_id) AS op,
       string_agg(coalesce(CAST(input_sizes AS VARCHAR), '?'), ' + ' ORDER BY op_id) AS in_sizes,
       string_agg(coalesce(CAST(output_sizes AS VARCHAR), '?'), ' + ' ORDER BY op_id) AS out_sizes,
       string_agg(coalesce(array_to_string(input_dtypes, ','), '?'), ' + ' ORDER BY op_id) AS in_dtypes,
       string_agg(coalesce(array_to_string(output_dtypes, ','), '?'), ' + ' ORDER BY op_id) AS out_dtypes,
       bool_or(done) AS done,
       CASE WHEN bool_or(done) THEN 'completed'
            WHEN bool_or(state = 'started') THEN 'started'
            ELSE coalesce(min(state), 'unknown') END AS state_label,
       min(time_created_ns) AS created_ns,
       min(time_discovered_started_ns) AS started_ns,
       max(timeout_ms) AS timeout_ms,
       bool_or(op LIKE '%all_to_all%' OR op LIKE '%alltoall%' OR op IN ('gather', 'scatter')) AS variable_sizes,
       arg_min(frames, op_id) AS frames,
       arg_min(call_site, op_id) AS call_site
FROM hang_entries
WHERE NOT coalesce(is_p2p, false) AND collective_seq_id IS NOT NULL AND pg_name IS NOT NULL AND backend IS NOT NULL
GROUP BY backend, pg_name, rank, collective_seq_id
);

-- One row per process group and member rank, whether or not the rank left a dump.
-- last_enqueued_seq: the last collective the host issued on this group (0: none; NULL: unknown, because the
-- rank's ring buffer wrapped and holds nothing of this group, or the rank left no dump); last_started_seq /
-- last_completed_seq: the last seen running / completed; pending_seq: the first issued but not completed (what
-- the rank is stuck in); last_* and pending_*: those collectives' description, state, creation time, call site
-- and stack (innermost 8 frames); dump_seen_ns: the latest time recorded anywhere in the rank's dump (a lower
-- bound of when it dumped); waited_at_least_ms: the time from the pending collective's enqueue to dump_seen_ns, a
-- lower bound of its wait (NULL when the dump holds no later time); waited_ms: the same when it is a measure of
-- the wait, because the pending collective was seen started (NULL otherwise: unmeasured); timed: the rank's dump
-- records start times or GPU durations (TORCH_NCCL_ENABLE_TIMING=1).
CREATE OR REPLACE TEMP TABLE hang_progress AS
WITH members AS (
    SELECT backend, pg_name, label, unnest(ranks) AS rank FROM hang_groups
),
dumps AS (
    SELECT d.rank, d.backend, d.file, d.first_record_id, d.last_event_ns,
           coalesce(bool_or(e.time_discovered_started_ns IS NOT NULL OR e.duration_ms IS NOT NULL), false) AS timed
    FROM hang_dumps d LEFT JOIN fr_entries e ON e.source_id = d.source_id
    WHERE d.used
    GROUP BY ALL
),
per_rank AS (
    SELECT backend, pg_name, rank,
           max(seq) AS last_enqueued_seq,
           max(seq) FILTER (WHERE done OR state_label = 'started') AS last_started_seq,
           max(seq) FILTER (WHERE done) AS last_completed_seq,
           min(seq) FILTER (WHERE NOT done) AS pending_seq
    FROM hang_collectives GROUP BY backend, pg_name, rank
)
SELECT m.backend, m.pg_name, m.label, m.rank,
       d.rank IS NOT NULL AS has_dump, d.file AS dump_file,
       CASE WHEN p.rank IS NOT NULL THEN p.last_enqueued_seq
            WHEN d.rank IS NOT NULL AND coalesce(d.first_record_id, 0) = 0 THEN 0 END AS last_enqueued_seq,
       p.last_started_seq, p.last_completed_seq, p.pending_seq,
       l.described AS last_described, l.state_label AS last_state, l.created_ns AS last_created_ns,
       l.call_site AS last_call_site, hang_stack_text(l.frames, 8) AS last_stack,
       w.described AS pending_described, w.state_label AS pending_state, w.created_ns AS pending_created_ns,
       w.timeout_ms AS pending_timeout_ms, w.call_site AS pending_call_site,
       d.last_event_ns AS dump_seen_ns, coalesce(d.timed, false) AS timed,
       CASE WHEN d.last_event_ns > w.created_ns THEN (d.last_event_ns - w.created_ns) / 1e6 END AS waited_at_least_ms,
       CASE WHEN d.last_event_ns > w.created_ns AND w.started_ns IS NOT NULL
            THEN (d.last_event_ns - w.created_ns) / 1e6 END AS waited_ms
FROM members m
LEFT JOIN dumps d ON d.rank = m.rank AND d.backend = m.backend
LEFT JOIN per_rank p ON p.backend = m.backend AND p.pg_name = m.pg_name AND p.rank = m.rank
LEFT JOIN hang_collectives l
       ON l.backend = m.backend AND l.pg_name = m.pg_name AND l.rank = m.rank AND l.seq = p.last_enqueued_seq
LEFT JOIN hang_collectives w
       ON w.backend = m.backend AND w.pg_name = m.pg_name AND w.rank = m.rank AND w.seq = p.pending_seq;

-- Who arrived when at each collective issued by two or more ranks: lag_ms = this rank's enqueue time minus the
-- earliest rank's (ms; host clocks, so compare ranks of one host, or hosts with synchronized clocks);
-- arrived_last: this rank enqueued it last.
CREATE OR REPLACE TEMP VIEW hang_arrivals AS
SELECT backend, pg_name, seq, rank, created_ns,
       (created_ns - min(created_ns) OVER g) / 1e6 AS lag_ms,
       created_ns = max(created_ns) OVER g AND count(*) OVER g > 1 AS arrived_last
FROM hang_collectives
WHERE created_ns IS NOT NULL
WINDOW g AS (PARTITION BY backend, pg_name, seq);

-- Per collective issued by two or more ranks: last_arrival, 'rank R, N ms after rank Q' (the latest and the
-- earliest to enqueue it).
CREATE OR REPLACE TEMP VIEW hang_last_arrival AS
SELECT backend, pg_name, seq,
       'rank ' || arg_max(rank, (created_ns, rank)) || ', ' || round(max(lag_ms), 1) || ' ms after rank '
           || arg_min(rank, (created_ns, rank)) AS last_arrival
FROM hang_arrivals GROUP BY backend, pg_name, seq HAVING count(*) > 1;

-- One row per group and collective that some rank is stuck in. waiting_ranks: the ranks stuck in it;
-- waited_ms: the longest measured wait among them as of their dumps (NULL when no dump measures it);
-- waited_at_least_ms: the longest lower bound (enqueue to the latest time in the rank's dump; NULL when none)
-- and longest_waiting_rank, the rank it is from; timed: some waiting rank's dump records start times;
-- timeout_ms: the group's timeout; described: the collective as the first waiting rank issued it;
-- waiting_since_ns: the first waiting rank's enqueue time; last_arrival: 'rank R, N ms after rank Q' among the ranks that issued it.
CREATE OR REPLACE TEMP TABLE hang_waits AS
SELECT p.backend, p.pg_name, any_value(p.label) AS label, p.pending_seq AS seq,
       list(p.rank ORDER BY p.rank) AS waiting_ranks,
       max(p.waited_ms) AS waited_ms,
       max(p.waited_at_least_ms) AS waited_at_least_ms,
       arg_max(p.rank, (p.waited_at_least_ms, -p.rank)) FILTER (WHERE p.waited_at_least_ms IS NOT NULL)
           AS longest_waiting_rank,
       bool_or(p.timed) AS timed,
       max(p.pending_timeout_ms) AS timeout_ms,
       arg_min(p.pending_described, p.rank) AS described,
       arg_min(p.pending_call_site, p.rank) AS call_site,
       min(p.pending_created_ns) AS waiting_since_ns,
       any_value(a.last_arrival) AS last_arrival
FROM hang_progress p
LEFT JOIN hang_last_arrival a ON a.backend = p.backend AND a.pg_name = p.pg_name AND a.seq = p.pending_seq
WHERE p.pending_seq IS NOT NULL
GROUP BY p.backend, p.pg_name, p.pending_seq;

-- A duration as text: '14.5 s' from 1 s up, else '10.5 ms'.
CREATE OR REPLACE TEMP MACRO hang_duration_text(ms) AS
    CASE WHEN ms >= 1000 THEN round(ms / 1e3, 1) || ' s' ELSE round(ms, 1) || ' ms' END;

-- Why the wait in a stuck collective is not measured, and how to measure it: a sentence ('' when it is measured).
-- The dump's own times give a lower bound of the wait; a watchdog writes its dump only once a collective has run
-- for the group's timeout, so a dump written on a timeout (TORCH_NCCL_DUMP_ON_TIMEOUT) means the wait reached it.
CREATE OR REPLACE TEMP MACRO hang_unmeasured_note(backend, timed, waited_ms, waited_at_least_ms,
                                                   longest_waiting_rank, timeout_ms) AS
    CASE WHEN waited_ms IS NOT NULL THEN ''
         ELSE ' The wait is not measured: '
              || CASE WHEN backend = 'gloo'
                          THEN 'Gloo records hold no start times, only when each collective was enqueued'
                      WHEN timed THEN 'the GPU had not started the collective when the dump was written'
                      WHEN backend <> 'nccl' THEN 'the dumps hold no start time for it'
                      ELSE 'the dumps were written without TORCH_NCCL_ENABLE_TIMING=1, so a stuck collective stays '
                           || '''scheduled'' with no start time and the dumps hold only enqueue and completion times'
                 END
              || CASE WHEN timeout_ms > 0
                          THEN '; dumps written on the watchdog''s timeout mean it had waited the group''s timeout, '
                               || hang_duration_text(timeout_ms)
                               || CASE WHEN waited_at_least_ms > timeout_ms
                                       THEN ', and rank ' || longest_waiting_rank || '''s dump shows at least '
                                            || hang_duration_text(waited_at_least_ms)
                                       ELSE '' END
                      WHEN waited_at_least_ms >= 1
                          THEN '; rank ' || longest_waiting_rank || ' had waited at least '
                               || hang_duration_text(waited_at_least_ms) || ' since it enqueued it, by the time of '
                               || 'its dump (a lower bound)'
                      ELSE '; the dumps hold no time after its enqueue either, so not even a lower bound of the wait' END
              || CASE WHEN backend = 'nccl' AND NOT timed
                          THEN '. Set TORCH_NCCL_ENABLE_TIMING=1 to record when collectives start and measure it.'
                      ELSE '.' END
    END;

-- The report's progress of each rank in each process group (hang_progress). Columns: backend, pg (the group's
-- name), pg_label, rank, has_dump, last_enqueued_seq, last_described, last_state, last_started_seq,
-- last_completed_seq, pending_seq, pending_described, waited_ms, last_call_site.
CREATE OR REPLACE TEMP VIEW hang_report_collectives AS
SELECT backend, pg_name AS pg, label AS pg_label, rank, has_dump, last_enqueued_seq, last_described, last_state,
       last_started_seq, last_completed_seq, pending_seq, pending_described, waited_ms, last_call_site
FROM hang_progress;
