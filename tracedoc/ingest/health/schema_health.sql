-- GPU health: NVML snapshots (`tracedoc health`, or an NVML recording beside traces) and NVML telemetry
-- (`tracedoc health --watch`, *.telemetry.parquet beside traces). Written by tracedoc/ingest/health/nvml.py,
-- tracedoc/ingest/health/telemetry.py and tracedoc/health/report.py; read by tracedoc/analyses/health/*.
-- device is NVML's index of the GPU on its host (CUDA's numbering when CUDA_VISIBLE_DEVICES is unset and
-- CUDA_DEVICE_ORDER=PCI_BUS_ID). Units are in the column names; NULL means NVML did not report the value.

-- One row per GPU of a snapshot.
CREATE TABLE gpu_health (
    source_id                  INTEGER,
    device                     INTEGER,   -- NVML device index
    nvml_error                 VARCHAR,   -- NVML's error when the GPU could not be queried (e.g. GpuIsLost), else NULL
    name                       VARCHAR,   -- e.g. 'NVIDIA H100 80GB HBM3'
    uuid                       VARCHAR,   -- 'GPU-…'
    pci_bus_id                 VARCHAR,   -- e.g. '00000000:19:00.0'
    driver_version             VARCHAR,   -- e.g. '580.159.04'
    cuda_driver_version        VARCHAR,   -- the newest CUDA version the driver supports, e.g. '13.0'
    nvml_version               VARCHAR,
    gpu_count                  INTEGER,   -- GPUs NVML saw on the host
    taken_ns                   BIGINT,    -- when the snapshot was read, ns since the Unix epoch
    compute_capability         VARCHAR,   -- e.g. '9.0'
    pstate                     INTEGER,   -- performance state: 0 (P0, fastest) … 15; 32 unknown
    persistence_mode           BOOLEAN,
    sm_clock_mhz               INTEGER,   -- current SM clock, MHz
    sm_clock_max_mhz           INTEGER,   -- maximum SM clock, MHz
    mem_clock_mhz              INTEGER,   -- current memory clock, MHz
    mem_clock_max_mhz          INTEGER,   -- maximum memory clock, MHz
    graphics_clock_mhz         INTEGER,   -- current graphics clock, MHz
    app_sm_clock_mhz           INTEGER,   -- applications (target) SM clock, MHz
    clocks_event_reasons       UBIGINT,   -- active clocks-event (throttle) reasons, NVML bitmask (health.reasons)
    power_violation_ns         UBIGINT,   -- time clocks were held down by the power limit since boot, ns
    thermal_violation_ns       UBIGINT,   -- time clocks were held down by temperature since boot, ns
    gpu_util_pct               INTEGER,   -- share of the last sample period a kernel ran, %
    mem_util_pct               INTEGER,   -- share of the last sample period device memory was read or written, %
    memory_total_bytes         BIGINT,
    memory_used_bytes          BIGINT,
    temperature_c              INTEGER,   -- GPU die temperature, °C
    temperature_slowdown_c     INTEGER,   -- temperature at which the GPU slows its clocks, °C
    temperature_shutdown_c     INTEGER,   -- temperature at which the GPU shuts down, °C
    temperature_max_c          INTEGER,   -- maximum operating temperature, °C
    memory_temperature_c       INTEGER,   -- HBM temperature, °C
    memory_temperature_max_c   INTEGER,   -- maximum HBM operating temperature, °C
    power_w                    DOUBLE,    -- power draw, W
    power_limit_w              DOUBLE,    -- enforced power limit, W
    power_default_limit_w      DOUBLE,    -- the board's default power limit, W
    power_max_limit_w          DOUBLE,    -- the highest power limit that can be set, W
    ecc_enabled                BOOLEAN,   -- ECC mode now
    ecc_pending_enabled        BOOLEAN,   -- ECC mode after the next reset
    ecc_volatile_corrected     BIGINT,    -- corrected ECC errors since the driver loaded
    ecc_volatile_uncorrected   BIGINT,    -- uncorrected ECC errors since the driver loaded
    ecc_aggregate_corrected    BIGINT,    -- corrected ECC errors over the GPU's life
    ecc_aggregate_uncorrected  BIGINT,    -- uncorrected ECC errors over the GPU's life
    retired_pages_sbe          INTEGER,   -- pages retired after repeated single-bit errors (before Ampere)
    retired_pages_dbe          INTEGER,   -- pages retired after a double-bit error (before Ampere)
    retired_pages_pending      BOOLEAN,   -- a page waits for retirement at the next reset
    remapped_rows_corrected    INTEGER,   -- memory rows remapped after correctable errors (Ampere and later)
    remapped_rows_uncorrected  INTEGER,   -- memory rows remapped after uncorrectable errors
    remap_pending              BOOLEAN,   -- a row remap waits for the next GPU reset
    remap_failed               BOOLEAN,   -- a row could not be remapped (no spare rows left)
    pcie_gen                   INTEGER,   -- current PCIe link generation
    pcie_gen_max               INTEGER,   -- highest generation this GPU and its slot support together
    pcie_gen_gpu_max           INTEGER,   -- highest generation the GPU supports
    pcie_width                 INTEGER,   -- current PCIe link width, lanes
    pcie_width_max             INTEGER,   -- maximum link width, lanes
    pcie_replay_count          BIGINT     -- PCIe replays (retransmissions after link errors) since boot
);

-- One row per NVLink of a snapshot's GPU.
CREATE TABLE gpu_health_nvlink (
    source_id          INTEGER,
    device             INTEGER,   -- NVML device index
    link               INTEGER,   -- link index on the device
    active             BOOLEAN,   -- link is up; NULL when NVML could not say
    version            VARCHAR,   -- NVLink version, e.g. '4.0'
    remote_pci_bus_id  VARCHAR,   -- PCI bus id of what the link reaches (GPU or NVSwitch); NULL when hidden
    replay_errors      BIGINT,    -- data-link replays
    recovery_errors    BIGINT,    -- link recoveries
    crc_flit_errors    BIGINT,    -- flow-control digit CRC errors
    crc_data_errors    BIGINT     -- data CRC errors
);

-- One row per GPU and telemetry sample.
CREATE TABLE gpu_telemetry (
    source_id              INTEGER,
    device                 INTEGER,   -- NVML device index
    uuid                   VARCHAR,
    pci_bus_id             VARCHAR,
    ts_ns                  BIGINT,    -- when the sample was read, ns since the Unix epoch (wall clock)
    sm_clock_mhz           INTEGER,   -- SM clock, MHz
    sm_clock_max_mhz       INTEGER,   -- maximum SM clock, MHz
    mem_clock_mhz          INTEGER,   -- memory clock, MHz
    gpu_util_pct           INTEGER,   -- share of the driver's last sample period a kernel ran, %
    mem_util_pct           INTEGER,   -- share of that period device memory was read or written, %
    memory_used_bytes      BIGINT,
    power_w                DOUBLE,    -- power draw, W
    power_limit_w          DOUBLE,    -- enforced power limit, W
    power_default_limit_w  DOUBLE,    -- the board's default power limit, W
    temperature_c          INTEGER,   -- GPU die temperature, °C
    clocks_event_reasons   UBIGINT,   -- active clocks-event (throttle) reasons, NVML bitmask (health.reasons)
    pstate                 INTEGER,   -- performance state
    pcie_gen               INTEGER,   -- current PCIe link generation
    pcie_gen_max           INTEGER,   -- highest generation GPU and slot support
    pcie_width             INTEGER,   -- current link width, lanes
    pcie_width_max         INTEGER    -- maximum link width, lanes
);
