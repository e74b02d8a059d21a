-- health.throttle: whether each GPU's clocks were held down, and why, from NVML snapshots and telemetry alike.
-- include: health.gpus
-- include: health.telemetry
-- include: trace.window
--
-- A snapshot is one sample (the state when it was taken); telemetry gives shares of its samples. A thermal or
-- hardware slowdown is a fault wherever it shows; the software power cap is the GPU keeping to its power limit,
-- judged apart (it is normal at the board's default limit). Estimated losses assume the work scales with the
-- SM clock and are capped at the longest trace window when traces were analysed with the telemetry.

-- One row per GPU per snapshot or telemetry source. Columns: source_id, basis ('snapshot' | 'telemetry'), rank
-- (NULL unless traces show which rank used the GPU), device, name (snapshots), samples, busy_samples,
-- fault_pct (samples with a thermal or hardware slowdown / samples, %), power_cap_busy_pct (busy samples under
-- the software power cap alone, without a fault / busy samples, %), hw_slowdown_pct / sw_thermal_pct / hw_thermal_pct /
-- hw_power_brake_pct / sw_power_cap_pct (samples with that reason / samples, %), slowdown_reasons (labels),
-- sm_clock_mhz (snapshot: now; telemetry: mean while busy), sm_clock_min_mhz, sm_clock_max_mhz, sm_clock_pct
-- (sm_clock_mhz / maximum, %), temperature_c (snapshot: now; telemetry: highest), temperature_slowdown_c,
-- power_w (snapshot: now; telemetry: mean while busy), power_limit_w, power_default_limit_w,
-- power_limit_lowered, fault_lost_ms / power_cap_lost_ms (time lost to the lowered clock, ms; 0 for a snapshot),
-- telemetry_covered (a snapshot of a GPU that telemetry sampled as well: the telemetry's shares say more).
CREATE OR REPLACE TEMP VIEW health_throttle AS
WITH wall AS (SELECT max(wall_ns) / 1e6 AS wall_ms FROM trace_wall)
SELECT source_id, 'snapshot' AS basis, rank, device, name, 1 AS samples, CASE WHEN busy THEN 1 ELSE 0 END
           AS busy_samples,
       CASE WHEN fault THEN 100.0 ELSE 0.0 END AS fault_pct,
       CASE WHEN busy AND power_capped AND NOT fault THEN 100.0 ELSE 0.0 END AS power_cap_busy_pct,
       CASE WHEN clocks_event_reasons & 8 <> 0 THEN 100.0 ELSE 0.0 END AS hw_slowdown_pct,
       CASE WHEN clocks_event_reasons & 32 <> 0 THEN 100.0 ELSE 0.0 END AS sw_thermal_pct,
       CASE WHEN clocks_event_reasons & 64 <> 0 THEN 100.0 ELSE 0.0 END AS hw_thermal_pct,
       CASE WHEN clocks_event_reasons & 128 <> 0 THEN 100.0 ELSE 0.0 END AS hw_power_brake_pct,
       CASE WHEN clocks_event_reasons & 4 <> 0 THEN 100.0 ELSE 0.0 END AS sw_power_cap_pct,
       slowdown_reasons, sm_clock_mhz::DOUBLE AS sm_clock_mhz, sm_clock_mhz AS sm_clock_min_mhz, sm_clock_max_mhz,
       sm_clock_pct, temperature_c, temperature_slowdown_c, power_w, power_limit_w, power_default_limit_w,
       power_limit_lowered, 0.0 AS fault_lost_ms, 0.0 AS power_cap_lost_ms,
       EXISTS (SELECT 1 FROM health_telemetry_by_device t
               WHERE t.device = g.device AND t.rank IS NOT DISTINCT FROM g.rank) AS telemetry_covered
FROM health_gpus g WHERE nvml_error IS NULL
UNION ALL
SELECT t.source_id, 'telemetry', t.rank, t.device, NULL, t.samples, t.busy_samples, t.fault_pct,
       t.power_cap_busy_pct, t.hw_slowdown_pct, t.sw_thermal_pct, t.hw_thermal_pct, t.hw_power_brake_pct,
       t.sw_power_cap_pct, t.slowdown_reasons, t.sm_clock_mean_mhz, t.sm_clock_min_mhz, t.sm_clock_max_mhz,
       t.sm_clock_pct, t.temperature_max_c, NULL, t.power_mean_w, t.power_limit_w, t.power_default_limit_w,
       t.power_limit_lowered, least(t.fault_lost_ns / 1e6, w.wall_ms), least(t.power_cap_lost_ns / 1e6, w.wall_ms),
       false
FROM health_telemetry_by_device t, wall w;
