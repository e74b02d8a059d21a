-- ncu.occupancy: achieved vs theoretical occupancy per kernel, what limits it, and whether it limits the kernel.
--
-- Occupancy is the share of the SM's warp slots holding a warp (Occupancy section, basic set). Low occupancy only
-- costs time when the kernel cannot hide latency with the warps it has: a kernel at high tensor-pipe or memory
-- throughput (compute- or memory-bound), or one whose grid does not fill the GPU, is not helped by more warps per SM
-- — the classic misdiagnosis of reading the occupancy number alone. Percentages in %; times in ns.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.sol

-- One row per kernel. Columns: the kernel's identity and speed-of-light columns, achieved_occupancy_pct,
-- theoretical_occupancy_pct, occupancy_gap_pct (theoretical − achieved, points), limiter (what caps theoretical
-- occupancy: registers, shared memory, block size (warps), blocks per SM, barriers — the smallest
-- launch__occupancy_limit_*, ties joined; or 'nothing in the launch configuration' when theoretical occupancy is
-- the hardware maximum and the gap comes from imbalance or short-lived blocks), registers_per_thread,
-- shared_memory_bytes, block_size;
-- occupancy_can_limit: the kernel is latency-bound (no unit ≥ 60 % of peak, the grid fills at least one wave)
-- and its tensor pipe is below 50 %; not_limiting_reason: why not, in words;
-- saving_fraction: min(1 − achieved/100, 1 − issue_active, headroom) — the warp slots left empty, capped by the
-- idle issue slots and the busiest unit's headroom, as ncu caps its occupancy estimates; impact_ns = × total_ns.
CREATE OR REPLACE TEMP VIEW ncu_occupancy AS
WITH limits AS (
    SELECT *,
           least(occupancy_limit_registers, occupancy_limit_shared_mem, occupancy_limit_warps,
                 occupancy_limit_blocks, occupancy_limit_barriers) AS limit_blocks
    FROM ncu_kernel_sol
)
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_pct, busiest_unit, busiest_unit_pct, headroom, tensor_pct, issue_active, eligible_warps, active_warps,
       achieved_occupancy_pct, theoretical_occupancy_pct,
       theoretical_occupancy_pct - achieved_occupancy_pct AS occupancy_gap_pct,
       registers_per_thread, shared_memory_bytes, block_size, limit_blocks,
       CASE WHEN theoretical_occupancy_pct >= 99.5 OR limit_blocks IS NULL THEN 'nothing in the launch configuration'
            ELSE concat_ws(' and ',
                CASE WHEN occupancy_limit_registers = limit_blocks
                     THEN 'registers (' || registers_per_thread || ' per thread)' END,
                CASE WHEN occupancy_limit_shared_mem = limit_blocks
                     THEN 'shared memory (' || shared_memory_bytes || ' bytes per block)' END,
                CASE WHEN occupancy_limit_warps = limit_blocks THEN 'block size (' || block_size || ' threads)' END,
                CASE WHEN occupancy_limit_blocks = limit_blocks THEN 'the blocks-per-SM limit' END,
                CASE WHEN occupancy_limit_barriers = limit_blocks THEN 'barriers per SM' END)
       END AS limiter,
       CASE WHEN kernel_class IN ('compute', 'memory')
                THEN 'it is ' || kernel_class || '-bound: ' || busiest_unit || ' at ' || ncu_pct_text(busiest_unit_pct)
                     || '% of peak'
            WHEN coalesce(tensor_pct, 0) >= 50 THEN 'the tensor pipe is at ' || ncu_pct_text(tensor_pct) || '% of peak'
            WHEN kernel_class = 'small_grid' THEN 'the grid (' || grid_size::BIGINT || ' blocks) does not fill one wave; '
                                                   || 'more warps per SM would not be used'
       END AS not_limiting_reason,
       not_limiting_reason IS NULL AND achieved_occupancy_pct IS NOT NULL AS occupancy_can_limit,
       CASE WHEN limiter LIKE 'registers%'
                THEN 'Cap the registers per thread so more blocks fit: __launch_bounds__(threads, minBlocksPerSM) or '
                     || '-maxrregcount (watch for spills), or use smaller blocks.'
            WHEN limiter LIKE 'shared memory%'
                THEN 'Use less shared memory per block (smaller tiles, fewer pipeline stages) so more blocks fit.'
            WHEN limiter LIKE 'block size%'
                THEN 'Pick a block size whose warps divide the SM''s warp slots (e.g. 256 or 512 threads) so no '
                     || 'slots stay empty.'
            WHEN limiter LIKE 'nothing%'
                THEN 'Nothing in the launch configuration limits occupancy; the warps are not there because blocks '
                     || 'finish unevenly or too quickly: give each thread more work (a grid-stride loop), balance the '
                     || 'work per block, and avoid very short kernels.'
            ELSE 'Raise the resource that limits blocks per SM (' || limiter || ').' END AS advice,
       100.0 * least(1.0 - achieved_occupancy_pct / 100.0, 1.0 - coalesce(issue_active, 0), headroom)
           AS saving_pct,
       total_ns / 1e6 AS total_ms,
       least(1.0 - achieved_occupancy_pct / 100.0, 1.0 - coalesce(issue_active, 0), headroom) AS saving_fraction,
       least(1.0 - achieved_occupancy_pct / 100.0, 1.0 - coalesce(issue_active, 0), headroom) * total_ns
           AS impact_ns
FROM limits;
