-- health.reasons: NVML's clocks-event ("throttle") reason bits, named, and which of them slow a GPU down.
--
-- NVML says why the clocks are below their maximum with a bitmask (nvmlClocksEventReason*, shown by
-- `nvidia-smi -q -d PERFORMANCE`). Not every bit is a problem: an idle GPU lowers its clocks, and sync boost,
-- display and application-clock settings are configuration. The bits that cost speed, by kind:
--   power     sw_power_cap: clocks lowered to keep power under the enforced limit. Normal for power-bound
--             kernels at the board's default limit; a problem when the limit was set lower;
--   thermal   sw_thermal (the driver slows the GPU above its slowdown temperature) and hw_thermal (the
--             hardware slows it hard): cooling problems;
--   hardware  hw_slowdown (a hardware slowdown: temperature, power brake or a power-supply event) and
--             hw_power_brake (an external power-brake signal, e.g. from the power supply): faults.
-- reads: gpu_health, gpu_telemetry
-- scope: job

-- One row per reason bit. bit: its value in the mask; reason: snake_case id; label: nvidia-smi's words;
-- kind: idle | config | power | thermal | hardware.
CREATE OR REPLACE TEMP TABLE health_reason_bits AS
SELECT bit::UBIGINT AS bit, reason, label, kind FROM (VALUES
    (1, 'gpu_idle', 'GPU idle', 'idle'),
    (2, 'applications_clocks', 'applications clocks setting', 'config'),
    (4, 'sw_power_cap', 'SW power cap', 'power'),
    (8, 'hw_slowdown', 'HW slowdown', 'hardware'),
    (16, 'sync_boost', 'sync boost', 'config'),
    (32, 'sw_thermal', 'SW thermal slowdown', 'thermal'),
    (64, 'hw_thermal', 'HW thermal slowdown', 'thermal'),
    (128, 'hw_power_brake', 'HW power brake slowdown', 'hardware'),
    (256, 'display_clocks', 'display clock setting', 'config')
) t(bit, reason, label, kind);

-- The labels of a mask's active reasons, comma separated ('none' for an empty mask, NULL for a NULL one).
CREATE OR REPLACE TEMP MACRO health_reason_labels(mask) AS (
    CASE WHEN mask IS NULL THEN NULL
         ELSE coalesce((SELECT string_agg(label, ', ' ORDER BY bit) FROM health_reason_bits
                        WHERE (mask::UBIGINT & bit) <> 0), 'none') END);

-- The labels of the reasons that cost speed (power, thermal, hardware) in a mask, or NULL when none is set.
CREATE OR REPLACE TEMP MACRO health_slowdown_labels(mask) AS (
    SELECT string_agg(label, ', ' ORDER BY bit) FROM health_reason_bits
    WHERE (mask::UBIGINT & bit) <> 0 AND kind IN ('power', 'thermal', 'hardware'));

-- True when a mask holds a thermal or hardware slowdown (the faults: 0x08 | 0x20 | 0x40 | 0x80).
CREATE OR REPLACE TEMP MACRO health_is_fault(mask) AS (mask::UBIGINT & 232::UBIGINT) <> 0;

-- True when a mask holds the software power cap (0x04).
CREATE OR REPLACE TEMP MACRO health_is_power_capped(mask) AS (mask::UBIGINT & 4::UBIGINT) <> 0;
