-- health.pcie: each GPU's PCIe link against the generation and width it and its slot can do.
-- reads: gpu_health, gpu_telemetry
-- scope: job
-- include: health.gpus
-- include: health.telemetry
--
-- An idle NVIDIA GPU lowers its link generation to save power (e.g. Gen5 → Gen1) and raises it again when work
-- starts: a slow generation counts only while the GPU is busy (gpu_util_pct > 0). A narrower link than the
-- maximum is not power management: it means lanes failed to train (seating, riser, slot). pcie_gen_max is what
-- GPU and slot support together; a GPU that supports more than its slot (pcie_gen_gpu_max) is a platform
-- limit, reported beside, not a degraded link.

-- One row per GPU per snapshot or telemetry source. Columns: source_id, basis ('snapshot' | 'telemetry'), rank,
-- device, samples, busy_samples, pcie_gen (snapshot: now; telemetry: lowest while busy), pcie_gen_max,
-- pcie_gen_gpu_max (snapshots), pcie_width (snapshot: now; telemetry: narrowest), pcie_width_max,
-- gen_degraded_busy_pct (busy samples below the maximum generation / busy samples, %), width_degraded_pct
-- (samples narrower than the maximum width / samples, %), idle_downtrained (below the maximum generation only
-- while idle: power management, fine), pcie_replay_count (snapshots: replays since boot).
CREATE OR REPLACE TEMP VIEW health_pcie AS
SELECT source_id, 'snapshot' AS basis, rank, device, 1 AS samples, CASE WHEN busy THEN 1 ELSE 0 END AS busy_samples,
       pcie_gen, pcie_gen_max, pcie_gen_gpu_max, pcie_width, pcie_width_max,
       CASE WHEN busy AND pcie_gen < pcie_gen_max THEN 100.0 ELSE 0.0 END AS gen_degraded_busy_pct,
       CASE WHEN pcie_width < pcie_width_max THEN 100.0 ELSE 0.0 END AS width_degraded_pct,
       coalesce(NOT busy AND pcie_gen < pcie_gen_max, false) AS idle_downtrained, pcie_replay_count
FROM health_gpus WHERE nvml_error IS NULL AND pcie_gen IS NOT NULL
UNION ALL
SELECT source_id, 'telemetry', rank, device, samples, busy_samples, pcie_gen_busy_min, pcie_gen_max, NULL,
       pcie_width_min, pcie_width_max, pcie_gen_degraded_busy_pct, pcie_width_degraded_pct,
       busy_samples = 0 AND pcie_gen_max IS NOT NULL, NULL
FROM health_telemetry_by_device WHERE pcie_gen_max IS NOT NULL;
