-- PyTorch flight-recorder dumps (tracedoc/ingest/hang/flight_recorder.py): one dump per file, each holding the last
-- collectives one rank recorded. A dump's rank is sources.rank (join on source_id): dumps do not name their rank.
-- Times are integer ns since the Unix epoch on the clock of the rank's host; seq numbers count per process group.

-- One row per dump file.
CREATE TABLE fr_dumps (
    source_id        INTEGER,
    encoding         VARCHAR,   -- pickle (automatic dumps, _dump_nccl_trace) | json (_dump_nccl_trace_json)
    version          VARCHAR,   -- dump schema: '2.1' torch 2.4, '2.4' 2.5–2.7, '2.9' 2.8, '2.10' 2.9–2.11
    comm_lib_version VARCHAR,   -- e.g. '2.28.9' (comm_lib_version, or nccl_version before schema 2.10)
    backend          VARCHAR,   -- nccl | gloo | xccl ...: the most common profiling_name prefix; NULL when empty
    entry_count      INTEGER,   -- records in the ring buffer (0: an empty dump, e.g. the generic recorder's)
    first_record_id  BIGINT,    -- lowest record_id held; above 0 the ring buffer wrapped and older records are lost
    last_event_ns    BIGINT,    -- latest time in any record (created or discovered started/completed), ns
    has_frames       BOOLEAN    -- records carry Python stacks (pickles with stack traces; never JSON)
);

-- Process groups the dump's rank knew (pg_config), one row per group.
CREATE TABLE fr_process_groups (
    source_id  INTEGER,
    pg_name    VARCHAR,         -- the group's name, e.g. '0' (default group); process_group[0] in records
    pg_desc    VARCHAR,         -- e.g. 'default_pg', 'undefined'
    ranks      INTEGER[]        -- global ranks of the members
);

-- Progress counters per process group (pg_status, schema 2.4 and later); NULL where the dump says −1 (none).
-- Keyed by the rank-local pg_id; NCCL also counts point-to-point operations here, so records are preferred.
CREATE TABLE fr_pg_status (
    source_id           INTEGER,
    pg_id               BIGINT,
    last_enqueued_seq   BIGINT,  -- last sequence number the host issued
    last_started_seq    BIGINT,  -- last one seen running on the GPU (needs TORCH_NCCL_ENABLE_TIMING)
    last_completed_seq  BIGINT   -- last one completed
);

-- One row per ring-buffer record: a collective, a point-to-point operation or a coalesced group.
CREATE TABLE fr_entries (
    source_id                     INTEGER,
    record_id                     BIGINT,    -- position in the rank's recorder, over all groups
    pg_id                         BIGINT,    -- rank-local process-group id
    pg_name                       VARCHAR,   -- process-group name (same on every member rank)
    pg_desc                       VARCHAR,
    collective_seq_id             BIGINT,    -- per-group collective count (unchanged by point-to-point records)
    p2p_seq_id                    BIGINT,    -- per-group point-to-point count
    op_id                         BIGINT,    -- operation count, including the members of coalesced groups
    profiling_name                VARCHAR,   -- e.g. 'nccl:all_reduce', 'nccl:send 0->1', 'gloo:broadcast'
    backend                       VARCHAR,   -- the prefix: nccl | gloo | xccl ...
    op                            VARCHAR,   -- the operation: all_reduce, broadcast, send, coalesced ...
    peer                          VARCHAR,   -- point-to-point peers as written, e.g. '0->1' (group ranks)
    is_p2p                        BOOLEAN,
    input_sizes                   BIGINT[][], -- shape of each input tensor
    input_dtypes                  VARCHAR[], -- e.g. ['Float']
    output_sizes                  BIGINT[][],
    output_dtypes                 VARCHAR[],
    input_numel                   BIGINT,    -- elements over all inputs
    output_numel                  BIGINT,
    state                         VARCHAR,   -- scheduled (enqueued) | started | completed, as of the dump
    retired                       BOOLEAN,   -- removed from the watchdog's work list
    time_created_ns               BIGINT,    -- when the host enqueued it, ns
    time_discovered_started_ns    BIGINT,    -- when the watchdog first saw it running, ns (NULL: not seen)
    time_discovered_completed_ns  BIGINT,    -- when the watchdog saw it complete, ns (NULL: not seen)
    duration_ms                   DOUBLE,    -- GPU time, ms (TORCH_NCCL_ENABLE_TIMING only)
    timeout_ms                    BIGINT,    -- the group's timeout, ms (schema 2.4 and later)
    thread_name                   VARCHAR,   -- host thread that enqueued it (schema 2.9 and later)
    frames                        STRUCT(name VARCHAR, filename VARCHAR, line INTEGER)[]
                                             -- Python stack at enqueue, innermost first (at most 64 frames)
);
