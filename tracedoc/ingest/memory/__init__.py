"""Allocator snapshots: the reader (memory_snapshot), its bounded opcode machine (snapshot_pickle) and its
bulk fast path (snapshot_bulk), with the memory tables every memory source writes.
"""
