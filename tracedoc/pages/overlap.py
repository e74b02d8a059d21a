"""Overlap page: communication against compute on each rank's GPU (metrics comm_overlap): how much of the
communication ran hidden behind compute and how much was exposed. Overlap % = |comm ∩ compute| / |comm|."""

from __future__ import annotations

from tracedoc.formats import ALLOCATOR_SNAPSHOTS, HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.pages import empty, waits
from tracedoc.pages.charts import CATEGORY_COLORS, Section, stacked_hbar_chart
from tracedoc.pages.fragments import Column, measured, table_html
from tracedoc.report import Report
from tracedoc.report_tables import METRICS

_OVERLAP = METRICS["comm_overlap"].measure  # what each column of the table measures

TITLE = "Overlap"
ROUTE = "overlap"

# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    TIMELINE: "No communication kernels (NCCL) in these traces, so nothing to overlap: a run on one GPU, or one whose "
              "collectives the profiler did not record.",
    KERNEL_PROFILE: "An Nsight Compute profile runs each kernel alone, so communication and compute cannot be set "
                    "against each other: that needs a timeline (PyTorch profiler traces or Nsight Systems reports).",
    HANG_DUMPS: "NCCL flight-recorder dumps say which collectives ran, not when the GPU computed beside them: overlap "
                "needs a timeline (PyTorch profiler traces or Nsight Systems reports).",
    HEALTH: "GPU telemetry holds no kernels, so nothing to overlap: that needs a timeline (PyTorch profiler traces or "
            "Nsight Systems reports).",
    ALLOCATOR_SNAPSHOTS: "An allocator snapshot holds no kernels, so nothing to overlap: that needs a timeline "
                         "(PyTorch profiler traces or Nsight Systems reports).",
    empty.OTHER: "No communication kernels (NCCL) in these inputs, so nothing to overlap.",
}

COLUMNS = [Column("rank", "rank"), Column("device", "device"),
           measured("compute_ms", "compute ms", _OVERLAP("compute_ms")),
           measured("comm_ms", "communication ms", _OVERLAP("comm_ms")),
           measured("overlap_ms", "hidden ms", _OVERLAP("overlap_ms")),
           measured("exposed_comm_ms", "exposed ms", _OVERLAP("exposed_comm_ms"),
                  help="communication with no compute beside it: the transfer and the waiting for later ranks"),
           measured("overlap_pct", "overlap %", _OVERLAP("overlap_pct"))]


def has_data(report: Report) -> bool:
    """Whether the report holds communication time on some rank."""
    return any((r.get("comm_ms") or 0) > 0 for r in report.metrics.get("comm_overlap") or [])


def sections(report: Report) -> list[Section]:
    rows = [r for r in report.metrics.get("comm_overlap") or [] if (r["comm_ms"] or 0) > 0]
    if not has_data(report):
        return [Section("Communication and compute", empty=empty.worded(EMPTY, report))]
    low = {f.scope.rank for f in report.findings if f.rule == "low-comm-overlap"}
    labels = [f"rank {r['rank']} · GPU {r['device']}" for r in rows]
    stacks = {"compute alone": [max(float(r["compute_ms"] or 0) - float(r["overlap_ms"] or 0), 0.0) for r in rows],
              "communication hidden behind compute": [float(r["overlap_ms"] or 0) for r in rows],
              "communication exposed": [float(r["exposed_comm_ms"] or 0) for r in rows]}
    colors = [CATEGORY_COLORS["compute"], "#f2b880", CATEGORY_COLORS["communication"]]
    return [Section("Communication and compute",
                    note="GPU busy time per rank and device: compute alone, communication running under compute, "
                         "and communication nothing hid (exposed). Rows of low-comm-overlap findings are marked. "
                         + waits.OVERLAP,
                    items=[stacked_hbar_chart(labels, stacks, colors, "GPU time (ms)"),
                           table_html(rows, COLUMNS, highlight=lambda r: r["rank"] in low)])]
