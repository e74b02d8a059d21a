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
from tracedoc.report_tables import ReportTable
from tracedoc.store import Store
from tracedoc.units import fmt_bytes, report_number

# Entries of the memory section: a trace whose memory events name thousands of device ids (a corrupt or hostile
# one) would otherwise take five queries per device.
MAX_DEVICES = 64

MEMORY_METRICS: dict[str, ReportTable] = {
    "memory_steps": ReportTable("memory.timeline", "memory_report_steps", "rank, device, step"),
    "memory_curve": ReportTable("memory.timeline", "memory_report_curve", "rank, device, t_ns", ("t_ns",)),
    "memory_oom_points": ReportTable("memory.oom", "memory_report_oom_points", "rank, device, ts_ns", ("ts_ns",)),
    "memory_peak_sites": ReportTable("memory.peak", "memory_report_peak_sites", "rank, device, bytes DESC"),
    "memory_growth_sites": ReportTable("memory.growth", "memory_report_growth_sites",
                                       "rank, device, bytes_per_step DESC"),
}


def memory_section(store: Store) -> list[dict[str, Any]]:
    """The report's ``memory`` entries (empty when no input holds allocator data): those of the first MAX_DEVICES
    devices (devices_left_out counts the others)."""
    if not store.applies("memory.timeline"):
        return []
    for module in ("memory.growth", "memory.peak", "memory.fragmentation", "memory.oom"):
        store.include(module)
    entries: list[dict[str, Any]] = []
    for d in store.query(f"""
            SELECT d.*, g.growth_bytes_per_step, g.r2, g.steady_steps, g.steps_to_oom
            FROM memory_by_device d LEFT JOIN memory_growth g USING (source_id, device)
            ORDER BY d.rank, d.device, d.source_id LIMIT {MAX_DEVICES:d}"""):
        key = [d["source_id"], d["device"]]
        sites = store.query("SELECT site, allocations, bytes FROM memory_peak_sites WHERE source_id = ? AND "
                            "device = ? ORDER BY bytes DESC, site LIMIT 5", key)
        roles = store.query("SELECT role, bytes, allocations FROM memory_peak_roles WHERE source_id = ? AND "
                            "device = ? ORDER BY bytes DESC, role", key) if d["basis"] == "allocator" else []
        growth = store.query("SELECT site, op, bytes_per_step, allocations FROM memory_growth_sites WHERE "
                             "source_id = ? AND device = ? ORDER BY bytes_per_step DESC, site LIMIT 5", key)
        frag = store.query("SELECT * EXCLUDE (source_id, rank, device) FROM memory_fragmentation WHERE source_id = ? "
                           "AND device = ?", key)
        ooms = store.query("SELECT step, requested_bytes, allocated_bytes, reserved_bytes, device_free_bytes, site, "
                           "op FROM memory_ooms WHERE source_id = ? AND device = ? ORDER BY ts_ns", key)
        entries.append(_numbers({
            "rank": d["rank"], "device": d["device"], "basis": d["basis"], "capacity_bytes": d["capacity_bytes"],
            "peak_bytes": d["peak_bytes"], "peak_at": {"step": d["peak_step"], "op": d["peak_op"],
                                                       "site": d["peak_site"]},
            "reserved_bytes": d["reserved_end"], "reserved_peak_bytes": d["reserved_peak_bytes"],
            "allocated_start_bytes": d["allocated_start"], "allocated_end_bytes": d["allocated_end"],
            "growth_bytes_per_step": d["growth_bytes_per_step"], "growth_r2": d["r2"],
            "steady_steps": d["steady_steps"], "steps_to_oom": d["steps_to_oom"],
            "top_sites": [{"site": s["site"], "bytes": s["bytes"], "allocations": s["allocations"]} for s in sites],
            "by_role": roles, "growth_sites": growth, "fragmentation": frag[0] if frag else None, "ooms": ooms,
        }))
    # snapshots given without a trace of their run and without history (with one, they are entries above)
    for s in store.query(f"""
            SELECT f.* FROM memory_fragmentation f WHERE f.source_id IS NULL ORDER BY f.snapshot_id, f.device
            LIMIT {MAX_DEVICES - len(entries):d}"""):
        sites = store.query("SELECT site, blocks, bytes FROM memory_snapshot_sites WHERE snapshot_id = ? "
                            "AND device = ? ORDER BY bytes DESC, site LIMIT 5", [s["snapshot_id"], s["device"]])
        ooms = store.query("SELECT requested_bytes, device_free_bytes, site FROM memory_ooms WHERE snapshot_id = ? "
                           "AND device = ? AND source_id IS NULL", [s["snapshot_id"], s["device"]])
        entries.append(_numbers({
            "rank": None, "device": s["device"], "basis": "allocator", "capacity_bytes": None, "peak_bytes": None,
            "peak_at": None,
            "reserved_bytes": s["snapshot_reserved_bytes"], "allocated_end_bytes": s["snapshot_allocated_bytes"],
            "growth_bytes_per_step": None,
            "top_sites": [{"site": r["site"], "bytes": r["bytes"], "allocations": r["blocks"]} for r in sites],
            "fragmentation": {k: v for k, v in s.items() if k not in ("source_id", "rank", "device")}, "ooms": ooms,
        }))
    return entries


def devices_left_out(store: Store) -> int:
    """How many devices with allocator data the memory section leaves out (beyond its first MAX_DEVICES)."""
    if not store.applies("memory.timeline"):
        return 0
    shown = store.scalar("SELECT count(*) FROM memory_by_device") + store.scalar(
        "SELECT count(*) FROM memory_fragmentation WHERE source_id IS NULL")
    return max(0, int(shown) - MAX_DEVICES)


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


def _numbers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    number = report_number(value)
    return int(number) if isinstance(number, float) and number.is_integer() and abs(number) >= 1 else number
