-- ncu.cublas_ceiling: GEMM kernels of an Nsight Compute report against cuBLAS on a product of the same size.
--
-- The GEMM ladder (workloads/gemm_ladder; its gemm_ladder.json given with the report) times cuBLAS on each shape it
-- runs, on one GPU model. ncu records no matrix sizes, but a kernel's FLOP count (ncu.roofline) gives its size: a
-- GEMM-like kernel (by name, or running on tensor cores) whose FLOPs per launch equal 2·m·n·k of a measured shape
-- within 1 % is taken to compute that product — shapes with equal m·n·k cannot be told apart — and its achieved
-- FLOP/s is set against the fastest cuBLAS time measured for that size on the same GPU model. Only GPU-bound
-- timings count: one set by the CPU's launches (the ladder run under ncu, whose launch overhead starves small
-- products) is no ceiling. ncu runs kernels at locked base clocks while cuBLAS ran at the clock the GPU chose;
-- both clocks are given, and pct_of_cublas is the plain ratio of FLOP/s, so at equal clocks the kernel's share
-- would be higher (for CUDA-core kernels by about the clock ratio). FLOP/s in FLOP/s, times in ns, clocks in MHz.
-- A kernel below ncu_max_pct_of_cublas() of cuBLAS is far below it: that is the kernel's primary finding
-- (ncu.primary), so the share is a constant here, not a rule threshold.
-- reads: ncu_kernels, gemm_ladder_results
-- scope: job
-- include: ncu.roofline
-- include: ncu.links

-- ncu_max_pct_of_cublas(): a GEMM below this % of cuBLAS's FLOP/s on the same product is far below the ceiling.
CREATE OR REPLACE TEMP MACRO ncu_max_pct_of_cublas() AS 50.0;

-- One row per ncu kernel with a ceiling: its identity, launches, total_ns, flop_per_launch, flop_per_s and
-- sm_clock_mhz (as ncu ran it); the product m, n, k (product: 'm×n×k') and dtype; cublas_flop_per_s, cublas_ms
-- and cublas_sm_clock_mhz (the fastest GPU-bound cuBLAS timing of that size); tflop_per_s and cublas_tflop_per_s
-- (the two rates in TFLOP/s); pct_of_cublas (achieved / cuBLAS FLOP/s, %); far_below (pct_of_cublas below
-- ncu_max_pct_of_cublas()); saving_ns (Σ launches: its time minus cuBLAS's time for the same FLOPs, ≥ 0).
CREATE OR REPLACE TEMP VIEW ncu_cublas_ceiling AS
WITH kernels AS (
    SELECT r.source_id, r.rank, r.name, r.demangled_name, r.grid, r.block, r.launches, r.total_ns, r.device_name,
           r.precision, r.flop, r.flop / r.launches AS flop_per_launch, r.flop_per_s, s.sm_clock_hz / 1e6 AS sm_clock_mhz
    FROM ncu_roofline r JOIN ncu_kernel_sol s USING (source_id, demangled_name, grid, block)
    WHERE r.flop > 0 AND (s.matmul_like OR r.precision LIKE 'tensor%')
),
cublas AS (
    SELECT * FROM gemm_ladder_results WHERE rung = 'cublas' AND ms IS NOT NULL AND coalesce(gpu_bound, true)
),
matched AS (
    SELECT k.*, arg_max(c, (c.flop_per_s, c.flop, c.ms)) FILTER (WHERE c.flop_per_s IS NOT NULL) AS c
    FROM kernels k JOIN cublas c ON c.gpu = k.device_name AND abs(k.flop_per_launch - c.flop) <= 0.01 * c.flop
    GROUP BY ALL
)
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, device_name, precision,
       flop_per_launch, flop_per_s, sm_clock_mhz,
       c.m AS m, c.n AS n, c.k AS k, c.m || '×' || c.n || '×' || c.k AS product, c.dtype AS dtype,
       c.flop_per_s AS cublas_flop_per_s, c.ms AS cublas_ms, c.sm_clock_mhz AS cublas_sm_clock_mhz,
       flop_per_s / 1e12 AS tflop_per_s, c.flop_per_s / 1e12 AS cublas_tflop_per_s,
       100.0 * flop_per_s / c.flop_per_s AS pct_of_cublas,
       pct_of_cublas < ncu_max_pct_of_cublas() AS far_below,
       greatest(0.0, total_ns - flop / c.flop_per_s * 1e9) AS saving_ns
FROM matched;

-- The report's GEMM kernels against cuBLAS on a product of the same size (ncu_cublas_ceiling; ms). Columns: rank,
-- kernel, demangled, grid, block, product, dtype, tflop_per_s, cublas_tflop_per_s, pct_of_cublas, sm_clock_mhz,
-- cublas_sm_clock_mhz, total_ms, saving_ms; total_ns orders the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_cublas_ceiling AS
SELECT rank, name AS kernel, demangled_name AS demangled, grid, block, product, dtype, tflop_per_s,
       cublas_tflop_per_s, pct_of_cublas, sm_clock_mhz, cublas_sm_clock_mhz, total_ns / 1e6 AS total_ms,
       saving_ns / 1e6 AS saving_ms, total_ns
FROM ncu_cublas_ceiling;

-- The report's cuBLAS timings of the GEMM ladder given (gemm_ladder_results): the ceilings on offer, matched or
-- not. Columns: gpu, product ('m×n×k'), dtype, ms, tflop_per_s, sm_clock_mhz, gpu_bound, profiler; flop orders
-- the rows and is left out of the report.
CREATE OR REPLACE TEMP VIEW ncu_report_gemm_ladder_cublas AS
SELECT gpu, m || '×' || n || '×' || k AS product, dtype, ms, flop_per_s / 1e12 AS tflop_per_s, sm_clock_mhz,
       gpu_bound, profiler, flop
FROM gemm_ladder_results WHERE rung = 'cublas';
