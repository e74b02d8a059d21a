-- health.nvlink: each GPU's NVLink links in NVML snapshots: how many, how many up, and their error counters.
-- reads: gpu_health, gpu_telemetry
-- scope: job
-- include: health.gpus
--
-- A GPU without NVLink reports no links. Links that are down while others of the same GPU are up mean a link
-- failed to train or was taken down (bandwidth between GPUs drops); all links down on a host with several GPUs
-- means GPU-to-GPU traffic falls back to PCIe.

-- One row per snapshot GPU with at least one NVLink. Columns: source_id, rank, device, name, gpu_count (GPUs on
-- the host), links, links_up, links_down, down_links (indices of the links down, comma separated), version
-- (highest NVLink version), error counters summed over the links: replay_errors, recovery_errors,
-- crc_errors (flit + data CRC errors).
CREATE OR REPLACE TEMP VIEW health_nvlink AS
SELECT g.source_id, g.rank, g.device, g.name, g.gpu_count, count(*) AS links,
       count(*) FILTER (WHERE n.active) AS links_up,
       count(*) FILTER (WHERE NOT coalesce(n.active, false)) AS links_down,
       string_agg(n.link::VARCHAR, ', ' ORDER BY n.link) FILTER (WHERE NOT coalesce(n.active, false)) AS down_links,
       max(n.version) AS version,
       sum(n.replay_errors) AS replay_errors, sum(n.recovery_errors) AS recovery_errors,
       sum(coalesce(n.crc_flit_errors, 0) + coalesce(n.crc_data_errors, 0)) AS crc_errors
FROM health_gpus g JOIN gpu_health_nvlink n USING (source_id, device)
GROUP BY g.source_id, g.rank, g.device, g.name, g.gpu_count;
