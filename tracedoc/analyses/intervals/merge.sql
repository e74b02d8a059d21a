-- intervals.merge: the union of an interval set, per lane.
--
-- An interval set is any table or view with the columns k (a lane key of any type: e.g. a device of one source,
-- {'source_id': source_id, 'device': device}), s and e (start and end, ns; intervals with e ≤ s cover no time
-- and are dropped). Pass its name as a string. The other macros of this group (intervals.gaps,
-- intervals.intersect) take sets of the same shape.

-- intervals_merge('tbl'): the union of the intervals of each lane, as disjoint sorted intervals (k, s, e);
-- overlapping or touching intervals are joined. Any further columns of tbl are carried over from each merged
-- interval's first interval (the earliest start; among equal starts the shortest), e.g. the correlation of the
-- work that opened a busy stretch.
-- One sort: an interval opens a new merged interval when it starts after the latest end before it (prev_e); that
-- merged interval then ends at the next opener's prev_e, the last one at the lane's latest end.
CREATE OR REPLACE TEMP MACRO intervals_merge(tbl) AS TABLE
WITH ordered AS (
    SELECT *,
           max(e) OVER (PARTITION BY k ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e,
           max(e) OVER (PARTITION BY k) AS last_e
    FROM query_table(tbl) WHERE e > s
)
SELECT k, s, coalesce(lead(prev_e) OVER (PARTITION BY k ORDER BY s, e), last_e) AS e,
       * EXCLUDE (k, s, e, prev_e, last_e)
FROM ordered WHERE prev_e IS NULL OR s > prev_e;
