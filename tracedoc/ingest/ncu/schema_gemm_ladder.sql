-- GEMM ladder measurements (workloads/gemm_ladder writes gemm_ladder.json): each rung's time on a shape, on one
-- GPU model. The cuBLAS rows are the ceiling that tracedoc/analyses/ncu/cublas_ceiling.sql holds Nsight Compute
-- GEMM kernels of the same size against. Written by tracedoc/ingest/ncu/gemm_ladder.py.

-- One row per rung and shape.
CREATE TABLE gemm_ladder_results (
    source_id       INTEGER,
    gpu             VARCHAR,   -- the GPU's name as CUDA gives it, e.g. 'NVIDIA H100 80GB HBM3' (ncu's device name)
    profiler        VARCHAR,   -- the profiler the ladder ran under (none | torch | nsys | ncu)
    dtype           VARCHAR,   -- input dtype, e.g. 'bf16'
    m               BIGINT,    -- C is m × n, the inner dimension k
    n               BIGINT,
    k               BIGINT,
    flop            DOUBLE,    -- 2·m·n·k, FLOP
    rung            VARCHAR,   -- naive | tiled | wmma | cublas
    kernel          VARCHAR,   -- the hand-written kernel's name (NULL for cublas: cuBLAS picks its own)
    rel_error       DOUBLE,    -- relative Frobenius error against an fp32 product
    ms              DOUBLE,    -- mean time per product, ms; NULL when the rung computed a wrong product
    flop_per_s      DOUBLE,    -- FLOP/s
    sm_clock_mhz    INTEGER,   -- median SM clock while it was timed, MHz; NULL when NVML could not tell
    gpu_bound       BOOLEAN    -- the GPU, not the CPU's launches, set the time (false: no measure of the kernel)
);
