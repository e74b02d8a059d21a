-- comm.overlap: how much communication is hidden behind computation.
--
-- overlap % = |comm ∩ compute| / |comm| × 100, where comm is the union of communication kernels (NCCL) and
-- compute the union of compute kernels on the same device, over all streams. Exposed communication is
-- |comm| − |comm ∩ compute|: time the device spends communicating with nothing else to do. Part of that may be
-- waiting inside a collective for a later rank (ranks.collectives): overlap cannot hide that, a faster peer can.
-- Times in ns.
-- The share of the window that is exposed, the waits for peers and the advice are comm.exposed's.
-- include: gpu.busy
-- include: intervals.merge
-- include: intervals.intersect

-- The kernels of each device as an interval set (intervals.merge), with their category.
CREATE OR REPLACE TEMP VIEW comm_overlap_kernels AS
SELECT {'source_id': source_id, 'device': device} AS k, ts_ns AS s, end_ns AS e, category
FROM gpu_work WHERE kind = 'kernel';
-- The communication kernels.
CREATE OR REPLACE TEMP VIEW comm_overlap_comm_kernels AS
SELECT k, s, e FROM comm_overlap_kernels WHERE category = 'communication';
-- comm: the union of the communication kernels.
CREATE OR REPLACE TEMP TABLE comm_overlap_comm AS SELECT * FROM intervals_merge('comm_overlap_comm_kernels');
-- The compute kernels of the devices with communication: the intersection below reads their union there alone
-- (elsewhere only the union's length is read, summed without merging it: comm_overlap_by_device).
CREATE OR REPLACE TEMP VIEW comm_overlap_compute_kernels AS
SELECT k, s, e FROM comm_overlap_kernels WHERE category = 'compute' AND k IN (SELECT k FROM comm_overlap_comm);
-- compute: the union of those compute kernels.
CREATE OR REPLACE TEMP TABLE comm_overlap_compute AS SELECT * FROM intervals_merge('comm_overlap_compute_kernels');

-- Per device with kernels: communication time |comm|, compute time |compute|, their intersection
-- |comm ∩ compute| (intervals.intersect) and the exposed part |comm| − |comm ∩ compute| (ns); overlap %.
CREATE OR REPLACE TEMP TABLE comm_overlap_by_device AS
WITH lanes AS (
    SELECT source_id, any_value(rank) AS rank, device, {'source_id': source_id, 'device': device} AS k
    FROM gpu_work WHERE kind = 'kernel' GROUP BY source_id, device
),
comm AS (SELECT k, sum(e - s) AS ns FROM comm_overlap_comm GROUP BY k),
compute AS (  -- |compute| of every device: each compute kernel adds what it runs past the latest end of those
              -- started before it
    SELECT k, sum(greatest(e - greatest(s, coalesce(prev_e, s)), 0)) AS ns
    FROM (SELECT k, s, e,
                 max(e) OVER (PARTITION BY k ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
          FROM comm_overlap_kernels WHERE category = 'compute' AND e > s)
    GROUP BY k
),
overlap AS (SELECT k, sum(e - s) AS ns FROM intervals_intersect('comm_overlap_comm', 'comm_overlap_compute') GROUP BY k)
SELECT l.source_id, l.rank, l.device, coalesce(c.ns, 0) AS comm_ns, coalesce(p.ns, 0) AS compute_ns,
       coalesce(o.ns, 0) AS overlap_ns, coalesce(c.ns, 0) - coalesce(o.ns, 0) AS exposed_comm_ns,
       100.0 * coalesce(o.ns, 0) / nullif(c.ns, 0) AS overlap_pct
FROM lanes l LEFT JOIN comm c USING (k) LEFT JOIN compute p USING (k) LEFT JOIN overlap o USING (k);

-- The report's communication overlap per device (comm_overlap_by_device; ms). Columns: rank, device, comm_ms,
-- compute_ms, overlap_ms (comm ∩ compute), exposed_comm_ms, overlap_pct.
CREATE OR REPLACE TEMP VIEW comm_report_overlap AS
SELECT rank, device, comm_ns / 1e6 AS comm_ms, compute_ns / 1e6 AS compute_ms, overlap_ns / 1e6 AS overlap_ms,
       exposed_comm_ns / 1e6 AS exposed_comm_ms, overlap_pct
FROM comm_overlap_by_device;
