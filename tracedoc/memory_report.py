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

from tracedoc.report_tables import MEMORY, METRICS, Section, section_rows
from tracedoc.store import Store

# The memory tables of ``Report.metrics`` (declared with the others in tracedoc.report_tables).
MEMORY_METRICS = {name: table for name, table in METRICS.items() if name.startswith("memory_")}


def memory_section(store: Store) -> list[dict[str, Any]]:
    """The report's ``memory`` entries (empty when no input holds allocator data): its views' rows
    (analyses/memory/report.sql)."""
    return section_rows(store, Section("memory", MEMORY))
