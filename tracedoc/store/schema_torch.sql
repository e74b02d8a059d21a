-- Tables only PyTorch profiler traces fill (tracedoc/ingest/kineto.py): what a trace recorded besides the activity
-- tracedoc analyses, and what its header says about the job's devices. Read by tracedoc/analyses/device/*.

-- Timed events in categories tracedoc does not analyse (neither host activity it knows nor CUDA/HIP kernels,
-- copies and memsets, nor the profiler's own records), counted per category and process: MTIA's 'mtia_ccp_events'
-- and 'mtia_runtime', the CUPTI range profiler's 'cuda_profiler_range', ... The events stay in cpu_activity too,
-- as kind 'other'. Rows are partial counts, one per part of the trace read: sum them.
CREATE TABLE torch_other_events (
    source_id  INTEGER,
    category   VARCHAR,  -- the events' "cat", as written
    pid        VARCHAR,  -- their "pid" as written (Kineto writes device activity under the device's index)
    events     BIGINT,   -- count
    dur_ns     BIGINT    -- summed duration, ns
);

-- One row per trace: its header's facts about devices and the job.
CREATE TABLE torch_headers (
    source_id          INTEGER,
    device_properties  INTEGER,  -- entries in deviceProperties (0: the profiler saw no GPU); NULL when absent
    backend            VARCHAR   -- distributedInfo.backend, e.g. 'nccl', 'gloo'; NULL when absent
);
