-- health.device_ranks: which rank used which GPU, so that a GPU's health can be told about its rank.
--
-- NVML numbers the GPUs of a host; traces number the devices their rank used. A device index that exactly one
-- rank used maps to that rank. This is a first approximation: it assumes one host and that CUDA numbers the
-- devices as NVML does (CUDA_VISIBLE_DEVICES unset); matching by PCI bus id is a later step.
-- reads: gpu_health, gpu_telemetry
-- scope: job

-- One row per device index seen in traces: device, rank (NULL when several ranks used that index).
CREATE OR REPLACE TEMP VIEW health_device_ranks AS
SELECT device, CASE WHEN count(DISTINCT rank) = 1 THEN min(rank) END AS rank
FROM (SELECT DISTINCT rank, device FROM gpu_activity WHERE device IS NOT NULL)
GROUP BY device;
