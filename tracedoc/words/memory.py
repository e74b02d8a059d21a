"""The report's Memory section in words, one line per fact, for the text and Markdown renderers (bytes; memory
findings' savings are bytes, never added to the time savings)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracedoc.units import fmt_bytes, fmt_pct

if TYPE_CHECKING:  # the notebook view, which tracedoc.report imports, reads this module: no import back at run time
    from tracedoc.report import Report

NOTE = ("GPU memory per device (the trace's allocator or CUDA memory events, and snapshots); savings of memory "
        "findings are bytes")


def memory_lines(report: Report) -> list[tuple[str, list[str]]]:
    """Per device: its heading and its lines."""
    return [(_heading(m), _lines(m)) for m in report.memory]


def _b(value: Any) -> str:
    return "n/a" if value is None else fmt_bytes(value)


def _heading(m: dict[str, Any]) -> str:
    where = f"rank {m['rank']}, GPU {m['device']}" if m.get("rank") is not None else f"GPU {m['device']} (snapshot)"
    return where + (f" of {_b(m['capacity_bytes'])}" if m.get("capacity_bytes") else "")


def _where(at: dict[str, Any], *keys: str) -> str:
    """Where the peak was: its step, then the ``keys`` of ``at`` that are set, each once (a snapshot's operator and
    site can both be 'backward')."""
    step = f"step {at['step']}" if at.get("step") is not None else None
    return ", ".join(dict.fromkeys(p for p in (step, *(at.get(k) for k in keys)) if p))


def _lines(m: dict[str, Any]) -> list[str]:
    out = []
    if m.get("basis") == "cuda" and m.get("peak_bytes") is not None:
        at = m.get("peak_at") or {}
        where = _where(at, "op")
        out.append(f"peak taken from CUDA {_b(m['peak_bytes'])}" + (f" ({where})" if where else "")
                   + f"; {_b(m.get('allocated_start_bytes'))} → {_b(m.get('allocated_end_bytes'))} over the trace "
                   "(CUDA's memory events: a caching allocator's reserve, not its tensors)")
    elif m.get("peak_bytes") is not None:
        at = m.get("peak_at") or {}
        where = _where(at, "op", "site")
        out.append(f"peak allocated {_b(m['peak_bytes'])}" + (f" ({where})" if where else "")
                   + f"; reserved up to {_b(m.get('reserved_peak_bytes'))}; allocated "
                   f"{_b(m.get('allocated_start_bytes'))} → {_b(m.get('allocated_end_bytes'))} over the trace")
    else:
        out.append(f"reserved {_b(m.get('reserved_bytes'))}, allocated {_b(m.get('allocated_end_bytes'))} "
                   "when the snapshot was taken")
    if m.get("growth_bytes_per_step") is not None:
        growth = f"growth per steady step {_b(m['growth_bytes_per_step'])} (r² {m.get('growth_r2') or 0:.2f}, " \
                 f"{m.get('steady_steps')} steps)"
        if m.get("steps_to_oom") is not None:
            growth += f", full in {m['steps_to_oom']:,} more steps at this rate"
        sites = "; ".join(f"{s['site']} {_b(s['bytes_per_step'])}/step" for s in m.get("growth_sites") or [])
        out.append(growth + (f"; held by {sites}" if sites else ""))
    if m.get("top_sites"):
        label = "live at the peak" if m.get("peak_bytes") is not None else "live in the snapshot"
        out.append(f"{label}: " + "; ".join(f"{s['site']} {_b(s['bytes'])}" for s in m["top_sites"]))
    if m.get("by_role"):
        out.append("at the peak by role: " + "; ".join(f"{r['role']} {_b(r['bytes'])}" for r in m["by_role"]))
    frag = m.get("fragmentation") or {}
    if frag.get("stranded_bytes") is not None:
        out.append(f"free inside segments that hold live tensors {_b(frag['stranded_bytes'])} "
                   f"({fmt_pct(frag.get('stranded_pct') or 0, 0)} of reserved), largest hole "
                   f"{_b(frag.get('largest_stranded_bytes'))}")
    elif frag.get("trace_unused_bytes") is not None and m.get("basis") != "cuda":
        out.append(f"reserved but unallocated at the allocator's peak {_b(frag['trace_unused_bytes'])}")
    for o in m.get("ooms") or []:
        out.append(f"out of memory: {_b(o.get('requested_bytes'))} requested"
                   + (f" in step {o['step']}" if o.get("step") is not None else "")
                   + (f" at {o['site']}" if o.get("site") else "")
                   + (f", {_b(o['allocated_bytes'])} allocated" if o.get("allocated_bytes") is not None else "")
                   + (f", {_b(o['device_free_bytes'])} free on the device" if o.get("device_free_bytes") is not None
                      else ""))
    return out
