-- ncu.memory: memory access efficiency per kernel — register spills (local memory), uncoalesced global accesses
-- and shared-memory bank conflicts.
--
-- Each saving is first order: the share of the traffic that is waste, times the share of the duration the memory
-- system is busy (mem_pct, or L1/TEX throughput for shared memory). Sectors are 32 bytes. Percentages in %,
-- sizes in bytes, times in ns. Quantities whose section was not collected are NULL (see ncu.coverage).
-- Spills and uncoalesced accesses can be a kernel's primary finding (ncu.primary), so the share of waste that
-- makes them a finding is a constant here, not a rule threshold.
-- include: ncu.sol

-- ncu_min_waste_pct(): wasted traffic (local-memory or excess sectors) at or above this % of the traffic is a
-- finding.
CREATE OR REPLACE TEMP MACRO ncu_min_waste_pct() AS 10.0;

-- Register spills: L1 sectors of local-memory loads and stores (register spills, or per-thread arrays the
-- compiler could not keep in registers), MemoryWorkloadAnalysis tables (full set). Columns: local_bytes,
-- local_traffic_pct (local sectors over local + global sectors), spills (local_traffic_pct ≥ ncu_min_waste_pct()),
-- registers_per_thread, saving_fraction (local share × mem_pct/100), impact_ns.
CREATE OR REPLACE TEMP VIEW ncu_register_spills AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_unit, mem_pct, registers_per_thread, local_sectors * 32 AS local_bytes,
       100.0 * local_sectors / nullif(local_sectors + global_sectors, 0) AS local_traffic_pct,
       coalesce(local_traffic_pct >= ncu_min_waste_pct(), false) AS spills,
       local_sectors / nullif(local_sectors + global_sectors, 0) * mem_pct / 100.0 AS saving_fraction,
       local_sectors / nullif(local_sectors + global_sectors, 0) * mem_pct / 100.0 * total_ns AS impact_ns
FROM ncu_kernel_sol;

-- Uncoalesced global accesses: L2 sectors the global loads and stores need as written vs at perfect coalescing
-- (memory_l2_theoretical_sectors_global[_ideal], SourceCounters, detailed set). Columns: excess_bytes,
-- excess_pct (excess sectors over the sectors needed), uncoalesced (excess_pct ≥ ncu_min_waste_pct()),
-- saving_fraction (excess share × mem_pct/100), impact_ns.
CREATE OR REPLACE TEMP VIEW ncu_uncoalesced_access AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_unit, mem_pct, theoretical_sectors, ideal_sectors,
       (theoretical_sectors - ideal_sectors) * 32 AS excess_bytes,
       100.0 * (theoretical_sectors - ideal_sectors) / nullif(theoretical_sectors, 0) AS excess_pct,
       coalesce(excess_pct >= ncu_min_waste_pct(), false) AS uncoalesced,
       (theoretical_sectors - ideal_sectors) / nullif(theoretical_sectors, 0) * mem_pct / 100.0 AS saving_fraction,
       (theoretical_sectors - ideal_sectors) / nullif(theoretical_sectors, 0) * mem_pct / 100.0 * total_ns
           AS impact_ns
FROM ncu_kernel_sol;

-- Shared-memory bank conflicts: extra wavefronts of shared loads and stores (l1tex__data_bank_conflicts_*,
-- MemoryWorkloadAnalysis tables, full set). Columns: bank_conflicts, shared_wavefronts, conflict_pct (conflicts
-- over all shared load/store wavefronts), l1_pct; conflicts_can_limit: false for a kernel whose tensor pipe is at
-- ≥ 60 % (a GEMM's epilogue stores conflict a little; its time is set by the tensor pipe) or whose grid does not
-- fill the GPU; not_limiting_reason; saving_fraction (conflict share × l1_pct/100), impact_ns.
CREATE OR REPLACE TEMP VIEW ncu_bank_conflicts AS
SELECT source_id, rank, name, demangled_name, grid, block, launches, total_ns, launch_ids, kernel_class,
       busiest_unit, tensor_pct, l1_pct, bank_conflicts, shared_wavefronts,
       100.0 * bank_conflicts / nullif(shared_wavefronts, 0) AS conflict_pct,
       CASE WHEN coalesce(tensor_pct, 0) >= 60 THEN 'the tensor pipe is at ' || ncu_pct_text(tensor_pct) || '% of peak'
            WHEN small_grid THEN 'the grid (' || grid_size::BIGINT || ' blocks) does not fill the GPU' END
           AS not_limiting_reason,
       not_limiting_reason IS NULL AS conflicts_can_limit,
       bank_conflicts / nullif(shared_wavefronts, 0) * l1_pct / 100.0 AS saving_fraction,
       bank_conflicts / nullif(shared_wavefronts, 0) * l1_pct / 100.0 * total_ns AS impact_ns
FROM ncu_kernel_sol;
