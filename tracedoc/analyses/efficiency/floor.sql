-- efficiency.floor: the GPU work of each device's window that no fix removes — the floor every saving leaves.
--
-- A fix can remove idle time (launches, host work, syncs, waiting), communication, and GPU work that runs below
-- what the hardware can do; it cannot make the GPU's own work take less than the hardware needs for it. So the
-- compute kernels of each device's window (attribution.time's gpu_compute 'kernels') keep a floor that no finding
-- may claim (judge.savings):
--   modelled   where efficiency.ops models the steps' operators (a PyTorch trace with shapes): each op's GPU time
--              at its roofline, max(FLOPs / peak FLOP/s, bytes / peak bytes/s) (efficiency.operators'
--              roofline_pct), but never under its launches × the shortest kernel the GPU ran in the trace (a
--              kernel has a fixed cost however little it moves: a launch loop's µs kernels sit far above their
--              roofline yet cannot run shorter than that), nor above the time it took; and the measured GPU time
--              of ops without a model; the window's kernel time × that share of the steps' op GPU time
--   peers      without a model: the least kernel time of any device of the run (a rank brought level with its
--              peers by fixing an imbalance does the same work they do, no less); a single device's whole time
-- Copies and memsets keep no floor (a pageable copy becomes a pinned one, a sync copy an async one).
-- One row per device with kernels in its window: source_id, rank, device, kernels_ns, floor_ns, basis
-- ('modelled' or 'peers'), floor_pct (of its kernel time).
-- uses: efficiency.shares
-- include: attribution.time

-- efficiency_floor_shares (efficiency.shares) where the operators are modelled; elsewhere empty, and every
-- device's floor is its peers'.
CREATE TEMP TABLE IF NOT EXISTS efficiency_floor_shares (source_id INTEGER, share DOUBLE);

-- efficiency_floor: per device, its window's compute kernels and the floor they keep (the columns above).
CREATE OR REPLACE TEMP TABLE efficiency_floor AS
WITH kernels AS (
    SELECT source_id, rank, device, sum(ns) AS kernels_ns
    FROM attribution_slices WHERE cause = 'gpu_compute' AND detail = 'kernels'
    GROUP BY ALL
)
SELECT k.source_id, k.rank, k.device, k.kernels_ns,
       CASE WHEN m.share IS NOT NULL THEN k.kernels_ns * least(m.share, 1.0)
            ELSE min(k.kernels_ns) OVER () END AS floor_ns,
       CASE WHEN m.share IS NOT NULL THEN 'modelled' ELSE 'peers' END AS basis,
       100.0 * (CASE WHEN m.share IS NOT NULL THEN k.kernels_ns * least(m.share, 1.0)
                     ELSE min(k.kernels_ns) OVER () END) / nullif(k.kernels_ns, 0) AS floor_pct
FROM kernels k LEFT JOIN efficiency_floor_shares m USING (source_id);
