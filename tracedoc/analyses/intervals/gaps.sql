-- intervals.gaps: the stretches of each lane that an interval set leaves uncovered.
--
-- Sets as in intervals.merge: columns k (lane), s, e (ns); the intervals may overlap.

-- intervals_gaps('tbl'): per lane, every gap between the union's intervals, as sorted intervals (k, s, e): from
-- the end of one merged interval to the start of the next. The time before a lane's first interval and after its
-- last is no gap (a lane has no bounds of its own; add them to the set as intervals when needed).
CREATE OR REPLACE TEMP MACRO intervals_gaps(tbl) AS TABLE
SELECT k, prev_e AS s, s AS e
FROM (
    SELECT k, s, max(e) OVER (PARTITION BY k ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
    FROM query_table(tbl) WHERE e > s
)
WHERE s > prev_e;
