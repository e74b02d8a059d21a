-- GPU memory: the PyTorch profiler's allocator events (tracedoc/ingest/chrome/kineto_memory.py, from a trace recorded with
-- profile_memory=True) and the caching allocator's snapshots (tracedoc/ingest/memory/memory_snapshot.py, pickles written
-- by torch.cuda.memory._dump_snapshot). Read by tracedoc/analyses/memory/*. Bytes are bytes, times ns.

-- One row per '[memory]' or '[OutOfMemory]' instant event of a trace.
CREATE TABLE memory_events (
    source_id        INTEGER,
    rank             INTEGER,
    tid              BIGINT,    -- the thread that asked the allocator
    ts_ns            BIGINT,    -- when, on the trace's clock (as cpu_activity.ts_ns)
    kind             VARCHAR,   -- 'alloc' | 'free' | 'oom'
    device_type      INTEGER,   -- 0 CPU, 1 CUDA, ... ("Device Type")
    device           INTEGER,   -- "Device Id"
    addr             BIGINT,    -- the block's address (NULL for an OOM)
    bytes            BIGINT,    -- > 0 allocated, < 0 freed; an OOM: the request that failed
    total_allocated  BIGINT,    -- the allocator's allocated bytes on the device just after the event
    total_reserved   BIGINT     -- its reserved (cached) bytes on the device just after the event
);

-- The trace's clock: its times plus base_ns are nanoseconds since the Unix epoch (Kineto's baseTimeNanoseconds).
CREATE TABLE memory_trace_clock (
    source_id  INTEGER,
    base_ns    BIGINT
);

-- A snapshot's segments (cudaMalloc'd ranges the allocator holds), one row each.
CREATE TABLE memory_segments (
    source_id       INTEGER,
    device          INTEGER,
    address         BIGINT,
    total_size      BIGINT,    -- reserved
    allocated_size  BIGINT,    -- in live blocks
    active_size     BIGINT,    -- live or waiting to be freed
    stream          BIGINT,
    segment_type    VARCHAR,   -- 'large' | 'small'
    is_expandable   BOOLEAN,
    blocks          INTEGER
);

-- A snapshot's blocks (each segment is cut into blocks), with where a live block was allocated.
CREATE TABLE memory_blocks (
    source_id        INTEGER,
    device           INTEGER,
    segment_address  BIGINT,
    address          BIGINT,
    size             BIGINT,
    requested_size   BIGINT,
    state            VARCHAR,   -- 'active_allocated' | 'active_pending_free' | 'inactive' (free)
    site             VARCHAR,   -- the innermost frame outside torch and the standard library: 'file.py:12 (fn)'
    stack            VARCHAR    -- up to 8 frames, innermost first, ' ← '-separated
);

-- A snapshot's allocator history (device_traces), one row per action, in order per device.
CREATE TABLE memory_actions (
    source_id    INTEGER,
    device       INTEGER,
    seq          INTEGER,   -- position in the device's history
    action       VARCHAR,   -- alloc | free_requested | free_completed | segment_alloc | segment_free | oom | ...
    addr         BIGINT,
    size         BIGINT,    -- an OOM: the request that failed
    device_free  BIGINT,    -- an OOM: what the device said was free (cudaMemGetInfo)
    stream       BIGINT,
    time_ns      BIGINT,    -- ns since the Unix epoch (the snapshot's time_us)
    site         VARCHAR,
    stack        VARCHAR
);

-- A snapshot's annotations (external_annotations: record_function ranges, ProfilerStep#N among them, opened and
-- closed while the history was recorded), one row per start or end.
CREATE TABLE memory_annotations (
    source_id  INTEGER,
    device     INTEGER,
    stage      VARCHAR,   -- 'START' | 'END'
    name       VARCHAR,
    time_ns    BIGINT     -- ns since the Unix epoch (the snapshot's time_us)
);
