-- health.gpus: each GPU of each NVML snapshot, with its readings set against their limits.
-- reads: gpu_health, gpu_telemetry
-- scope: job
-- include: health.reasons
-- include: health.device_ranks

-- Every column of gpu_health (units there), plus: rank (the rank that used this GPU in the traces, else NULL),
-- sm_clock_pct (SM clock / maximum, %), reasons (labels of every active clocks-event reason),
-- slowdown_reasons (labels of those that cost speed, NULL when none), fault (a thermal or hardware slowdown is
-- active), power_capped (the software power cap is active), busy (a kernel ran in the last sample period:
-- gpu_util_pct > 0), thermal_headroom_c (slowdown temperature − temperature, °C), power_pct (power / enforced
-- limit, %), power_limit_lowered (enforced limit more than 1 W under the board's default), nvlink_links /
-- nvlink_up (links NVML reports, and those up).
CREATE OR REPLACE TEMP VIEW health_gpus AS
SELECT h.*, r.rank,
       100.0 * h.sm_clock_mhz / nullif(h.sm_clock_max_mhz, 0) AS sm_clock_pct,
       health_reason_labels(h.clocks_event_reasons) AS reasons,
       health_slowdown_labels(h.clocks_event_reasons) AS slowdown_reasons,
       coalesce(health_is_fault(h.clocks_event_reasons), false) AS fault,
       coalesce(health_is_power_capped(h.clocks_event_reasons), false) AS power_capped,
       coalesce(h.gpu_util_pct > 0, false) AS busy,
       h.temperature_slowdown_c - h.temperature_c AS thermal_headroom_c,
       100.0 * h.power_w / nullif(h.power_limit_w, 0) AS power_pct,
       coalesce(h.power_limit_w < h.power_default_limit_w - 1, false) AS power_limit_lowered,
       (SELECT count(*) FROM gpu_health_nvlink n WHERE n.source_id = h.source_id AND n.device = h.device)
           AS nvlink_links,
       (SELECT count(*) FROM gpu_health_nvlink n
        WHERE n.source_id = h.source_id AND n.device = h.device AND n.active) AS nvlink_up
FROM gpu_health h
LEFT JOIN health_device_ranks r USING (device);

-- The report's GPU health, one row per GPU (health_gpus). Columns: rank, device, name, pci_bus_id, driver_version,
-- cuda_driver_version, nvml_error, pstate, gpu_util_pct, sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz,
-- mem_clock_max_mhz, reasons, temperature_c, temperature_slowdown_c, memory_temperature_c, power_w, power_limit_w,
-- power_default_limit_w, ecc_enabled, ecc_volatile_corrected, ecc_volatile_uncorrected, ecc_aggregate_corrected,
-- ecc_aggregate_uncorrected, remapped_rows_corrected, remapped_rows_uncorrected, remap_pending, remap_failed,
-- retired_pages_sbe, retired_pages_dbe, retired_pages_pending, pcie_gen, pcie_gen_max, pcie_gen_gpu_max,
-- pcie_width, pcie_width_max, pcie_replay_count, nvlink_links, nvlink_up; source_id orders the rows and is left
-- out of the report.
CREATE OR REPLACE TEMP VIEW health_report_gpus AS
SELECT rank, device, name, pci_bus_id, driver_version, cuda_driver_version, nvml_error, pstate, gpu_util_pct,
       sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz, mem_clock_max_mhz, reasons, temperature_c,
       temperature_slowdown_c, memory_temperature_c, power_w, power_limit_w, power_default_limit_w, ecc_enabled,
       ecc_volatile_corrected, ecc_volatile_uncorrected, ecc_aggregate_corrected, ecc_aggregate_uncorrected,
       remapped_rows_corrected, remapped_rows_uncorrected, remap_pending, remap_failed, retired_pages_sbe,
       retired_pages_dbe, retired_pages_pending, pcie_gen, pcie_gen_max, pcie_gen_gpu_max, pcie_width,
       pcie_width_max, pcie_replay_count, nvlink_links, nvlink_up, source_id
FROM health_gpus;
