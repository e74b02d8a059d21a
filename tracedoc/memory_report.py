"""The report's ``memory`` section and memory tables (``metrics``), from the memory analyses (analyses/memory).

One entry per GPU with allocator events in a trace or in the history of a snapshot given alone (or per device of a
snapshot given alone without history), with what its
figures count (``basis``: 'allocator', the caching allocator's tensors and reserve; 'cuda', memory taken from CUDA,
from Nsight Systems' CUDA memory events): the curve summarised
(allocated at the start and end, reserved), the peak and where it happened (step, operator, site), the growth per
steady step and the sites behind it, what is live at the peak by site and by role (``by_role``: parameters, gradients,
optimizer state, activations, other; memory.peak says how a role is read), fragmentation, and out-of-memory
failures.
Bytes throughout; a figure the inputs cannot give is None.
"""

from __future__ import annotations

from typing import Any

from tracedoc.report import Finding
from tracedoc.report_tables import MEMORY
from tracedoc.store import Store
from tracedoc.units import fmt_bytes

# Entries of the memory section: a trace whose memory events name thousands of device ids (a corrupt or hostile
# one) would otherwise fill the report with them.
MAX_DEVICES = 64


def first_devices(rows: list[dict[str, Any]], summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The memory section's presenter (pipeline.PRESENTERS): the entries of the first MAX_DEVICES devices
    (devices_left_out counts the others)."""
    return rows[:MAX_DEVICES]


def devices_left_out(store: Store, shown: int) -> int:
    """How many devices with allocator data the memory section leaves out (beyond its first MAX_DEVICES), given
    the ``shown`` entries it holds: the rows of its views (report_tables.MEMORY) past those."""
    if shown < MAX_DEVICES:
        return 0
    total = sum(int(store.scalar(f"SELECT count(*) FROM {table.view}")) for table in MEMORY
                if store.applies(table.module))
    return max(0, total - MAX_DEVICES)


def memory_headline(entries: list[dict[str, Any]], findings: list[Finding]) -> str | None:
    """The headline of a memory-only input (a snapshot): per GPU, the failure (the request, its step, whether a
    per-process cap stopped it) and the leak (bytes more per step) the rules found, else the peak (or, without a
    history, what was reserved when the snapshot was dumped); None without memory data."""
    parts = []
    for m in entries:
        said = []
        for f in findings:
            if f.scope.device != m["device"] or f.scope.rank != m["rank"]:
                continue
            if f.rule == "oom":
                said.append(f"out of memory: a {fmt_bytes(f.impact_bytes or 0)} request failed"
                            + (f" in step {f.scope.step}" if f.scope.step is not None else "")
                            + (" under a per-process cap" if "memory cap stopped it" in f.message else ""))
            elif f.rule == "memory-leak":
                said.append(f"{fmt_bytes(f.impact_bytes or 0)} more held after every step")
        if not said:
            said.append(f"peak {fmt_bytes(m['peak_bytes'])} allocated" if m.get("peak_bytes") is not None else
                        f"{fmt_bytes(m.get('reserved_bytes') or 0)} reserved when dumped")
        parts.append(f"GPU {m['device']}: " + ", ".join(said))
    return "; ".join(parts) or None
