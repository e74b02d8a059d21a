-- nvtx.idle: per device, the user NVTX range with the most idle GPU time (nvtx.projection's nvtx_idle_by_device),
-- for the findings on idle GPU time (gpu.utilization, attribution.host). nvtx.projection runs only where the inputs
-- have NVTX ranges; elsewhere (every PyTorch profiler trace) its table is made here, empty, with its columns, so
-- that the readers name no range without the projection's statements being planned. One module makes it, so that
-- readers run at once on cursors (store.pool) never make it twice.
-- uses: nvtx.projection
-- include: gpu.idle

-- nvtx_idle_by_device (nvtx.projection, see its columns there) where the inputs have NVTX ranges; elsewhere empty.
CREATE TEMP TABLE IF NOT EXISTS nvtx_idle_by_device (
    source_id INTEGER, device INTEGER, nvtx_range VARCHAR, nvtx_range_idle_ns HUGEINT, nvtx_range_idle_pct DOUBLE,
    nvtx_note VARCHAR);

-- gpu_idle_by_device (gpu.idle) with the NVTX columns of nvtx_idle_by_device (NULL, and nvtx_note '', without).
CREATE OR REPLACE TEMP VIEW nvtx_gpu_idle_host_bound AS
SELECT h.*, n.nvtx_range, n.nvtx_range_idle_ns, n.nvtx_range_idle_pct, coalesce(n.nvtx_note, '') AS nvtx_note
FROM gpu_idle_by_device h LEFT JOIN nvtx_idle_by_device n USING (source_id, device);
