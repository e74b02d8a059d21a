-- The normalized store: one schema shared by every input format.
--
-- Every ingest module (tracedoc/ingest/*) writes these tables and nothing else; every analysis reads them.
-- Times are integer nanoseconds on the trace's own clock (ts_ns); durations are integer nanoseconds (dur_ns).
-- A row belongs to one input file through source_id; rank is copied onto activity rows so analyses can group
-- by rank without a join.

-- One row per ingested input file, or per rank of an input that holds several (a source is one rank's trace).
CREATE TABLE sources (
    source_id   INTEGER PRIMARY KEY,  -- 0-based, in the order the inputs were given
    path        VARCHAR,              -- the path as the user gave it
    format      VARCHAR,              -- torch | nsys | ncu | flight_recorder
    rank        INTEGER,              -- distributed rank (distributedInfo.rank, else from the file name, else 0)
    world_size  INTEGER,              -- number of ranks in the job when the trace says so, else NULL
    content_key VARCHAR,              -- size and hash of the file's bytes (the cache key); NULL when not cached
    size_bytes  BIGINT,               -- file size on disk, in bytes
    event_count BIGINT,               -- number of trace events read from the file
    tool        VARCHAR,              -- what wrote the file and its version, e.g. 'torch.profiler schema 1.1.0'
    reported_rank INTEGER,            -- the rank the input itself names (distributedInfo.rank, in a world of more
                                      -- than one), else NULL: what rank was assigned from, so that ranks read
                                      -- apart are numbered alike
    input_index INTEGER,              -- which input (0-based, in the order given) the source was read from
    pid         BIGINT                -- the process, when the input holds several ranks (one Nsight Systems report
                                      -- of a whole job: a source per process); else NULL
);

-- One row per GPU seen in a source.
CREATE TABLE devices (
    source_id             INTEGER,
    device                INTEGER,    -- device index as the trace numbers it
    name                  VARCHAR,    -- e.g. 'NVIDIA H100 80GB HBM3'
    compute_capability    VARCHAR,    -- e.g. '9.0'
    total_memory_bytes    BIGINT,     -- device memory, in bytes
    sm_count              INTEGER     -- streaming multiprocessors
);

-- GPU activity: one row per kernel, memcpy, memset or GPU-side synchronization.
CREATE TABLE gpu_activity (
    source_id             INTEGER,
    rank                  INTEGER,
    device                INTEGER,    -- device index
    stream                BIGINT,     -- CUDA stream id
    kind                  VARCHAR,    -- kernel | memcpy | memset | sync
    category              VARCHAR,    -- compute | communication | memcpy | memset | sync
    name                  VARCHAR,    -- kernel name, or e.g. 'Memcpy HtoD (Pageable -> Device)'
    ts_ns                 BIGINT,     -- start, ns
    dur_ns                BIGINT,     -- duration, ns
    correlation_id        BIGINT,     -- links to the CUDA runtime/driver call that issued it (cpu_activity)
    bytes                 BIGINT,     -- memcpy/memset size in bytes, else NULL
    copy_kind             VARCHAR,    -- HtoD | DtoH | DtoD | HtoH | PtoP for memcpy, else NULL
    host_memory           VARCHAR,    -- pageable | pinned for host-side copies; pinned | managed for memsets of
                                      -- host-accessible memory (nsys); else NULL
    grid                  VARCHAR,    -- launch grid as 'x,y,z', kernels only
    block                 VARCHAR,    -- launch block as 'x,y,z', kernels only
    registers_per_thread  INTEGER,    -- kernels only
    shared_memory_bytes   BIGINT,     -- static + dynamic shared memory per block, bytes
    collective            VARCHAR     -- collective name recorded by the profiler for communication kernels
);

-- Host activity: operators, CUDA runtime/driver calls, user annotations, profiler steps.
CREATE TABLE cpu_activity (
    source_id       INTEGER,
    rank            INTEGER,
    pid             BIGINT,           -- process id
    tid             BIGINT,           -- thread id
    kind            VARCHAR,          -- op | runtime | driver | annotation | python | os (OS runtime calls, nsys)
                                      -- | other
    name            VARCHAR,          -- e.g. 'aten::mm', 'cudaLaunchKernel', 'forward'
    ts_ns           BIGINT,           -- start, ns
    dur_ns          BIGINT,           -- duration, ns
    correlation_id  BIGINT,           -- runtime/driver calls: links to the GPU activity they issued
    external_id     BIGINT            -- profiler 'External id': links runtime calls to the operator that made them
);

-- The profiler's steps (ProfilerStep#N; a Proton trace's step scopes), one row per rank and step.
CREATE TABLE steps (
    source_id  INTEGER,
    rank       INTEGER,
    step       INTEGER,               -- the N of ProfilerStep#N (of the scope step_N)
    ts_ns      BIGINT,                -- start, ns
    dur_ns     BIGINT,                -- duration, ns
    name       VARCHAR                -- what marked it, as recorded: 'ProfilerStep#3', 'step_3'
);

-- Facts about the store itself: schema version, tracedoc version, whether ingestion completed.
CREATE TABLE store_meta (
    key    VARCHAR PRIMARY KEY,
    value  VARCHAR
);
