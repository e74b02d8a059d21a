-- gpu.busy_time: each GPU's busy time over the window, for the summary: gpu.busy's where the store holds a
-- timeline, else none.
-- uses: gpu.busy

-- gpu_busy_by_device (gpu.busy, see its columns there) where the store holds a timeline; elsewhere (an Nsight
-- Compute report, a flight-recorder dump) empty, so that the busy time's planning is not paid where it could find
-- nothing.
CREATE TEMP TABLE IF NOT EXISTS gpu_busy_by_device (
    source_id INTEGER, rank INTEGER, device INTEGER, busy_ns HUGEINT, wall_ns BIGINT, busy_pct DOUBLE);
