-- ncu.memory: memory access efficiency per kernel — register spills (local memory), uncoalesced global accesses
-- and shared-memory bank conflicts.
--
-- Each saving is first order: the share of the traffic that is waste, times the memory system's share of the
-- kernel's limit (ncu_limiter_share: 1 where the memory unit is the kernel's busiest, else its throughput over the
-- busiest unit's), for a unit that sets the time moves its traffic at a fixed rate. Sectors are 32 bytes.
-- Percentages in %, sizes in bytes, times in ns. Quantities whose section was not collected are NULL (see ncu.coverage).
-- Spills and uncoalesced accesses can be a kernel's primary finding (ncu.primary), so the share of waste that
-- makes them a finding is a constant here, not a rule threshold.
-- reads: ncu_kernels
-- scope: job
-- include: ncu.sol

-- ncu_min_waste_pct(): wasted traffic (local-memory or excess sectors) at or above this % of the traffic is a
-- finding.
CREATE OR REPLACE TEMP MACRO ncu_min_waste_pct() AS 10.0;

-- ncu_limiter_share(unit_pct, busiest_pct): how much of the kernel's time a unit at unit_pct % of its peak sets,
-- with the busiest unit at busiest_pct: 1 for the busiest unit (it is the limit), a proportional share for the
-- others; unit_pct / 100 where the busiest unit is unknown.
CREATE OR REPLACE TEMP MACRO ncu_limiter_share(unit_pct, busiest_pct) AS
    CASE WHEN coalesce(busiest_pct, 0) > 0 THEN least(1.0, unit_pct / busiest_pct) ELSE unit_pct / 100.0 END;

-- Register spills: L1 sectors of local-memory loads and stores (register spills, or per-thread arrays the
-- compiler could not keep in registers), MemoryWorkloadAnalysis tables (full set). Columns: local_bytes,
-- local_traffic_pct (local sectors over local + global sectors), spills (local_traffic_pct ≥ ncu_min_waste_pct()),
-- registers_per_thread, saving_fraction (local share × the memory system's limiter share), impact_ns.
CREATE OR REPLACE TEMP VIEW ncu_register_spills AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_unit, mem_pct, registers_per_thread, local_sectors * 32 AS local_bytes,
       100.0 * local_sectors / nullif(local_sectors + global_sectors, 0) AS local_traffic_pct,
       coalesce(local_traffic_pct >= ncu_min_waste_pct(), false) AS spills,
       local_sectors / nullif(local_sectors + global_sectors, 0) * ncu_limiter_share(mem_pct, busiest_unit_pct)
           AS saving_fraction,
       saving_fraction * total_ns AS impact_ns
FROM ncu_kernel_sol;

-- Uncoalesced global accesses: L2 sectors the global loads and stores need as written vs at perfect coalescing
-- (memory_l2_theoretical_sectors_global[_ideal], SourceCounters, detailed set). Columns: excess_bytes,
-- excess_pct (the share of the sectors moved that coalesced accesses would not need), sector_ratio (sectors moved
-- over sectors needed), uncoalesced (excess_pct ≥ ncu_min_waste_pct()), saving_fraction (excess share × the memory
-- system's limiter share), impact_ns.
CREATE OR REPLACE TEMP VIEW ncu_uncoalesced_access AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_unit, mem_pct, theoretical_sectors, ideal_sectors,
       (theoretical_sectors - ideal_sectors) * 32 AS excess_bytes,
       100.0 * (theoretical_sectors - ideal_sectors) / nullif(theoretical_sectors, 0) AS excess_pct,
       theoretical_sectors / nullif(ideal_sectors, 0) AS sector_ratio,
       coalesce(excess_pct >= ncu_min_waste_pct(), false) AS uncoalesced,
       (theoretical_sectors - ideal_sectors) / nullif(theoretical_sectors, 0)
           * ncu_limiter_share(mem_pct, busiest_unit_pct) AS saving_fraction,
       saving_fraction * total_ns AS impact_ns
FROM ncu_kernel_sol;

-- Shared-memory bank conflicts: extra wavefronts of shared loads and stores (l1tex__data_bank_conflicts_*,
-- MemoryWorkloadAnalysis tables, full set). Columns: bank_conflicts, shared_wavefronts, conflict_pct (conflicts
-- over all shared load/store wavefronts), l1_pct; conflicts_can_limit: false for a kernel whose tensor pipe is at
-- ≥ 60 % (a GEMM's epilogue stores conflict a little; its time is set by the tensor pipe) or whose grid does not
-- fill the GPU; not_limiting_reason; saving_fraction (conflict share × L1/TEX's limiter share), impact_ns.
CREATE OR REPLACE TEMP VIEW ncu_bank_conflicts AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_unit, tensor_pct, l1_pct, bank_conflicts, shared_wavefronts,
       100.0 * bank_conflicts / nullif(shared_wavefronts, 0) AS conflict_pct,
       CASE WHEN coalesce(tensor_pct, 0) >= 60 THEN 'the tensor pipe is at ' || ncu_pct_text(tensor_pct) || '% of peak'
            WHEN small_grid THEN 'the grid (' || grid_size::BIGINT || ' blocks) does not fill the GPU' END
           AS not_limiting_reason,
       not_limiting_reason IS NULL AS conflicts_can_limit,
       bank_conflicts / nullif(shared_wavefronts, 0) * ncu_limiter_share(l1_pct, busiest_unit_pct) AS saving_fraction,
       saving_fraction * total_ns AS impact_ns
FROM ncu_kernel_sol;
