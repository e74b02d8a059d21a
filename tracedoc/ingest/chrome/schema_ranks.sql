-- Collective calls as the PyTorch profiler records them on the host (its `record_param_comms` operator, one per
-- c10d collective a rank issues): which collective, on which process group, and how many elements each rank
-- sends and receives. Written by tracedoc/ingest/chrome/kineto.py; read by tracedoc/analyses/ranks/*. The GPU kernels a
-- call launched are found through the runtime launches that carry its external_id. NULL: not recorded.

CREATE TABLE collective_calls (
    source_id    INTEGER,
    rank         INTEGER,
    tid          BIGINT,    -- host thread that issued the call
    ts_ns        BIGINT,    -- start of the call on the host, ns
    dur_ns       BIGINT,    -- its duration on the host (the enqueue, not the transfer), ns
    external_id  BIGINT,    -- profiler 'External id': the runtime launches made inside the call carry it
    collective   VARCHAR,   -- c10d's name, e.g. 'allreduce', 'all_to_allv', 'allgather', 'reduce_scatter'
    pg_name      VARCHAR,   -- process group name ('0' is the default group)
    pg_desc      VARCHAR,   -- process group description, e.g. 'default_pg'
    group_size   INTEGER,   -- ranks in the process group
    dtype        VARCHAR,   -- element type, e.g. 'Float', 'BFloat16'
    in_nelems    BIGINT,    -- elements of the input tensor (what this rank sends), count
    out_nelems   BIGINT,    -- elements of the output tensor (what this rank receives), count
    in_splits    VARCHAR,   -- all-to-all input split sizes as recorded (rows sent to each peer), e.g. '[4264, 12120]';
                            -- '[]' for an even split
    out_splits   VARCHAR    -- all-to-all output split sizes (rows received from each peer), same form
);
