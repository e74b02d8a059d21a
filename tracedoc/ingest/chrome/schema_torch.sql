-- Tables only PyTorch profiler traces fill (tracedoc/ingest/chrome/kineto.py): what a trace recorded besides the activity
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

-- Operators recorded with their inputs' shapes (torch.profiler's record_shapes=True): one row per operator event
-- that carries "Input Dims". The runtime calls an operator made carry its External id (cpu_activity.external_id).
CREATE TABLE op_shapes (
    source_id    INTEGER,
    rank         INTEGER,
    external_id  BIGINT,   -- the operator's External id
    name         VARCHAR,  -- e.g. 'aten::addmm'
    ts_ns        BIGINT,   -- start, ns
    input_dims   VARCHAR,  -- "Input Dims" as JSON text, e.g. '[[8192,4096],[4096,4096]]' ([] for a scalar)
    input_types  VARCHAR,  -- "Input type" as JSON text, e.g. '["c10::BFloat16","c10::BFloat16"]'
    concrete_inputs VARCHAR  -- "Concrete Inputs" as JSON text: the scalar arguments as written, e.g.
                             -- '["","","","[16, 16]","[0, 0]","[1, 1]","1"]' (a convolution's stride, padding,
                             -- dilation, groups); NULL when the trace has none
);

-- One row per trace: its header's facts about devices and the job.
CREATE TABLE torch_headers (
    source_id          INTEGER,
    device_properties  INTEGER,  -- entries in deviceProperties (0: the profiler saw no GPU); NULL when absent
    backend            VARCHAR   -- distributedInfo.backend, e.g. 'nccl', 'gloo'; NULL when absent
);
