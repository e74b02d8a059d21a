"""The measured tables a report carries about GPU health (units in the column names), for `tracedoc health` and
`tracedoc analyze` alike: name -> (analysis module, query)."""

HEALTH_METRICS: dict[str, tuple[str, str]] = {
    "gpu_health": ("health.gpus", """
        SELECT rank, device, name, pci_bus_id, driver_version, cuda_driver_version, nvml_error, pstate,
               gpu_util_pct, sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz, mem_clock_max_mhz, reasons,
               temperature_c, temperature_slowdown_c, memory_temperature_c, power_w, power_limit_w,
               power_default_limit_w, ecc_enabled, ecc_volatile_corrected, ecc_volatile_uncorrected,
               ecc_aggregate_corrected, ecc_aggregate_uncorrected, remapped_rows_corrected, remapped_rows_uncorrected,
               remap_pending, remap_failed, retired_pages_sbe, retired_pages_dbe, retired_pages_pending, pcie_gen,
               pcie_gen_max, pcie_gen_gpu_max, pcie_width, pcie_width_max, pcie_replay_count, nvlink_links, nvlink_up
        FROM health_gpus ORDER BY source_id, device"""),
    "gpu_telemetry": ("health.telemetry", """
        SELECT rank, device, samples, duration_ns / 1e6 AS duration_ms, busy_pct, gpu_util_mean_pct,
               sm_clock_mean_mhz, sm_clock_min_mhz, sm_clock_max_mhz, sm_clock_pct, temperature_max_c, power_mean_w,
               power_max_w, power_limit_w, fault_pct, power_cap_busy_pct, slowdown_reasons, pcie_gen_busy_min,
               pcie_gen_max, pcie_width_min, pcie_width_max
        FROM health_telemetry_by_device ORDER BY source_id, device"""),
}
