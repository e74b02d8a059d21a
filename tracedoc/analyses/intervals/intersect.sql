-- intervals.intersect: the time two interval sets cover together, per lane.
--
-- Sets as in intervals.merge: columns k (lane), s, e (ns); the intervals of either set may overlap each other.

-- intervals_intersect('a', 'b'): per lane, where both a and b have an interval, as disjoint sorted pieces (k, s, e).
-- Pieces may touch (sum their lengths for |a ∩ b|; intervals_merge joins them). Only lanes of both sets are swept:
-- one pass over the boundaries of both, counting how many intervals of each set are open until the next boundary.
-- Merged inputs (intervals_merge) make it cheaper: fewer boundaries.
CREATE OR REPLACE TEMP MACRO intervals_intersect(a, b) AS TABLE
WITH edges AS (
    SELECT k, unnest([s, e]) AS t, unnest([1, -1]) AS da, 0 AS db
    FROM query_table(a) WHERE e > s AND k IN (SELECT k FROM query_table(b))
    UNION ALL
    SELECT k, unnest([s, e]), 0, unnest([1, -1])
    FROM query_table(b) WHERE e > s AND k IN (SELECT k FROM query_table(a))
),
levels AS (
    SELECT k, t, sum(da) OVER (w ROWS UNBOUNDED PRECEDING) AS na, sum(db) OVER (w ROWS UNBOUNDED PRECEDING) AS nb,
           lead(t) OVER w AS t_next
    FROM edges WINDOW w AS (PARTITION BY k ORDER BY t, da, db)
)
SELECT k, t AS s, t_next AS e FROM levels WHERE na > 0 AND nb > 0 AND t_next > t;
