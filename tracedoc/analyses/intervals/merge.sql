-- intervals.merge: interval-set macros that the timeline analyses share.
--
-- An interval set is any table or view with the columns k (a lane key: e.g. one device of one source), s and e
-- (start and end, ns; e > s). Pass its name as a string.

-- intervals_merge('tbl'): the union of the intervals of each lane, as disjoint sorted intervals (k, s, e); overlapping
-- or touching intervals are joined. Empty intervals are dropped.
CREATE OR REPLACE TEMP MACRO intervals_merge(tbl) AS TABLE
WITH ordered AS (
    SELECT k, s, e,
           max(e) OVER (PARTITION BY k ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
    FROM query_table(tbl) WHERE e > s
),
grouped AS (
    SELECT k, s, e, sum(CASE WHEN prev_e IS NULL OR s > prev_e THEN 1 ELSE 0 END)
                        OVER (PARTITION BY k ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS grp
    FROM ordered
)
SELECT k, min(s) AS s, max(e) AS e FROM grouped GROUP BY k, grp;
