-- health.telemetry: GPU telemetry (tracedoc health --watch) summarised per GPU: clocks against their maximum,
-- how often and why the clocks were held down, temperature, power and PCIe link.
-- reads: gpu_health, gpu_telemetry
-- scope: job
-- include: health.reasons
-- include: health.device_ranks
--
-- Each sample stands for the time until the device's next one (dt_ns; the last sample and gaps longer than
-- twice the median interval count as one median interval, so a paused recording adds no time). A sample is
-- busy when a kernel ran during the driver's last utilization period (gpu_util_pct > 0). Telemetry is on the
-- wall clock; its samples are not yet placed inside a trace's window (a later step), so what it measures covers
-- the whole recording.

-- One row per telemetry sample: every column of gpu_telemetry plus dt_ns (the time the sample stands for, ns),
-- busy, fault (thermal or hardware slowdown active), power_capped (software power cap active),
-- sm_clock_deficit (1 − SM clock / maximum, 0…1; 0 when the clock is at its maximum).
CREATE OR REPLACE TEMP TABLE health_telemetry_samples AS
WITH t AS (
    SELECT *, lead(ts_ns) OVER (PARTITION BY source_id, device ORDER BY ts_ns) - ts_ns AS next_ns
    FROM gpu_telemetry
),
m AS (
    SELECT source_id, device, coalesce(median(next_ns), 0) AS median_ns FROM t GROUP BY source_id, device
)
SELECT t.* EXCLUDE (next_ns),
       CASE WHEN t.next_ns IS NULL OR t.next_ns > 2 * m.median_ns THEN m.median_ns ELSE t.next_ns END AS dt_ns,
       coalesce(t.gpu_util_pct > 0, false) AS busy,
       coalesce(health_is_fault(t.clocks_event_reasons), false) AS fault,
       coalesce(health_is_power_capped(t.clocks_event_reasons), false) AS power_capped,
       greatest(0.0, 1.0 - t.sm_clock_mhz / nullif(t.sm_clock_max_mhz, 0)) AS sm_clock_deficit
FROM t JOIN m USING (source_id, device);

-- One row per telemetry source and device. Columns: source_id, device, rank (the rank that used this GPU in the
-- traces, else NULL), uuid, samples, busy_samples, duration_ns (time the samples stand for), busy_pct
-- (busy samples / samples, %), gpu_util_mean_pct, sm_clock_max_mhz, sm_clock_mean_mhz / sm_clock_min_mhz
-- (over busy samples), sm_clock_pct (busy mean / maximum, %), temperature_max_c, power_mean_w / power_max_w
-- (busy samples), power_limit_w (lowest enforced limit seen), power_default_limit_w,
-- power_limit_lowered (enforced limit more than 1 W under the default), fault_pct (samples with a thermal or
-- hardware slowdown / samples, %), power_cap_busy_pct (busy samples under the software power cap and no fault /
-- busy samples, %), sw_power_cap_pct / hw_slowdown_pct / sw_thermal_pct / hw_thermal_pct / hw_power_brake_pct
-- (samples with that reason / samples, %), slowdown_reasons (labels of the speed-costing reasons seen),
-- fault_lost_ns / power_cap_lost_ns (Σ dt_ns × SM clock deficit over fault / power-capped busy samples: the
-- time the GPU would have saved at its maximum clock, if its work scaled with the clock, ns),
-- pcie_gen_max / pcie_width_max, pcie_gen_busy_min (lowest link generation while busy), pcie_width_min,
-- pcie_gen_degraded_busy_pct (busy samples with the link below its maximum generation / busy samples, %),
-- pcie_width_degraded_pct (samples with the link narrower than its maximum / samples, %).
CREATE OR REPLACE TEMP VIEW health_telemetry_by_device AS
SELECT s.source_id, s.device, any_value(r.rank) AS rank, any_value(s.uuid) AS uuid,
       count(*) AS samples, count(*) FILTER (WHERE s.busy) AS busy_samples, sum(s.dt_ns) AS duration_ns,
       100.0 * count(*) FILTER (WHERE s.busy) / count(*) AS busy_pct,
       avg(s.gpu_util_pct) AS gpu_util_mean_pct,
       max(s.sm_clock_max_mhz) AS sm_clock_max_mhz,
       avg(s.sm_clock_mhz) FILTER (WHERE s.busy) AS sm_clock_mean_mhz,
       min(s.sm_clock_mhz) FILTER (WHERE s.busy) AS sm_clock_min_mhz,
       100.0 * avg(s.sm_clock_mhz) FILTER (WHERE s.busy) / nullif(max(s.sm_clock_max_mhz), 0) AS sm_clock_pct,
       max(s.temperature_c) AS temperature_max_c,
       avg(s.power_w) FILTER (WHERE s.busy) AS power_mean_w, max(s.power_w) AS power_max_w,
       min(s.power_limit_w) AS power_limit_w, max(s.power_default_limit_w) AS power_default_limit_w,
       coalesce(min(s.power_limit_w) < max(s.power_default_limit_w) - 1, false) AS power_limit_lowered,
       100.0 * count(*) FILTER (WHERE s.fault) / count(*) AS fault_pct,
       coalesce(100.0 * count(*) FILTER (WHERE s.busy AND s.power_capped AND NOT s.fault)
                / nullif(count(*) FILTER (WHERE s.busy), 0), 0) AS power_cap_busy_pct,
       100.0 * count(*) FILTER (WHERE s.clocks_event_reasons & 4 <> 0) / count(*) AS sw_power_cap_pct,
       100.0 * count(*) FILTER (WHERE s.clocks_event_reasons & 8 <> 0) / count(*) AS hw_slowdown_pct,
       100.0 * count(*) FILTER (WHERE s.clocks_event_reasons & 32 <> 0) / count(*) AS sw_thermal_pct,
       100.0 * count(*) FILTER (WHERE s.clocks_event_reasons & 64 <> 0) / count(*) AS hw_thermal_pct,
       100.0 * count(*) FILTER (WHERE s.clocks_event_reasons & 128 <> 0) / count(*) AS hw_power_brake_pct,
       health_slowdown_labels(bit_or(s.clocks_event_reasons)) AS slowdown_reasons,
       coalesce(sum(s.dt_ns * s.sm_clock_deficit) FILTER (WHERE s.fault), 0) AS fault_lost_ns,
       coalesce(sum(s.dt_ns * s.sm_clock_deficit) FILTER (WHERE s.busy AND s.power_capped AND NOT s.fault), 0)
           AS power_cap_lost_ns,
       max(s.pcie_gen_max) AS pcie_gen_max, max(s.pcie_width_max) AS pcie_width_max,
       min(s.pcie_gen) FILTER (WHERE s.busy) AS pcie_gen_busy_min, min(s.pcie_width) AS pcie_width_min,
       coalesce(100.0 * count(*) FILTER (WHERE s.busy AND s.pcie_gen < s.pcie_gen_max)
                / nullif(count(*) FILTER (WHERE s.busy), 0), 0) AS pcie_gen_degraded_busy_pct,
       100.0 * count(*) FILTER (WHERE s.pcie_width < s.pcie_width_max) / count(*) AS pcie_width_degraded_pct
FROM health_telemetry_samples s
LEFT JOIN health_device_ranks r USING (device)
GROUP BY s.source_id, s.device;

-- The report's telemetry per GPU (health_telemetry_by_device; ms). Columns: rank, device, samples, duration_ms,
-- busy_pct, gpu_util_mean_pct, sm_clock_mean_mhz, sm_clock_min_mhz, sm_clock_max_mhz, sm_clock_pct,
-- temperature_max_c, power_mean_w, power_max_w, power_limit_w, fault_pct, power_cap_busy_pct, slowdown_reasons,
-- pcie_gen_busy_min, pcie_gen_max, pcie_width_min, pcie_width_max; source_id orders the rows and is left out of
-- the report.
CREATE OR REPLACE TEMP VIEW health_report_telemetry AS
SELECT rank, device, samples, duration_ns / 1e6 AS duration_ms, busy_pct, gpu_util_mean_pct, sm_clock_mean_mhz,
       sm_clock_min_mhz, sm_clock_max_mhz, sm_clock_pct, temperature_max_c, power_mean_w, power_max_w,
       power_limit_w, fault_pct, power_cap_busy_pct, slowdown_reasons, pcie_gen_busy_min, pcie_gen_max,
       pcie_width_min, pcie_width_max, source_id
FROM health_telemetry_by_device;
