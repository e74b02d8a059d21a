-- ranks.collectives: every collective matched across the ranks, with each rank's arrival, its wait inside the
-- collective and the time the last rank held the others up.
--
-- Matching. The communication kernels (gpu_activity.category = 'communication') of one channel run in issue
-- order; a channel is a process group (named by the collective call, collective_calls, that launched the
-- channel's kernels) or, without host records (Nsight Systems), a CUDA stream, numbered in the order the rank
-- first communicates on it. So the k-th kernel of a channel on one rank is the
-- k-th collective of that group on every other rank, once the ranks' windows are lined up: each rank's profiler
-- opens at the same host step but catches a different number of kernels still queued from earlier steps. The
-- shift comes from the kernels launched inside the window: the j-th collective a rank launched during
-- ProfilerStep#N is the j-th one every rank launched during that step (the most common shift wins; without
-- host launches the shift is 0). Each channel's reference is its lowest rank. A rank's clock offset against it
-- is the median of (end − reference end) over the matched kernels: a collective ends on every rank within a few
-- µs, so traces from different hosts line up too.
--
-- Definitions (ns). A rank arrives at a collective when its kernel starts: its stream has reached it and the
-- data is ready (the host's launch is earlier and says nothing of the GPU). arrival_ns is on the reference
-- clock (ts_ns − offset). Inside the collective every rank waits for the last one to arrive:
--   wait_ns      min(last arrival − own arrival, own kernel duration); 0 for the last rank
--   lateness_ns  own arrival − first arrival
--   blocked_ns   last arrival − second-last arrival, on the last rank's row only (else 0): the time that rank
--                alone held the others up; each of them would have waited that much less had it arrived with
--                the second-last
--   exposed_wait_ns     the part of wait_ns during which this rank's GPU ran no compute kernel: the part that
--                       cost it time (a wait hidden behind compute, as in DDP's bucketed all-reduce, costs
--                       nothing)
--   blocked_exposed_ns  on the last rank's row: the mean over the other ranks of the exposed part of their wait
--                       after the second-last arrival (what the last rank cost the others); else 0
-- It applies only where the store holds communication kernels (ranks.matched gives the other modules an empty
-- ranks_collectives elsewhere).
-- reads: communication_kernels
-- scope: job
-- hands back: ranks_comm_kernels, ranks_compute_busy_near_comm AS ranks_compute_busy
-- client only: ranks_alignment, ranks_matched_kernels, ranks_clock_offsets
-- client only: ranks_collectives, ranks_alignment_quality
-- include: trace.steps
-- include: intervals.merge

-- One row per communication kernel. Columns: source_id, rank, device, stream, name, ts_ns/end_ns/dur_ns,
-- correlation_id, launch_ts_ns (start of the host's launch call, NULL when launched before the window),
-- collective, pg_name, dtype, in_nelems/out_nelems, in_splits/out_splits (collective_calls, NULL when not
-- recorded), channel, step (the ProfilerStep during which it was launched), k (1-based position in its channel).
CREATE OR REPLACE TEMP TABLE ranks_comm_kernels AS
WITH k AS (
    SELECT source_id, rank, device, stream, name, ts_ns, ts_ns + dur_ns AS end_ns, dur_ns, correlation_id
    FROM gpu_activity WHERE kind = 'kernel' AND category = 'communication'
),
launches AS (
    SELECT k.source_id, k.correlation_id, min(c.ts_ns) AS launch_ts_ns,
           arg_min(c.external_id, (c.ts_ns, c.external_id)) AS external_id
    FROM (SELECT DISTINCT source_id, correlation_id FROM k) k
    JOIN cpu_activity c ON c.source_id = k.source_id AND c.correlation_id = k.correlation_id
    WHERE c.kind IN ('runtime', 'driver')
    GROUP BY k.source_id, k.correlation_id
),
calls AS (
    SELECT * FROM collective_calls
    QUALIFY row_number() OVER (PARTITION BY source_id, external_id ORDER BY ts_ns) = 1
),
joined AS (
    SELECT k.*, l.launch_ts_ns, c.collective, c.pg_name, c.dtype, c.in_nelems, c.out_nelems, c.in_splits,
           c.out_splits
    FROM k
    LEFT JOIN launches l ON l.source_id = k.source_id AND l.correlation_id = k.correlation_id
    LEFT JOIN calls c ON c.source_id = k.source_id AND c.external_id = l.external_id
),
channels AS (  -- a rank's streams are numbered in the order it first communicates on them: stream ids differ
               -- between processes, the order in which a job first uses its process groups does not
    SELECT source_id, device, stream,
           coalesce('pg ' || mode(pg_name ORDER BY ts_ns, pg_name),
                    'communication stream ' || row_number() OVER (PARTITION BY source_id ORDER BY min(ts_ns), stream))
               AS channel
    FROM joined GROUP BY source_id, device, stream
),
stepped AS (
    SELECT j.*, CASE WHEN j.launch_ts_ns < s.ts_ns + s.dur_ns THEN s.step END AS step
    FROM joined j ASOF LEFT JOIN trace_steady_steps s ON j.source_id = s.source_id AND j.launch_ts_ns >= s.ts_ns
)
SELECT s.*, ch.channel,
       row_number() OVER (PARTITION BY s.source_id, ch.channel ORDER BY s.ts_ns, s.stream) AS k
FROM stepped s JOIN channels ch USING (source_id, device, stream);

-- One row per source and channel: how it was lined up with the channel's reference. Columns: source_id, rank,
-- channel, ref_source_id, shift (its k + shift = the reference's k), keys (kernels matched by launch step and
-- order), keys_agreeing (of those, how many give that shift), offset_ns (clock offset: its time − reference
-- time), end_spread_ns (median |end difference − offset| over matched kernels: how well they line up, ns),
-- matched (kernels that have a partner on every rank of the channel), name_mismatches (matched collectives whose
-- kernel names differ between ranks).
CREATE OR REPLACE TEMP TABLE ranks_alignment AS
WITH has_steps AS (SELECT DISTINCT source_id FROM trace_steady_steps),
keyed AS (
    SELECT source_id, channel, k,
           CASE WHEN source_id IN (SELECT source_id FROM has_steps) THEN step ELSE -1 END AS key_step
    FROM ranks_comm_kernels WHERE launch_ts_ns IS NOT NULL
),
numbered AS (
    SELECT *, row_number() OVER (PARTITION BY source_id, channel, key_step ORDER BY k) AS j
    FROM keyed WHERE key_step IS NOT NULL
),
members AS (
    SELECT source_id, channel, any_value(rank) AS rank FROM ranks_comm_kernels GROUP BY source_id, channel
),
refs AS (SELECT channel, arg_min(source_id, (rank, source_id)) AS ref_source_id FROM members GROUP BY channel),
pairs AS (
    SELECT a.source_id, a.channel, b.k - a.k AS shift
    FROM numbered a JOIN refs r USING (channel)
    JOIN numbered b ON b.source_id = r.ref_source_id AND b.channel = a.channel
                   AND b.key_step = a.key_step AND b.j = a.j
),
votes AS (SELECT source_id, channel, shift, count(*) AS votes FROM pairs GROUP BY source_id, channel, shift),
shifts AS (  -- the shift most keys give; on a tie the smallest, so that the same traces always line up alike
    SELECT source_id, channel, arg_max(shift, (votes, -abs(shift), -shift)) AS shift, sum(votes) AS keys
    FROM votes GROUP BY source_id, channel
)
SELECT m.source_id, m.rank, m.channel, r.ref_source_id, coalesce(s.shift, 0) AS shift,
       coalesce(s.keys, 0) AS keys,
       (SELECT count(*) FROM pairs p WHERE p.source_id = m.source_id AND p.channel = m.channel
                                        AND p.shift = s.shift) AS keys_agreeing
FROM members m JOIN refs r USING (channel) LEFT JOIN shifts s USING (source_id, channel);

-- The matched kernels: instance = the reference's k; only instances present on every rank of the channel.
CREATE OR REPLACE TEMP TABLE ranks_matched_kernels AS
WITH aligned AS (
    SELECT c.*, c.k + a.shift AS instance, a.ref_source_id
    FROM ranks_comm_kernels c JOIN ranks_alignment a USING (source_id, channel)
),
complete AS (
    SELECT channel, instance
    FROM aligned GROUP BY channel, instance
    HAVING count(DISTINCT source_id) = (SELECT count(*) FROM ranks_alignment r WHERE r.channel = aligned.channel)
       AND count(*) = count(DISTINCT source_id) AND count(*) >= 2
)
SELECT a.* FROM aligned a JOIN complete USING (channel, instance);

-- One row per source and channel: offset_ns, the median of (end − reference end) over its matched kernels.
CREATE OR REPLACE TEMP TABLE ranks_clock_offsets AS
WITH d AS (
    SELECT m.source_id, m.channel, m.end_ns - r.end_ns AS diff
    FROM ranks_matched_kernels m JOIN ranks_matched_kernels r
      ON r.channel = m.channel AND r.instance = m.instance AND r.source_id = m.ref_source_id
)
SELECT source_id, channel, CAST(median(diff) AS BIGINT) AS offset_ns FROM d GROUP BY source_id, channel;

-- The compute kernels as an interval set per device (intervals.merge).
CREATE OR REPLACE TEMP VIEW ranks_compute_kernels AS
SELECT {'source_id': source_id, 'device': device} AS k, ts_ns AS s, ts_ns + dur_ns AS e, source_id, device
FROM gpu_activity WHERE kind = 'kernel' AND category = 'compute';

-- Merged compute-kernel intervals per device.
CREATE OR REPLACE TEMP TABLE ranks_compute_busy AS
SELECT source_id, device, s AS ts_ns, e AS end_ns
FROM intervals_merge('ranks_compute_kernels');

-- What a rank hands back of its compute (as ranks_compute_busy): the merged intervals that overlap one of its
-- collectives' kernels (the waits compared with them lie inside those kernels). A range join on (source, device,
-- time) packed into HUGEINT keys: an equality beside two inequalities would compare every pair.
CREATE OR REPLACE TEMP VIEW ranks_compute_busy_near_comm AS
SELECT DISTINCT b.source_id, b.device, b.ts_ns, b.end_ns
FROM (SELECT *, ((source_id::HUGEINT * 65536 + device) << 64) + ts_ns AS k_start,
             ((source_id::HUGEINT * 65536 + device) << 64) + end_ns AS k_end FROM ranks_compute_busy) b
JOIN (SELECT ((source_id::HUGEINT * 65536 + device) << 64) + ts_ns AS k_start,
             ((source_id::HUGEINT * 65536 + device) << 64) + end_ns AS k_end FROM ranks_comm_kernels) c
  ON b.k_start < c.k_end AND b.k_end > c.k_start;

-- One row per matched collective and rank: every column of ranks_comm_kernels plus instance, offset_ns,
-- arrival_ns, first_arrival_ns, last_arrival_ns, last_rank, is_last, ranks (ranks in the collective), wait_ns,
-- lateness_ns, blocked_ns, exposed_wait_ns, blocked_exposed_ns (see the header), names_agree (every rank ran a
-- kernel of the same name), instance_step (the step the collective was launched in, on any rank).
CREATE OR REPLACE TEMP TABLE ranks_collectives AS
WITH a AS (
    SELECT m.*, o.offset_ns, m.ts_ns - o.offset_ns AS arrival_ns
    FROM ranks_matched_kernels m JOIN ranks_clock_offsets o USING (source_id, channel)
),
inst AS (
    SELECT channel, instance, min(arrival_ns) AS first_arrival_ns, max(arrival_ns) AS last_arrival_ns,
           arg_max(source_id, (arrival_ns, -rank)) AS last_source_id, count(*) AS ranks,
           count(DISTINCT name) = 1 AS names_agree, min(step) AS instance_step
    FROM a GROUP BY channel, instance
),
second AS (
    SELECT a.channel, a.instance, max(a.arrival_ns) AS second_arrival_ns
    FROM a JOIN inst i USING (channel, instance) WHERE a.source_id <> i.last_source_id
    GROUP BY a.channel, a.instance
),
w AS (
    SELECT a.*, i.first_arrival_ns, i.last_arrival_ns, i.ranks, i.names_agree, i.instance_step,
           a.source_id = i.last_source_id AS is_last,
           least(greatest(i.last_arrival_ns - a.arrival_ns, 0), a.dur_ns) AS wait_ns,
           a.arrival_ns - i.first_arrival_ns AS lateness_ns,
           CASE WHEN a.source_id = i.last_source_id THEN i.last_arrival_ns - s.second_arrival_ns ELSE 0 END
               AS blocked_ns,
           -- the part of the wait after the second-last arrival, on this rank's own clock (non-last ranks)
           CASE WHEN a.source_id <> i.last_source_id
                THEN greatest(s.second_arrival_ns + a.offset_ns, a.ts_ns) END AS attr_start_ns
    FROM a JOIN inst i USING (channel, instance) JOIN second s USING (channel, instance)
),
spans AS (  -- the wait and its attributable part, for the overlap with compute
    SELECT channel, instance, source_id, device, 'wait' AS part, ts_ns AS s_ns, ts_ns + wait_ns AS e_ns
    FROM w WHERE wait_ns > 0
    UNION ALL
    SELECT channel, instance, source_id, device, 'attr', attr_start_ns, ts_ns + wait_ns
    FROM w WHERE attr_start_ns < ts_ns + wait_ns
),
busy AS (  -- the merged compute intervals with the busy time before each on its device
    SELECT source_id, device, ts_ns, end_ns,
           sum(end_ns - ts_ns) OVER (PARTITION BY source_id, device ORDER BY ts_ns ROWS UNBOUNDED PRECEDING)
               - (end_ns - ts_ns) AS before_ns
    FROM ranks_compute_busy
),
covered AS (  -- compute time inside each span: busy time up to its end minus up to its start (the intervals are
              -- disjoint, so each is found by an ASOF join on the last one starting at or before the point)
    SELECT s.channel, s.instance, s.source_id, s.part,
           coalesce(be.before_ns + least(s.e_ns, be.end_ns) - be.ts_ns, 0)
               - coalesce(bs.before_ns + least(s.s_ns, bs.end_ns) - bs.ts_ns, 0) AS covered_ns
    FROM spans s
    ASOF LEFT JOIN busy bs ON bs.source_id = s.source_id AND bs.device = s.device AND s.s_ns >= bs.ts_ns
    ASOF LEFT JOIN busy be ON be.source_id = s.source_id AND be.device = s.device AND s.e_ns >= be.ts_ns
),
exposed AS (
    SELECT s.channel, s.instance, s.source_id, s.part, (s.e_ns - s.s_ns) - coalesce(c.covered_ns, 0) AS exposed_ns
    FROM spans s LEFT JOIN covered c USING (channel, instance, source_id, part)
),
attr AS (  -- what the last rank cost the others: the mean of their exposed attributable waits
    SELECT w.channel, w.instance, sum(coalesce(e.exposed_ns, 0)) / (any_value(w.ranks) - 1) AS cost_ns
    FROM w LEFT JOIN exposed e ON e.channel = w.channel AND e.instance = w.instance
                              AND e.source_id = w.source_id AND e.part = 'attr'
    WHERE NOT w.is_last
    GROUP BY w.channel, w.instance
)
SELECT w.* EXCLUDE (attr_start_ns),
       coalesce(ew.exposed_ns, 0) AS exposed_wait_ns,
       CASE WHEN w.is_last THEN coalesce(t.cost_ns, 0) ELSE 0 END AS blocked_exposed_ns
FROM w
LEFT JOIN exposed ew ON ew.channel = w.channel AND ew.instance = w.instance AND ew.source_id = w.source_id
                    AND ew.part = 'wait'
LEFT JOIN attr t ON t.channel = w.channel AND t.instance = w.instance;

-- Alignment quality per source and channel: ranks_alignment plus offset_ns, end_spread_ns, matched and
-- name_mismatches (see above).
CREATE OR REPLACE TEMP VIEW ranks_alignment_quality AS
SELECT a.*, o.offset_ns, q.end_spread_ns, coalesce(q.matched, 0) AS matched,
       coalesce(q.name_mismatches, 0) AS name_mismatches
FROM ranks_alignment a
LEFT JOIN ranks_clock_offsets o USING (source_id, channel)
LEFT JOIN (
    SELECT c.source_id, c.channel, count(*) AS matched, count(*) FILTER (WHERE NOT c.names_agree) AS name_mismatches,
           median(abs((c.end_ns - c.offset_ns) - r.end_ns)) AS end_spread_ns
    FROM ranks_collectives c JOIN ranks_collectives r
      ON r.channel = c.channel AND r.instance = c.instance AND r.source_id = c.ref_source_id
    GROUP BY c.source_id, c.channel
) q USING (source_id, channel);
