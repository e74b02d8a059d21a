-- hang.culprits: who is stuck in which collective, and who the stuck ranks wait for.
--
-- A rank waits in collective #S of a group when S is the first collective it issued but has not completed. A
-- collective needs every member, so the ranks it waits for are the members that never issued #S (their last
-- issued number is below S): those are the culprits, whatever they are doing instead (Python, data loading, a
-- blocking call, an earlier collective of another group). Waiting ranks are victims, never culprits. When every
-- member issued #S and the dumps record start times (TORCH_NCCL_ENABLE_TIMING=1), a member whose #S is still
-- 'scheduled' while another's is 'started' is the culprit: its GPU never reached the collective (work queued
-- before it on that GPU had not finished). A member that left no dump cannot be judged; it is named as a suspect
-- only when no member with a dump is to blame. When every member issued #S and none can be told from the others
-- (hang_incomplete), the dumps say where the job hangs but not who holds it up.
-- Ranks that issued #S with a different operation, size or dtype are hang.mismatch's subject, not this one's.
-- Waits in ms, times in ns.
-- reads: fr_dumps
-- scope: job
-- include: hang.progress
-- include: hang.mismatch

-- One row per culprit: a member of a group with a stuck collective that never issued it (kind 'never_issued'),
-- at the lowest such collective; a member that issued it but whose GPU never started it while another's did
-- (kind 'not_started'); or, where no member with a dump is to blame, a member without a dump (kind 'no_dump'). Columns: the group (backend, pg_name, label), the culprit's rank, seq (the collective it never
-- issued), the wait (waiting: the ranks as text; waiting_clause: 'rank 0 issued it and waits'; waited_ms, the
-- longest measured wait, NULL when unmeasured; waited_at_least_ms, its lower bound from the enqueue to the latest
-- time in the waiting ranks' dumps; unmeasured_note, a sentence saying why the wait is unmeasured and how to
-- measure it, '' when measured; timeout_ms, stuck_collective, stuck_call_site, last_arrival), what the culprit last did on this group
-- (last_enqueued_seq, last_described, last_state, last_collective: '#2 all_reduce [[3, 4]] Float (completed)',
-- last_call_site, last_stack), silent_ms (from the culprit's last collective on this group to the latest time in
-- the waiting ranks' dumps), missing_ranks (members without a dump, as text), and the sentences verdict,
-- conclusion, missing_note ('' when none), where_to_look and advice (what to do).
CREATE OR REPLACE TEMP TABLE hang_culprits AS
WITH missing AS (
    SELECT backend, pg_name, hang_ranks_text(list(rank)) AS missing_ranks
    FROM hang_progress WHERE NOT has_dump GROUP BY backend, pg_name
),
seen AS (
    SELECT backend, pg_name, max(dump_seen_ns) AS seen_ns FROM hang_progress WHERE pending_seq IS NOT NULL
    GROUP BY backend, pg_name
),
started AS (  -- per group and stuck collective: the members whose dump saw it started
    SELECT backend, pg_name, pending_seq AS seq, list(rank ORDER BY rank) AS ranks
    FROM hang_progress WHERE pending_state = 'started' GROUP BY backend, pg_name, pending_seq
),
candidates AS (
    SELECT p.backend, p.pg_name, p.label, p.rank, p.last_enqueued_seq, p.last_described, p.last_state,
           p.last_created_ns, p.last_call_site, p.last_stack,
           w.seq, CASE WHEN k.kind = 'not_started' THEN st.ranks ELSE w.waiting_ranks END AS waiting_ranks,
           w.waited_ms, w.waited_at_least_ms, w.timeout_ms, w.described AS stuck_collective,
           hang_unmeasured_note(w.backend, w.timed, w.waited_ms, w.waited_at_least_ms, w.longest_waiting_rank,
                                w.timeout_ms) AS unmeasured_note,
           w.call_site AS stuck_call_site, w.last_arrival, k.kind
    FROM hang_progress p JOIN hang_waits w USING (backend, pg_name)
    LEFT JOIN started st ON st.backend = w.backend AND st.pg_name = w.pg_name AND st.seq = w.seq
    CROSS JOIN LATERAL (SELECT CASE WHEN NOT p.has_dump THEN 'no_dump'
                                    WHEN p.last_enqueued_seq < w.seq THEN 'never_issued'
                                    ELSE 'not_started' END AS kind) k
    WHERE NOT p.has_dump OR p.last_enqueued_seq < w.seq
       OR (p.pending_seq = w.seq AND p.pending_state = 'scheduled' AND w.timed AND st.ranks IS NOT NULL)
    QUALIFY row_number() OVER (PARTITION BY p.backend, p.pg_name, p.rank ORDER BY w.seq) = 1
),
kept AS (
    SELECT * FROM candidates
    WHERE kind <> 'no_dump' OR NOT EXISTS (
        SELECT 1 FROM candidates c WHERE c.backend = candidates.backend AND c.pg_name = candidates.pg_name
                                     AND c.kind <> 'no_dump')
),
judged AS (
    SELECT k.*, m.missing_ranks,
           CASE WHEN s.seen_ns > k.last_created_ns THEN (s.seen_ns - k.last_created_ns) / 1e6 END AS silent_ms
    FROM kept k
    LEFT JOIN missing m USING (backend, pg_name)
    LEFT JOIN seen s USING (backend, pg_name)
),
described AS (
SELECT backend, pg_name, label, rank, seq, kind,
       CASE WHEN len(waiting_ranks) = 1 THEN 'rank ' ELSE 'ranks ' END
           || hang_ranks_text(waiting_ranks) AS waiting,
       CASE WHEN len(waiting_ranks) = 1 THEN 'rank ' || waiting_ranks[1] || ' issued it and waits'
            ELSE 'ranks ' || hang_ranks_text(waiting_ranks) || ' issued it and wait' END AS waiting_clause,
       waited_ms, waited_at_least_ms, unmeasured_note, timeout_ms, stuck_collective, stuck_call_site, last_arrival,
       last_enqueued_seq, last_described, last_state,
       '#' || last_enqueued_seq || ' ' || last_described || ' (' || last_state || ')' AS last_collective,
       last_call_site, last_stack, silent_ms, missing_ranks,
       CASE WHEN kind = 'no_dump' THEN
                'left no flight-recorder dump, so it cannot be checked: it may never have issued #' || seq
                || ', or it died, was killed or missed the dump signal'
            WHEN kind = 'not_started' THEN
                'issued it, but its GPU never started it: the work it had queued on that GPU before the collective '
                || 'had not finished when the dumps were written (a kernel that runs long or never ends, or a wait on '
                || 'an event or stream)'
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
                   ELSE 'ranks ' || hang_ranks_text(waiting_ranks) || ' are its victims.' END AS conclusion,
       CASE WHEN kind <> 'no_dump' AND missing_ranks IS NOT NULL
            THEN CASE WHEN contains(missing_ranks, ',') OR contains(missing_ranks, '–') THEN ' No dump from ranks ' || missing_ranks
                                                            || ': their part is unknown.'
                      ELSE ' No dump from rank ' || missing_ranks || ': its part is unknown.' END
            ELSE '' END AS missing_note,
       CASE WHEN kind = 'no_dump'
                THEN 'its log (a crash, an out-of-memory kill, or a stall before the dump signal reached it) and its '
                     || 'code before collective #' || seq
            WHEN kind = 'not_started'
                THEN 'the GPU work it queued before collective #' || seq || coalesce(' (called from '
                     || stuck_call_site || ')', '') || ': nvidia-smi shows whether its GPU is still busy, and '
                     || 'py-spy dump --native or cuda-gdb which kernel runs'
            WHEN last_call_site IS NOT NULL THEN 'its code after ' || last_call_site
            ELSE 'its code after collective #' || last_enqueued_seq END AS where_to_look
FROM judged
)
SELECT *,
       CASE WHEN kind = 'not_started'
                THEN 'Find why the GPU of rank ' || rank || ' never reached collective #' || seq || ': look at '
                     || where_to_look || '. A GPU that never reaches a collective is busy with a kernel that runs '
                     || 'long or never ends (a device-side wait, a deadlock between streams, a fault), or waits on an '
                     || 'event another stream never records.'
            ELSE 'Find what rank ' || rank || ' did instead of issuing collective #' || seq || ': look at '
                 || where_to_look || ' for a data-loader stall, a blocking call, a branch taken only on some ranks, '
                 || 'an exception caught on one rank only, or a collective issued on another group first. Every '
                 || 'member must issue the same collectives in the same order; while a job hangs, `py-spy dump --pid '
                 || '<pid>` on rank ' || rank || ' shows where its Python is.' END AS advice
FROM described;

-- One row per group and stuck collective that every member issued (each left a dump) and that no member
-- completed, where no culprit can be told (no member is missing it, and the dumps do not show one member's GPU
-- behind the others', and they issued it alike: a mismatch is hang.mismatch's): described (the collective),
-- call_site, members (ranks, as text), timed, the wait (waited_ms, waited_at_least_ms, timeout_ms),
-- unmeasured_note, and the sentences cause and advice.
CREATE OR REPLACE TEMP TABLE hang_incomplete AS
WITH members AS (
    SELECT backend, pg_name, count(*) AS members, count(*) FILTER (WHERE has_dump) AS dumped
    FROM hang_progress GROUP BY backend, pg_name
)
SELECT w.backend, w.pg_name, w.label, w.seq, w.described, w.call_site,
       hang_ranks_text(w.waiting_ranks) AS members,
       w.timed, w.waited_ms, w.waited_at_least_ms, w.timeout_ms,
       hang_unmeasured_note(w.backend, w.timed, w.waited_ms, w.waited_at_least_ms, w.longest_waiting_rank,
                            w.timeout_ms) AS unmeasured_note,
       CASE WHEN NOT w.timed
                THEN 'The dumps were written without TORCH_NCCL_ENABLE_TIMING=1, so every member''s record of it '
                     || 'stays ''scheduled'': they cannot tell a GPU that never started it (work queued before it '
                     || 'that never finished) from a transfer that never completed.'
            ELSE 'Every member''s GPU started it and none finished: the transfer itself is stuck (the network or '
                 || 'NVLink path between the ranks, or NCCL).' END AS cause,
       CASE WHEN NOT w.timed
                THEN 'Run again with TORCH_NCCL_ENABLE_TIMING=1: the member whose record of #' || w.seq
                     || ' stays ''scheduled'' while the others'' are ''started'' is the one whose GPU never reached '
                     || 'it. Meanwhile, on each rank, nvidia-smi shows a GPU still busy, and py-spy dump --native '
                     || 'or cuda-gdb the kernel it runs. A GPU that never reaches a collective is busy with a kernel '
                     || 'that runs long or never ends (a device-side wait, a deadlock between streams, a fault), or '
                     || 'waits on an event another stream never records.'
            ELSE 'Check the links between the ranks (NCCL_DEBUG=INFO, nvidia-smi nvlink -s, the NICs), and run '
                 || 'nccl-tests between them.' END AS advice
FROM hang_waits w JOIN members m USING (backend, pg_name)
WHERE len(w.waiting_ranks) = m.members AND m.dumped = m.members AND m.members > 1
  AND NOT EXISTS (SELECT 1 FROM hang_culprits c WHERE c.backend = w.backend AND c.pg_name = w.pg_name)
  AND NOT EXISTS (SELECT 1 FROM hang_mismatches x
                  WHERE x.backend = w.backend AND x.pg_name = w.pg_name AND x.seq = w.seq);
