-- Nsight Compute (ncu) reports: one row per profiled kernel launch, every collected metric, and the verdicts of
-- ncu's own guided-analysis rules when the report stores them (.ncu-rep only; CSV exports do not carry them).
-- launch_id is ncu's ID: the 0-based order of the profiled launches in the report.

-- One row per profiled kernel launch.
CREATE TABLE ncu_kernels (
    source_id             INTEGER,
    launch_id             INTEGER,    -- ncu's launch ID within the report, 0-based
    name                  VARCHAR,    -- function name without namespaces, template or parameters, e.g. 'Kernel'
    demangled_name        VARCHAR,    -- full demangled signature as ncu prints it
    device                INTEGER,    -- CUDA device index
    device_name           VARCHAR,    -- e.g. 'NVIDIA H200'
    compute_capability    VARCHAR,    -- e.g. '9.0'
    process_id            BIGINT,     -- profiled process
    context               BIGINT,     -- CUDA context id
    stream                BIGINT,     -- CUDA stream id
    grid                  VARCHAR,    -- launch grid as 'x,y,z' (the same form as gpu_activity.grid)
    block                 VARCHAR,    -- launch block as 'x,y,z'
    registers_per_thread  INTEGER,    -- launch__registers_per_thread
    shared_memory_bytes   BIGINT,     -- static + dynamic shared memory per block, bytes
    duration_ns           DOUBLE      -- gpu__time_duration.sum in ns; NULL when ncu measured nothing for the launch
);

-- Every metric of every launch, in ncu's base units (ns, byte, hz, cycle, ...; % for percentages).
CREATE TABLE ncu_metrics (
    source_id   INTEGER,
    launch_id   INTEGER,
    metric      VARCHAR,              -- ncu metric name, e.g. 'sm__throughput.avg.pct_of_peak_sustained_elapsed'
    value       DOUBLE,               -- numeric value in `unit`; NULL for text metrics and for NaN
    unit        VARCHAR,              -- ncu's base unit ('' when unitless)
    text        VARCHAR               -- value of text metrics (e.g. device__attribute_display_name), else NULL
);

-- ncu's own guided-analysis results as stored in the report, one row per rule message.
CREATE TABLE ncu_rule_results (
    source_id     INTEGER,
    launch_id     INTEGER,
    rule_id       VARCHAR,            -- ncu rule identifier, e.g. 'SOLBottleneck', 'CPIStall', 'TheoreticalOccupancy'
    rule_name     VARCHAR,            -- e.g. 'Bottleneck'
    section       VARCHAR,            -- ncu section identifier, e.g. 'SpeedOfLight'
    type          VARCHAR,            -- ok | optimization | warning | error | none
    title         VARCHAR,            -- message title, e.g. 'Small Grid', 'Long Scoreboard Stalls' (may be empty)
    message       VARCHAR,            -- message text (ncu's @section/@url markup left as stored)
    speedup_pct   DOUBLE,             -- ncu's estimated speedup, % of the launch duration; NULL when none
    speedup_type  VARCHAR             -- local | global | NULL
);
