-- Tables only Nsight Systems exports fill (tracedoc/ingest/nsys/nsys.py). Empty for other formats, so analyses that
-- read them run on every store. Times are integer ns on the export's session clock, like schema.sql.

-- NVTX ranges (push/pop and start/end), one row per range instance. Marks (instants) are not ranges.
CREATE TABLE nvtx_ranges (
    source_id  INTEGER,
    rank       INTEGER,
    pid        BIGINT,               -- process id (globalTid >> 24 & 0xFFFFFF)
    tid        BIGINT,               -- thread that opened the range (globalTid & 0xFFFFFF)
    domain_id  BIGINT,               -- NVTX domain id (0: the default domain)
    domain     VARCHAR,              -- domain name when the export records its creation, else NULL
    name       VARCHAR,              -- the range's text (inline text, or the registered string via StringIds)
    kind       VARCHAR,              -- push_pop | start_end
    ts_ns      BIGINT,               -- start, ns
    dur_ns     BIGINT,               -- duration, ns; a range still open when capture stopped ends at the window end
    open_end   BOOLEAN,              -- true when the export has no end (the range crossed the capture window)
    depth      INTEGER,              -- nesting level among the thread's ranges: 0 for outermost
    is_op      BOOLEAN               -- a framework operator range (PyTorch emit_nvtx: 'aten::mm, seq = 3, ...')
);

-- Processes and threads of the capture, from the globalTid bit fields and the export's name tables.
CREATE TABLE nsys_threads (
    source_id     INTEGER,
    pid           BIGINT,            -- process id
    tid           BIGINT,            -- thread id
    thread_name   VARCHAR,           -- from ThreadNames, NULL when unnamed
    process_name  VARCHAR            -- from PROCESSES (the executable's name)
);

-- Time the profiler itself spent (CUPTI buffer flushes and other overhead), per thread. nsys's gpu_gaps rule
-- does not count a GPU gap that the profiler caused, and neither does gpu.gaps.
CREATE TABLE nsys_overhead (
    source_id  INTEGER,
    pid        BIGINT,               -- process id
    name       VARCHAR,              -- e.g. 'CUPTI Buffer flush'
    ts_ns      BIGINT,               -- start, ns
    dur_ns     BIGINT                -- duration, ns
);
