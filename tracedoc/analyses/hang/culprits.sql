-- hang.culprits: who is stuck in which collective, and who the stuck ranks wait for.
--
-- A rank waits in collective #S of a group when S is the first collective it issued but has not completed. A
-- collective needs every member, so the ranks it waits for are the members that never issued #S (their last
-- issued number is below S): those are the culprits, whatever they are doing instead (Python, data loading, a
-- blocking call, an earlier collective of another group). Waiting ranks are victims, never culprits. A member
-- that left no dump cannot be judged; it is named as a suspect only when no member with a dump is to blame.
-- Ranks that issued #S with a different operation, size or dtype are hang.mismatch's subject, not this one's.
-- Waits in ms, times in ns.
-- include: hang.progress

-- One row per culprit: a member of a group with a stuck collective that never issued it (kind 'never_issued'),
-- at the lowest such collective; or, where no member with a dump is to blame, a member without a dump
-- (kind 'no_dump'). Columns: the group (backend, pg_name, label), the culprit's rank, seq (the collective it never
-- issued), the wait (waiting: the ranks as text; waiting_clause: 'rank 0 issued it and waits'; waited_ms, the
-- longest measured wait, NULL when unmeasured; waited_at_least_ms, its lower bound from the enqueue to the latest
-- time in the waiting ranks' dumps; unmeasured_note, a sentence saying why the wait is unmeasured and how to
-- measure it, '' when measured; timeout_ms, stuck_collective, stuck_call_site, last_arrival), what the culprit last did on this group
-- (last_enqueued_seq, last_described, last_state, last_collective: '#2 all_reduce [[3, 4]] Float (completed)',
-- last_call_site, last_stack), silent_ms (from the culprit's last collective on this group to the latest time in
-- the waiting ranks' dumps), missing_ranks (members without a dump, as text), and the sentences verdict,
-- conclusion, missing_note ('' when none) and where_to_look.
CREATE OR REPLACE TEMP TABLE hang_culprits AS
WITH missing AS (
    SELECT backend, pg_name, array_to_string(list(rank ORDER BY rank), ', ') AS missing_ranks
    FROM hang_progress WHERE NOT has_dump GROUP BY backend, pg_name
),
seen AS (
    SELECT backend, pg_name, max(dump_seen_ns) AS seen_ns FROM hang_progress WHERE pending_seq IS NOT NULL
    GROUP BY backend, pg_name
),
candidates AS (
    SELECT p.backend, p.pg_name, p.label, p.rank, p.last_enqueued_seq, p.last_described, p.last_state,
           p.last_created_ns, p.last_call_site, p.last_stack,
           w.seq, w.waiting_ranks, w.waited_ms, w.waited_at_least_ms, w.timeout_ms, w.described AS stuck_collective,
           hang_unmeasured_note(w.backend, w.timed, w.waited_ms, w.waited_at_least_ms, w.longest_waiting_rank)
               AS unmeasured_note,
           w.call_site AS stuck_call_site, w.last_arrival,
           CASE WHEN p.has_dump THEN 'never_issued' ELSE 'no_dump' END AS kind
    FROM hang_progress p JOIN hang_waits w USING (backend, pg_name)
    WHERE (p.has_dump AND p.last_enqueued_seq < w.seq) OR NOT p.has_dump
    QUALIFY row_number() OVER (PARTITION BY p.backend, p.pg_name, p.rank ORDER BY w.seq) = 1
),
kept AS (
    SELECT * FROM candidates
    WHERE kind = 'never_issued' OR NOT EXISTS (
        SELECT 1 FROM candidates c WHERE c.backend = candidates.backend AND c.pg_name = candidates.pg_name
                                     AND c.kind = 'never_issued')
),
judged AS (
    SELECT k.*, m.missing_ranks,
           CASE WHEN s.seen_ns > k.last_created_ns THEN (s.seen_ns - k.last_created_ns) / 1e6 END AS silent_ms
    FROM kept k
    LEFT JOIN missing m USING (backend, pg_name)
    LEFT JOIN seen s USING (backend, pg_name)
)
SELECT backend, pg_name, label, rank, seq, kind,
       CASE WHEN len(waiting_ranks) = 1 THEN 'rank ' ELSE 'ranks ' END
           || array_to_string(waiting_ranks, ', ') AS waiting,
       CASE WHEN len(waiting_ranks) = 1 THEN 'rank ' || waiting_ranks[1] || ' issued it and waits'
            ELSE 'ranks ' || array_to_string(waiting_ranks, ', ') || ' issued it and wait' END AS waiting_clause,
       waited_ms, waited_at_least_ms, unmeasured_note, timeout_ms, stuck_collective, stuck_call_site, last_arrival,
       last_enqueued_seq, last_described, last_state,
       '#' || last_enqueued_seq || ' ' || last_described || ' (' || last_state || ')' AS last_collective,
       last_call_site, last_stack, silent_ms, missing_ranks,
       CASE WHEN kind = 'no_dump' THEN
                'left no flight-recorder dump, so it cannot be checked: it may never have issued #' || seq
                || ', or it died, was killed or missed the dump signal'
            WHEN last_enqueued_seq = 0 THEN 'never issued any collective on this group'
            ELSE 'never issued it: its last collective on this group was #' || last_enqueued_seq || ' '
                 || last_described || ' (' || last_state || ')'
                 || coalesce(', called from ' || last_call_site, '')
                 || CASE WHEN silent_ms >= 1000 THEN ', and it issued nothing more on this group for at least '
                                                     || hang_duration_text(silent_ms) ELSE '' END
       END AS verdict,
       CASE WHEN kind = 'no_dump' THEN 'Rank ' || rank || ' is the likely culprit (unconfirmed); '
            ELSE 'Rank ' || rank || ' is the culprit; ' END
           || CASE WHEN len(waiting_ranks) = 1 THEN 'rank ' || waiting_ranks[1] || ' is its victim.'
                   ELSE 'ranks ' || array_to_string(waiting_ranks, ', ') || ' are its victims.' END AS conclusion,
       CASE WHEN kind = 'never_issued' AND missing_ranks IS NOT NULL
            THEN ' No dump from rank(s) ' || missing_ranks || ': their part is unknown.' ELSE '' END AS missing_note,
       CASE WHEN kind = 'no_dump'
                THEN 'its log (a crash, an out-of-memory kill, or a stall before the dump signal reached it) and its '
                     || 'code before collective #' || seq
            WHEN last_call_site IS NOT NULL THEN 'its code after ' || last_call_site
            ELSE 'its code after collective #' || last_enqueued_seq END AS where_to_look
FROM judged;
