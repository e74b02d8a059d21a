-- ncu.launch_config: whether the launch configuration fills the GPU — small grids and tail effects.
--
-- A wave is as many blocks as the GPU runs at once (SMs × blocks per SM at the kernel's theoretical occupancy);
-- ncu reports the grid in waves (launch__waves_per_multiprocessor). Times in ns.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.sol

-- One row per kernel. Columns: grid_size, block_size, sm_count, waves, kernel_class, busiest_pct, headroom;
--   idle_sm_fraction: for a grid below one wave, the share of the GPU's block slots left empty — the share of SMs
--     without a block when the grid has fewer blocks than SMs ((SMs − blocks)/SMs, ncu's LaunchConfiguration
--     estimate), else 1 − waves;
--   tail_idle_fraction: for ≥ 1 wave, the share of block-slot time the last, partial wave leaves empty,
--     (⌈waves⌉ − waves)/⌈waves⌉ — what a grid sized to whole waves (or a persistent/grid-stride grid) would save;
--   small_grid_saving_fraction = min(idle_sm_fraction, headroom); tail_saving_fraction = tail_idle_fraction;
--   small_grid_impact_ns and tail_impact_ns: the fractions × total_ns.
CREATE OR REPLACE TEMP VIEW ncu_launch_config AS
WITH f AS (
    SELECT *,
           CASE WHEN waves < 1 AND grid_size < sm_count THEN (sm_count - grid_size) / sm_count
                WHEN waves < 1 THEN 1.0 - waves END AS idle_sm_fraction,
           CASE WHEN waves >= 1 THEN (ceil(waves - 1e-6) - waves) / ceil(waves - 1e-6) END AS tail_idle_fraction
    FROM ncu_kernel_sol
)
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_pct, busiest_unit, headroom, grid_size, block_size, sm_count, waves,
       idle_sm_fraction, tail_idle_fraction,
       least(idle_sm_fraction, headroom) AS small_grid_saving_fraction,
       least(idle_sm_fraction, headroom) * total_ns AS small_grid_impact_ns,
       greatest(tail_idle_fraction, 0.0) AS tail_saving_fraction,
       greatest(tail_idle_fraction, 0.0) * total_ns AS tail_impact_ns
FROM f;
