"""The report's ``memory`` section and memory tables (``metrics``), from the memory analyses (analyses/memory).

One entry per GPU with allocator events in a trace (or per device of a snapshot given alone), with what its
figures count (``basis``: 'allocator', the caching allocator's tensors and reserve; 'cuda', memory taken from CUDA,
from Nsight Systems' CUDA memory events): the curve summarised
(allocated at the start and end, reserved), the peak and where it happened (step, operator, site), the growth per
steady step and the sites behind it, what is live at the peak by site, fragmentation, and out-of-memory failures.
Bytes throughout; a figure the inputs cannot give is None.
"""

from __future__ import annotations

from typing import Any

from tracedoc.report_tables import ReportTable, report_rows
from tracedoc.store import Store

MEMORY_METRICS: dict[str, ReportTable] = {
    "memory_steps": ReportTable("memory.timeline", "memory_report_steps", "rank, device, step"),
    "memory_curve": ReportTable("memory.timeline", "memory_report_curve", "rank, device, t_ns", ("t_ns",)),
    "memory_oom_points": ReportTable("memory.oom", "memory_report_oom_points", "rank, device, ts_ns", ("ts_ns",)),
    "memory_peak_sites": ReportTable("memory.peak", "memory_report_peak_sites", "rank, device, bytes DESC, site"),
    "memory_growth_sites": ReportTable("memory.growth", "memory_report_growth_sites",
                                       "rank, device, bytes_per_step DESC"),
}


# The report's ``memory`` section (analyses/memory/report.sql): the GPUs of traces, then the devices of snapshots
# given alone. Bytes as whole numbers.
MEMORY_SECTION: tuple[ReportTable, ...] = (
    ReportTable("memory.report", "memory_report_devices", "rank, device, source_id", ("source_id",), True),
    ReportTable("memory.report", "memory_report_snapshots", "snapshot_id, device", ("snapshot_id",), True),
)


def memory_section(store: Store) -> list[dict[str, Any]]:
    """The report's ``memory`` entries (empty when no input holds allocator data)."""
    if not store.applies("memory.report"):
        return []
    return [row for table in MEMORY_SECTION for row in report_rows(store, table)]
