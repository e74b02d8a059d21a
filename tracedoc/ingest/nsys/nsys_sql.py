"""What tracedoc reads from an Nsight Systems SQLite export, and the SQL that maps it into the store.

Each TableSpec names an export table (the first of its candidate names that exists), the columns read from it
(each with candidate names across export versions) and the DuckDB temp table it lands in. NORMALIZE_GPU_SQL then
NORMALIZE_HOST_SQL map those temp tables into the shared tables of schema.sql and nvtx_ranges/nsys_threads/
nsys_overhead of schema_nsys.sql. Enumeration values (copyKind, srcKind/dstKind/memKind, syncType, NVTX eventType)
are stable across export versions and older exports lack the ENUM_* tables, so they are spelled out here.

A rank is a process: when two or more processes of one export ran GPU work (one report of a whole job, ``nsys
profile torchrun ...``), each becomes a source of its own, numbered from the first source id in rank order (MPI
rank when the capture traced MPI, else the GPU it used, then its pid); processes without GPU work (the launcher)
are left out. Otherwise the export is one source. ``_ns_pid_source`` maps every process to its source.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracedoc.ingest.nccl import nccl_kernel


@dataclass(frozen=True)
class TableSpec:
    """One export table to read: ``columns`` are (name in tracedoc, 'int' | 'text', export names to try...)."""

    tables: tuple[str, ...]
    temp: str
    columns: tuple[tuple[str, ...], ...]
    counts: bool = True  # its rows are trace events (counted in sources.event_count)
    where: str = ""  # a filter on export columns, applied when all of where_columns exist
    where_columns: tuple[str, ...] = ()


_SPAN = (("ts", "int", "start"), ("te", "int", "end"))
_GPU = (*_SPAN, ("device", "int", "deviceId"), ("stream", "int", "streamId"),
        ("correlation", "int", "correlationId"), ("gpid", "int", "globalPid"))

TABLES: tuple[TableSpec, ...] = (
    TableSpec(("StringIds",), "_ns_str", (("id", "int", "id"), ("value", "text", "value")), counts=False),
    TableSpec(("CUPTI_ACTIVITY_KIND_KERNEL",), "_ns_kernel", (
        *_GPU, ("demangled", "int", "demangledName"), ("short", "int", "shortName"),
        ("grid_x", "int", "gridX"), ("grid_y", "int", "gridY"), ("grid_z", "int", "gridZ"),
        ("block_x", "int", "blockX"), ("block_y", "int", "blockY"), ("block_z", "int", "blockZ"),
        ("registers", "int", "registersPerThread"), ("static_smem", "int", "staticSharedMemory"),
        ("dynamic_smem", "int", "dynamicSharedMemory"))),
    TableSpec(("CUPTI_ACTIVITY_KIND_MEMCPY",), "_ns_memcpy", (
        *_GPU, ("bytes", "int", "bytes"), ("copy_kind", "int", "copyKind"), ("src_kind", "int", "srcKind"),
        ("dst_kind", "int", "dstKind"))),
    TableSpec(("CUPTI_ACTIVITY_KIND_MEMSET",), "_ns_memset", (
        *_GPU, ("bytes", "int", "bytes"), ("mem_kind", "int", "memKind"))),
    TableSpec(("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",), "_ns_sync", (*_GPU, ("sync_type", "int", "syncType"))),
    TableSpec(("CUPTI_ACTIVITY_KIND_RUNTIME",), "_ns_api", (
        *_SPAN, ("gtid", "int", "globalTid"), ("correlation", "int", "correlationId"), ("name_id", "int", "nameId"))),
    TableSpec(("OSRT_API",), "_ns_osrt", (*_SPAN, ("gtid", "int", "globalTid"), ("name_id", "int", "nameId"))),
    # 59 push/pop range, 60 start/end range, 75 domain creation (its text is the domain's name).
    TableSpec(("NVTX_EVENTS",), "_ns_nvtx", (
        *_SPAN, ("event_type", "int", "eventType"), ("text", "text", "text"), ("text_id", "int", "textId"),
        ("gtid", "int", "globalTid"), ("domain_id", "int", "domainId")), where="eventType IN (59, 60, 75)",
              where_columns=("eventType",)),
    # TARGET_INFO_GPU from nsys 2021.3.1 on; TARGET_INFO_CUDA_GPU (keyed by deviceId) before.
    TableSpec(("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"), "_ns_gpu", (
        ("id", "int", "id", "deviceId"), ("name", "text", "name"),
        ("major", "int", "computeMajor", "computeCapabilityMajor"),
        ("minor", "int", "computeMinor", "computeCapabilityMinor"),
        ("memory", "int", "totalMemory"), ("sm", "int", "smCount", "numMultiprocessors")), counts=False),
    TableSpec(("TARGET_INFO_CUDA_DEVICE",), "_ns_cudadev", (
        ("gpu_id", "int", "gpuId"), ("sm", "int", "numMultiprocessors")), counts=False),
    TableSpec(("PROCESSES",), "_ns_proc", (("gpid", "int", "globalPid"), ("name", "text", "name")), counts=False),
    TableSpec(("ThreadNames",), "_ns_thread", (("name_id", "int", "nameId"), ("gtid", "int", "globalTid")),
              counts=False),
    TableSpec(("PROFILER_OVERHEAD",), "_ns_overhead", (
        *_SPAN, ("gtid", "int", "globalTid"), ("name_id", "int", "nameId")), counts=False),
    TableSpec(("CUPTI_ACTIVITY_KIND_OVERHEAD",), "_ns_cupti_overhead", (
        *_SPAN, ("gtid", "int", "globalTid"), ("name_id", "int", "nameId")), counts=False),
    TableSpec(("MPI_RANKS",), "_ns_mpi", (("gtid", "int", "globalTid"), ("rank", "int", "rank")), counts=False),
    # Only with --cuda-memory-usage=true: each allocation and free of GPU memory (memoryOperationType 0 allocation,
    # 1 deallocation; memKind as ENUM_CUDA_MEM_KIND). An instant: te is its start too.
    TableSpec(("CUDA_GPU_MEMORY_USAGE_EVENTS",), "_ns_gpumem", (
        ("ts", "int", "start"), ("te", "int", "start"), ("gpid", "int", "globalPid"), ("device", "int", "deviceId"),
        ("address", "int", "address"), ("bytes", "int", "bytes"), ("mem_kind", "int", "memKind"),
        ("operation", "int", "memoryOperationType"), ("correlation", "int", "correlationId"))),
)

# The temp tables whose times are on the export's session clock: shifted onto UTC when the export records when
# the session started, so that reports of several processes or hosts share one clock.
TIMED = ("_ns_kernel", "_ns_memcpy", "_ns_memset", "_ns_sync", "_ns_api", "_ns_osrt", "_ns_nvtx", "_ns_overhead",
         "_ns_cupti_overhead", "_ns_gpumem")

# The normalisation in two scripts: the GPU's rows, then the host's. Between them the GPU's raw temp tables
# (GPU_TEMP, which the second reads not) are dropped and the store compressed (nsys._load_tables).
GPU_TEMP = ("_ns_kernel", "_ns_memcpy", "_ns_memset", "_ns_sync")

NORMALIZE_GPU_SQL = rf"""
CREATE OR REPLACE TEMP MACRO _ns_pid(gtid) AS (gtid >> 24) & 16777215;
CREATE OR REPLACE TEMP MACRO _ns_tid(gtid) AS gtid & 16777215;
-- CUPTI numbers correlation ids per process, so an export of several processes repeats them: tracedoc's
-- correlation_id is pid × 2^32 + correlationId (globalPid and globalTid carry the pid in the same bits).
CREATE OR REPLACE TEMP MACRO _ns_corr(gid, correlation) AS coalesce(_ns_pid(gid), 0) * 4294967296 + correlation;
CREATE OR REPLACE TEMP MACRO _ns_mem_kind(k) AS CASE k
    WHEN 0 THEN 'Pageable' WHEN 1 THEN 'Pinned' WHEN 2 THEN 'Device' WHEN 3 THEN 'Array' WHEN 4 THEN 'Managed'
    WHEN 5 THEN 'Device Static' WHEN 6 THEN 'Managed Static' ELSE 'Unknown' END;
CREATE OR REPLACE TEMP MACRO _ns_copy_kind(k) AS CASE k
    WHEN 1 THEN 'HtoD' WHEN 2 THEN 'DtoH' WHEN 3 THEN 'HtoA' WHEN 4 THEN 'AtoH' WHEN 5 THEN 'AtoA'
    WHEN 6 THEN 'AtoD' WHEN 7 THEN 'DtoA' WHEN 8 THEN 'DtoD' WHEN 9 THEN 'HtoH' WHEN 10 THEN 'PtoP'
    WHEN 11 THEN 'HtoD' WHEN 12 THEN 'DtoH' WHEN 13 THEN 'DtoD' END;  -- 11-13: unified memory
CREATE OR REPLACE TEMP MACRO _ns_triple(x, y, z) AS
    CASE WHEN x IS NOT NULL THEN concat_ws(',', x, coalesce(y, 1), coalesce(z, 1)) END;

-- The processes that ran GPU work, with the first GPU each used and its MPI rank when the capture traced MPI.
CREATE OR REPLACE TEMP TABLE _ns_gpu_processes AS
WITH work AS (
    SELECT gpid, device FROM _ns_kernel UNION ALL SELECT gpid, device FROM _ns_memcpy
    UNION ALL SELECT gpid, device FROM _ns_memset
)
SELECT w.pid, w.device, m.mpi_rank
FROM (SELECT _ns_pid(gpid) AS pid, min(device) AS device FROM work WHERE gpid IS NOT NULL GROUP BY ALL) w
LEFT JOIN (SELECT _ns_pid(gtid) AS pid, min(rank) AS mpi_rank FROM _ns_mpi GROUP BY ALL) m USING (pid);

-- Every process's source: with two or more GPU processes, each of them in rank order from the first source id
-- (the others are left out); else every process (and rows without one: -1) is the first source id.
CREATE OR REPLACE TEMP TABLE _ns_pid_source AS
WITH split AS (SELECT count(*) >= 2 AS yes FROM _ns_gpu_processes),
seen AS (
    SELECT DISTINCT coalesce(_ns_pid(gtid), -1) AS pid FROM _ns_api
    UNION SELECT coalesce(_ns_pid(gtid), -1) FROM _ns_osrt UNION SELECT coalesce(_ns_pid(gtid), -1) FROM _ns_nvtx
    UNION SELECT coalesce(_ns_pid(gpid), -1) FROM _ns_kernel UNION SELECT coalesce(_ns_pid(gpid), -1) FROM _ns_memcpy
    UNION SELECT coalesce(_ns_pid(gpid), -1) FROM _ns_memset UNION SELECT coalesce(_ns_pid(gpid), -1) FROM _ns_sync
    UNION SELECT coalesce(_ns_pid(gtid), -1) FROM _ns_thread UNION SELECT coalesce(_ns_pid(gpid), -1) FROM _ns_proc
    UNION SELECT coalesce(_ns_pid(gtid), -1) FROM _ns_overhead
    UNION SELECT coalesce(_ns_pid(gtid), -1) FROM _ns_cupti_overhead
)
SELECT pid, getvariable('source_id') + row_number() OVER (ORDER BY mpi_rank NULLS LAST, device, pid) - 1 AS source_id,
       mpi_rank
FROM _ns_gpu_processes WHERE (SELECT yes FROM split)
UNION ALL
SELECT pid, getvariable('source_id'), NULL FROM seen WHERE NOT (SELECT yes FROM split);

-- The key a row's process has in _ns_pid_source (a row of a process left out finds none: inner joins drop it).
CREATE OR REPLACE TEMP MACRO _ns_src(gid) AS coalesce(_ns_pid(gid), -1);
-- Whether a store row is of this export's sources.
CREATE OR REPLACE TEMP MACRO _ns_mine(src) AS src IN (SELECT source_id FROM _ns_pid_source);

-- A kernel's name, category, collective and launch shape are worked out once per distinct set of name ids and
-- launch dimensions (a few thousand), not per kernel.
INSERT INTO gpu_activity
WITH launches AS MATERIALIZED (
    SELECT k.demangled, k.short, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
           CASE WHEN {nccl_kernel("s.value", "d.value")} THEN 'communication' ELSE 'compute' END AS category,
           coalesce(d.value, s.value, 'unknown kernel') AS name,
           nullif(regexp_extract(coalesce(s.value, d.value), 'nccl(?:Dev)?Kernel_([A-Za-z]+)', 1), '') AS collective,
           _ns_triple(k.grid_x, k.grid_y, k.grid_z) AS grid, _ns_triple(k.block_x, k.block_y, k.block_z) AS block
    FROM (SELECT DISTINCT demangled, short, grid_x, grid_y, grid_z, block_x, block_y, block_z FROM _ns_kernel) k
    LEFT JOIN _ns_str d ON d.id = k.demangled
    LEFT JOIN _ns_str s ON s.id = k.short
)
SELECT m.source_id, 0, k.device, k.stream, 'kernel', n.category, n.name, k.ts, greatest(k.te - k.ts, 0),
       _ns_corr(k.gpid, k.correlation), NULL, NULL, NULL, n.grid, n.block, k.registers,
       CASE WHEN k.static_smem IS NOT NULL OR k.dynamic_smem IS NOT NULL
            THEN coalesce(k.static_smem, 0) + coalesce(k.dynamic_smem, 0) END,
       n.collective
FROM _ns_kernel k JOIN _ns_pid_source m ON m.pid = _ns_src(k.gpid)
JOIN launches n ON n.demangled IS NOT DISTINCT FROM k.demangled AND n.short IS NOT DISTINCT FROM k.short
    AND n.grid_x IS NOT DISTINCT FROM k.grid_x AND n.grid_y IS NOT DISTINCT FROM k.grid_y
    AND n.grid_z IS NOT DISTINCT FROM k.grid_z AND n.block_x IS NOT DISTINCT FROM k.block_x
    AND n.block_y IS NOT DISTINCT FROM k.block_y AND n.block_z IS NOT DISTINCT FROM k.block_z
WHERE k.ts IS NOT NULL AND k.te IS NOT NULL;

-- A copy touching pageable host memory (either side) is 'pageable', as in nsys's own rules.
INSERT INTO gpu_activity
SELECT m.source_id, 0, device, stream, 'memcpy', 'memcpy',
       'Memcpy ' || coalesce(_ns_copy_kind(copy_kind), 'unknown') || ' (' || _ns_mem_kind(src_kind) || ' -> '
           || _ns_mem_kind(dst_kind) || ')',
       ts, greatest(te - ts, 0), _ns_corr(gpid, correlation), bytes, _ns_copy_kind(copy_kind),
       CASE WHEN src_kind = 0 OR dst_kind = 0 THEN 'pageable' WHEN src_kind = 1 OR dst_kind = 1 THEN 'pinned' END,
       NULL, NULL, NULL, NULL, NULL
FROM _ns_memcpy JOIN _ns_pid_source m ON m.pid = _ns_src(gpid) WHERE ts IS NOT NULL AND te IS NOT NULL;

-- A memset of host-accessible memory (pinned or managed) blocks the host; one of device memory does not.
INSERT INTO gpu_activity
SELECT m.source_id, 0, device, stream, 'memset', 'memset', 'Memset (' || _ns_mem_kind(mem_kind) || ')',
       ts, greatest(te - ts, 0), _ns_corr(gpid, correlation), bytes, NULL,
       CASE mem_kind WHEN 1 THEN 'pinned' WHEN 4 THEN 'managed' WHEN 6 THEN 'managed' END,
       NULL, NULL, NULL, NULL, NULL
FROM _ns_memset JOIN _ns_pid_source m ON m.pid = _ns_src(gpid) WHERE ts IS NOT NULL AND te IS NOT NULL;

-- GPU-side synchronization, named after the CUDA call that waited, only those calls looked up (syncType's numbering
-- changed between export versions: 2 is a stream synchronization in 2024.6 and 2025.3 exports, a stream wait on an
-- event in 2026.2).
INSERT INTO gpu_activity
SELECT m.source_id, 0, y.device, y.stream, 'sync', 'sync',
       'Sync (' || coalesce(regexp_replace(n.value, '_v[0-9]{{4}}$', ''), 'unknown call') || ')',
       y.ts, greatest(y.te - y.ts, 0), _ns_corr(y.gpid, y.correlation), NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL
FROM _ns_sync y JOIN _ns_pid_source m ON m.pid = _ns_src(y.gpid)
LEFT JOIN (SELECT _ns_corr(gtid, correlation) AS correlation, any_value(name_id) AS name_id FROM _ns_api
           WHERE _ns_corr(gtid, correlation) IN (SELECT _ns_corr(gpid, correlation) FROM _ns_sync) GROUP BY ALL) a
    ON a.correlation = _ns_corr(y.gpid, y.correlation)
LEFT JOIN _ns_str n ON n.id = a.name_id
WHERE y.ts IS NOT NULL AND y.te IS NOT NULL;
"""

NORMALIZE_HOST_SQL = r"""
-- CUDA API names carry a version suffix ('cudaLaunchKernel_v7000'); nsys stats drops a '_vNNNN' ending and so
-- does tracedoc ('cuGetProcAddress_v2' keeps its name), once per name id. Some exports store a call twice, under
-- both names ('cudaMemcpy' and 'cudaMemcpy_v3020', one correlation id): one row is kept per thread, correlation
-- and name; only the calls whose correlation id repeats on their thread are sorted for it. Those are found
-- without a group per call: the calls are counted per thread and block of 64 correlation ids, each block with a
-- mask of the ids seen in it, and only a block with more calls than ids holds a repeat (none, usually); its
-- calls alone are then grouped by correlation id. A call's kind is looked up with its name, as a kernel's strings
-- are: a string column that comes from a join to a few values is stored about three times faster than one made
-- per row.
INSERT INTO cpu_activity
WITH names AS (
    SELECT id, regexp_replace(value, '_v[0-9]{4}$', '') AS name,
           CASE WHEN value LIKE 'cuda%' THEN 'runtime' ELSE 'driver' END AS kind
    FROM _ns_str
),
blocks AS MATERIALIZED (
    SELECT gtid, correlation >> 6 AS block FROM _ns_api WHERE correlation <> 0 GROUP BY ALL
    HAVING count(*) > bit_count(bit_or(1::UBIGINT << (correlation & 63)::UBIGINT))
),
repeated AS MATERIALIZED (
    SELECT a.gtid, a.correlation FROM _ns_api a
    SEMI JOIN blocks b ON b.gtid IS NOT DISTINCT FROM a.gtid AND b.block = a.correlation >> 6
    WHERE a.correlation <> 0 GROUP BY ALL HAVING count(*) > 1
),
calls AS NOT MATERIALIZED (
    SELECT gtid, ts, te, correlation, name_id FROM _ns_api WHERE ts IS NOT NULL AND te IS NOT NULL
),
once AS (
    SELECT a.* EXCLUDE (name_id), coalesce(n.name, 'unknown CUDA call') AS name, coalesce(n.kind, 'driver') AS kind
    FROM calls a ANTI JOIN repeated r ON r.gtid IS NOT DISTINCT FROM a.gtid AND r.correlation = a.correlation
    LEFT JOIN names n ON n.id = a.name_id
    UNION ALL
    SELECT a.* EXCLUDE (name_id), coalesce(n.name, 'unknown CUDA call') AS name, coalesce(n.kind, 'driver') AS kind
    FROM calls a SEMI JOIN repeated r ON r.gtid IS NOT DISTINCT FROM a.gtid AND r.correlation = a.correlation
    LEFT JOIN names n ON n.id = a.name_id
    QUALIFY row_number() OVER (PARTITION BY gtid, correlation, name ORDER BY te - ts DESC, ts) = 1
)
SELECT m.source_id, 0, _ns_pid(o.gtid), _ns_tid(o.gtid), o.kind, o.name, o.ts, greatest(o.te - o.ts, 0),
       _ns_corr(o.gtid, o.correlation), NULL
FROM once o JOIN _ns_pid_source m ON m.pid = _ns_src(o.gtid);

-- OS runtime calls, clipped to the span of the CUDA and NVTX activity: a whole-process capture also records the
-- interpreter's start-up and shutdown, which would otherwise stretch the analysed window far beyond the GPU work.
INSERT INTO cpu_activity
WITH span AS (
    SELECT least((SELECT min(ts) FROM _ns_api), (SELECT min(ts) FROM _ns_nvtx WHERE event_type IN (59, 60)),
                 (SELECT min(ts_ns) FROM gpu_activity WHERE _ns_mine(source_id))) AS start_ns,
           greatest((SELECT max(te) FROM _ns_api), (SELECT max(coalesce(te, ts)) FROM _ns_nvtx),
                    (SELECT max(ts_ns + dur_ns) FROM gpu_activity WHERE _ns_mine(source_id))) AS end_ns
)
SELECT m.source_id, 0, _ns_pid(o.gtid), _ns_tid(o.gtid), 'os', coalesce(n.value, 'unknown OS call'),
       greatest(o.ts, s.start_ns), least(o.te, s.end_ns) - greatest(o.ts, s.start_ns), NULL, NULL
FROM _ns_osrt o CROSS JOIN span s JOIN _ns_pid_source m ON m.pid = _ns_src(o.gtid)
LEFT JOIN _ns_str n ON n.id = o.name_id
WHERE o.ts IS NOT NULL AND o.te IS NOT NULL AND o.ts < s.end_ns AND o.te > s.start_ns;

-- NVTX ranges. A range without an end was still open when capture stopped: it runs to the capture's last event.
-- Depth: ranges open on the thread when this one started (at equal times, earlier ends close first, longer
-- ranges open first, and an empty range closes right after it opens).
INSERT INTO nvtx_ranges
WITH capture AS (
    SELECT greatest(
        (SELECT max(ts_ns + dur_ns) FROM gpu_activity WHERE _ns_mine(source_id)),
        (SELECT max(ts_ns + dur_ns) FROM cpu_activity WHERE _ns_mine(source_id)),
        (SELECT max(greatest(ts, coalesce(te, ts))) FROM _ns_nvtx)) AS end_ns
),
domains AS (
    SELECT n.domain_id, arg_max(coalesce(nullif(n.text, ''), s.value), n.ts) AS domain
    FROM _ns_nvtx n LEFT JOIN _ns_str s ON s.id = n.text_id
    WHERE n.event_type = 75 GROUP BY n.domain_id
),
r AS MATERIALIZED (
    SELECT row_number() OVER () AS rid, m.source_id, _ns_pid(n.gtid) AS pid, _ns_tid(n.gtid) AS tid, n.domain_id,
           coalesce(nullif(n.text, ''), s.value) AS name,
           CASE n.event_type WHEN 59 THEN 'push_pop' ELSE 'start_end' END AS kind,
           n.ts, greatest(coalesce(n.te, c.end_ns), n.ts) AS te, n.te IS NULL AS open_end
    FROM _ns_nvtx n CROSS JOIN capture c JOIN _ns_pid_source m ON m.pid = _ns_src(n.gtid)
    LEFT JOIN _ns_str s ON s.id = n.text_id
    WHERE n.event_type IN (59, 60) AND n.ts IS NOT NULL
),
edges AS (
    SELECT rid, pid, tid, ts AS t, 1 AS delta, 1 AS ord, -te AS ord2 FROM r
    UNION ALL
    SELECT rid, pid, tid, te, -1, CASE WHEN te = ts THEN 2 ELSE 0 END, 0 FROM r
),
depths AS (
    SELECT rid, delta,
           sum(delta) OVER (PARTITION BY pid, tid ORDER BY t, ord, ord2, rid ROWS UNBOUNDED PRECEDING) - 1 AS depth
    FROM edges
)
SELECT r.source_id, 0, r.pid, r.tid, r.domain_id, d.domain, r.name, r.kind, r.ts, r.te - r.ts,
       r.open_end, CAST(x.depth AS INTEGER),
       r.name LIKE 'aten::%' OR r.name LIKE '%, seq = %' OR r.name LIKE '%, op_id = %'
FROM r JOIN depths x ON x.rid = r.rid AND x.delta = 1
LEFT JOIN domains d ON d.domain_id = r.domain_id;

-- NVTX ranges are also the host's annotations (framework operator ranges its operators), so the shared analyses
-- can name what the host was doing.
INSERT INTO cpu_activity
SELECT source_id, 0, pid, tid, CASE WHEN is_op THEN 'op' ELSE 'annotation' END,
       CASE WHEN is_op THEN split_part(name, ',', 1) ELSE name END, ts_ns, dur_ns, NULL, NULL
FROM nvtx_ranges WHERE _ns_mine(source_id) AND name IS NOT NULL;

-- GPU memory taken from and given back to CUDA (cudaMalloc, cudaFree, a module's static data; --cuda-memory-usage):
-- device, array and static device memory, as the shared allocator events with the process's running total on the
-- device as both totals. A process that uses a caching allocator (PyTorch) asks CUDA for segments, so what this
-- sees is the allocator's reserved memory, not its tensors; memory taken before the capture started is in it only
-- as far as the capture sees it freed.
-- Each event's thread is the CUDA call's (its correlation id); static data loaded with a module has none.
INSERT INTO memory_events
WITH calls AS (
    SELECT _ns_corr(gtid, correlation) AS correlation, any_value(gtid) AS gtid FROM _ns_api
    WHERE correlation IS NOT NULL AND correlation <> 0
      AND _ns_corr(gtid, correlation) IN (SELECT _ns_corr(gpid, correlation) FROM _ns_gpumem) GROUP BY ALL
),
ev AS (
    SELECT m.source_id, _ns_tid(c.gtid) AS tid, g.ts, g.device, g.address,
           CASE WHEN g.operation = 1 THEN -g.bytes ELSE g.bytes END AS bytes
    FROM _ns_gpumem g JOIN _ns_pid_source m ON m.pid = _ns_src(g.gpid)
    LEFT JOIN calls c ON g.correlation <> 0 AND c.correlation = _ns_corr(g.gpid, g.correlation)
    WHERE g.mem_kind IN (2, 3, 5) AND g.operation IN (0, 1) AND g.ts IS NOT NULL AND g.bytes >= 0
      AND g.device IS NOT NULL
),
-- Frees first at equal times (a peak is not counted before what left at that moment). A capture that starts
-- mid-run sees frees of memory taken before it: the totals are raised by the least that must have been held then,
-- so that they never fall below zero.
running AS (
    SELECT *, sum(bytes) OVER (PARTITION BY source_id, device ORDER BY ts, bytes, address
                               ROWS UNBOUNDED PRECEDING) AS total
    FROM ev
),
held AS (
    SELECT *, total - least(min(total) OVER (PARTITION BY source_id, device), 0) AS held FROM running
)
SELECT source_id, 0, tid, ts, CASE WHEN bytes < 0 THEN 'free' ELSE 'alloc' END, 1, device, address, bytes, held, held
FROM held;

-- PyTorch's profiler steps, when it emitted them as NVTX ranges.
INSERT INTO steps
SELECT source_id, 0, step, min(ts_ns), max(ts_ns + dur_ns) - min(ts_ns), 'ProfilerStep#' || step
FROM (SELECT source_id, ts_ns, dur_ns, TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)', 1) AS INTEGER) AS step
      FROM nvtx_ranges WHERE _ns_mine(source_id) AND name LIKE 'ProfilerStep#%')
WHERE step IS NOT NULL GROUP BY source_id, step;

-- The GPUs of each source: those it ran work on (a synchronization record's device is not always the process's),
-- and, for an export of one source, every GPU the export describes.
INSERT INTO devices
SELECT d.source_id, d.device, g.name,
       CASE WHEN g.major IS NOT NULL THEN g.major || '.' || coalesce(g.minor, 0) END, g.memory, coalesce(g.sm, c.sm)
FROM (SELECT DISTINCT source_id, device FROM gpu_activity
      WHERE _ns_mine(source_id) AND device IS NOT NULL AND kind <> 'sync'
      UNION SELECT DISTINCT m.source_id, g.id FROM _ns_gpu g CROSS JOIN _ns_pid_source m
      WHERE g.id IS NOT NULL AND (SELECT count(DISTINCT source_id) FROM _ns_pid_source) = 1) d
LEFT JOIN (SELECT id, any_value(nullif(name, '')) AS name, any_value(major) AS major, any_value(minor) AS minor,
                  any_value(memory) AS memory, any_value(sm) AS sm FROM _ns_gpu GROUP BY id) g ON g.id = d.device
LEFT JOIN (SELECT gpu_id, any_value(sm) AS sm FROM _ns_cudadev GROUP BY gpu_id) c ON c.gpu_id = d.device;

INSERT INTO nsys_threads
WITH named AS (
    SELECT _ns_pid(t.gtid) AS pid, _ns_tid(t.gtid) AS tid, any_value(s.value) AS thread_name
    FROM _ns_thread t LEFT JOIN _ns_str s ON s.id = t.name_id GROUP BY ALL
),
seen AS (
    SELECT DISTINCT pid, tid FROM cpu_activity WHERE _ns_mine(source_id)
    UNION SELECT pid, tid FROM named
)
SELECT m.source_id, seen.pid, seen.tid, named.thread_name, p.name
FROM seen JOIN _ns_pid_source m ON m.pid = coalesce(seen.pid, -1)
LEFT JOIN named ON named.pid = seen.pid AND named.tid = seen.tid
LEFT JOIN (SELECT _ns_pid(gpid) AS pid, any_value(nullif(name, '')) AS name FROM _ns_proc GROUP BY ALL) p
    ON p.pid = seen.pid;

INSERT INTO nsys_overhead
SELECT m.source_id, _ns_pid(o.gtid), coalesce(s.value, 'profiler overhead'), o.ts, greatest(o.te - o.ts, 0)
FROM (SELECT * FROM _ns_overhead UNION ALL SELECT * FROM _ns_cupti_overhead) o
JOIN _ns_pid_source m ON m.pid = _ns_src(o.gtid)
LEFT JOIN _ns_str s ON s.id = o.name_id
WHERE o.ts IS NOT NULL AND o.te IS NOT NULL;
"""
