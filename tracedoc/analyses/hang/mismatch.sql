-- hang.mismatch: collectives that the ranks of a group issued differently at the same sequence number.
--
-- Every member must issue collective #S of a group with the same operation, tensor sizes and dtypes; when they
-- do not, NCCL pairs up the wrong calls and the ranks hang or exchange garbage. Either side may be the wrong one,
-- so both are reported, each with its ranks, state and call site; the odd one out is named only when one variant
-- is held by fewer ranks than every other. Sizes are not compared for operations whose sizes may differ between
-- ranks (all-to-all, gather, scatter). After the first mismatch of a group the ranks are out of step, so only
-- the first one is reported (later ones are counted). Waits in ms.
-- reads: fr_dumps
-- scope: job
-- include: hang.progress

-- One row per group with a mismatch: seq (the first mismatching collective), differs ('operation, input sizes,
-- ...'), variants ('rank 0 issued all_reduce [[3, 4]] Float → [[3, 4]] (started) at fr_job.py:31 (<module>);
-- rank 1 issued ...': operation, input sizes and dtypes → output sizes, state, call site),
-- variant_count, odd_ranks (the variant held by the fewest ranks when it is unique and the group has more than
-- two ranks, else NULL), odd_note (a sentence naming them, or ''), ranks_issued (ranks that issued it),
-- waiting (the ranks stuck in it, as text, or NULL), waited_ms (their longest measured wait, 0 when none waits,
-- NULL when unmeasured), waited_at_least_ms (its lower bound: enqueue to the latest time in the dump),
-- unmeasured_note (why the wait is not measured and how to measure it, '' when it is or none waits), timeout_ms
-- (the group's), last_arrival ('rank R, N ms after rank Q'), later_mismatches (further mismatching collectives of
-- the group).
CREATE OR REPLACE TEMP TABLE hang_mismatches AS
WITH per_seq AS (
    SELECT backend, pg_name, seq, count(*) AS ranks_issued,
           count(DISTINCT op) > 1 AS op_differs,
           count(DISTINCT in_sizes) FILTER (WHERE NOT variable_sizes) > 1 AS in_sizes_differ,
           count(DISTINCT out_sizes) FILTER (WHERE NOT variable_sizes) > 1 AS out_sizes_differ,
           count(DISTINCT in_dtypes || '|' || out_dtypes) > 1 AS dtypes_differ
    FROM hang_collectives GROUP BY backend, pg_name, seq HAVING count(*) > 1
),
bad AS (
    SELECT *, count(*) OVER (PARTITION BY backend, pg_name) - 1 AS later_mismatches
    FROM per_seq WHERE op_differs OR in_sizes_differ OR out_sizes_differ OR dtypes_differ
    QUALIFY row_number() OVER (PARTITION BY backend, pg_name ORDER BY seq) = 1
),
variants AS (
    SELECT c.backend, c.pg_name, c.seq, c.described, c.out_sizes, c.state_label, c.call_site,
           list(c.rank ORDER BY c.rank) AS ranks
    FROM hang_collectives c JOIN bad b USING (backend, pg_name, seq)
    GROUP BY ALL
),
variant_text AS (
    SELECT backend, pg_name, seq,
           string_agg(CASE WHEN len(ranks) = 1 THEN 'rank ' ELSE 'ranks ' END || hang_ranks_text(ranks)
                      || ' issued ' || described || ' → ' || out_sizes || ' (' || state_label || ')'
                      || coalesce(' at ' || call_site, ''), '; ' ORDER BY ranks) AS variants,
           count(*) AS variant_count,
           CASE WHEN sum(len(ranks)) > 2 AND count(*) FILTER (WHERE len(ranks) = min_ranks) = 1
                THEN hang_ranks_text(arg_min(ranks, len(ranks))) END AS odd_ranks
    FROM (SELECT *, min(len(ranks)) OVER (PARTITION BY backend, pg_name, seq) AS min_ranks FROM variants)
    GROUP BY backend, pg_name, seq
),
waits AS (
    SELECT backend, pg_name, seq, waiting_ranks, waited_ms, waited_at_least_ms, timeout_ms,
           hang_unmeasured_note(backend, timed, waited_ms, waited_at_least_ms, longest_waiting_rank, timeout_ms)
               AS unmeasured_note
    FROM hang_waits
)
SELECT b.backend, b.pg_name, g.label, b.seq,
       array_to_string(list_filter(['operation', 'input sizes', 'output sizes', 'dtypes'],
                                   lambda x, i: [b.op_differs, b.in_sizes_differ, b.out_sizes_differ,
                                                 b.dtypes_differ][i]), ', ') AS differs,
       v.variants, v.variant_count, v.odd_ranks,
       CASE WHEN v.odd_ranks LIKE '%,%' OR v.odd_ranks LIKE '%–%' THEN ' Ranks ' || v.odd_ranks || ' differ from all the others.'
            WHEN v.odd_ranks IS NOT NULL THEN ' Rank ' || v.odd_ranks || ' differs from all the others.'
            ELSE '' END AS odd_note,
       b.ranks_issued,
       CASE WHEN len(w.waiting_ranks) = 1 THEN 'rank ' ELSE 'ranks ' END
           || hang_ranks_text(w.waiting_ranks) AS waiting,
       CASE WHEN w.waiting_ranks IS NULL THEN 0 ELSE w.waited_ms END AS waited_ms,
       w.waited_at_least_ms, coalesce(w.unmeasured_note, '') AS unmeasured_note, w.timeout_ms,
       a.last_arrival, b.later_mismatches
FROM bad b
JOIN variant_text v USING (backend, pg_name, seq)
JOIN hang_groups g USING (backend, pg_name)
LEFT JOIN waits w USING (backend, pg_name, seq)
LEFT JOIN hang_last_arrival a USING (backend, pg_name, seq);
