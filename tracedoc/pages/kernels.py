"""Kernels page: GPU time by category per rank, and each rank's top kernels (metrics gpu_time_by_category and
top_kernels)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tracedoc.formats import ALLOCATOR_SNAPSHOTS, HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.pages import empty
from tracedoc.pages.charts import CATEGORY_COLORS, Section, hbar_chart, stacked_hbar_chart
from tracedoc.pages.fragments import Column, measured, table_html
from tracedoc.pages.names import kernel_labels, middle_cut
from tracedoc.report import Report
from tracedoc.report_tables import METRICS

_KERNEL = METRICS["top_kernels"].measure  # what each column of the table measures

TITLE = "Kernels"
ROUTE = "kernels"

# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    TIMELINE: "No GPU kernels in these traces: the profiler recorded the host only (a CPU-only run, or CUDA activity "
              "not enabled in the profiler).",
    KERNEL_PROFILE: "An Nsight Compute profile measures each kernel on its own: its kernels are on the ncu page, with "
                    "their speed of light, warp stalls and roofline. This page charts the kernels of a timeline "
                    "(PyTorch profiler traces, Nsight Systems reports).",
    HANG_DUMPS: "NCCL flight-recorder dumps hold the collectives each rank issued, not its GPU kernels: see the Hang "
                "page. This page charts the kernels of a timeline (PyTorch profiler traces, Nsight Systems reports).",
    HEALTH: "GPU telemetry holds clocks, power and temperatures, not kernels. This page charts the kernels of a "
            "timeline (PyTorch profiler traces, Nsight Systems reports).",
    ALLOCATOR_SNAPSHOTS: "An allocator snapshot holds the caching allocator's history, not the GPU's kernels: see the "
                         "Memory page. This page charts the kernels of a timeline (PyTorch profiler traces, Nsight "
                         "Systems reports).",
    empty.OTHER: "No GPU kernels in these inputs.",
}

MAX_RANKS = 8
TABLE_CHARS, CHART_CHARS = 80, 76  # kernel names shortened to these lengths where they can be
SHARE = "% of kernel time"
SHARE_HELP = ("the kernel's share of the summed duration of every kernel its rank ran in the analysed window "
              "(kernels on several streams add up), not of the wall time")


def top_columns(labels: dict[str, str]) -> list[Column]:
    """The top kernels' table: each name shortened as ``labels`` says (the full name on hover)."""
    return [Column("rank", "rank"),
            Column("name", "kernel", wide=True, abbreviate=lambda name: labels.get(name, name)),
            Column("category", "category"),
            measured("launch_count", "launches", _KERNEL("launch_count")),
            measured("total_ms", "total ms", _KERNEL("total_ms"), 3),
            measured("mean_us", "mean µs", _KERNEL("mean_us")),
            measured("share_pct", SHARE, _KERNEL("share_pct"), help=SHARE_HELP)]


def has_data(report: Report) -> bool:
    """Whether the report holds GPU kernels of a timeline."""
    metrics = report.metrics
    return bool(metrics.get("gpu_time_by_category") or metrics.get("top_kernels"))


def sections(report: Report) -> list[Section]:
    by_category = report.metrics.get("gpu_time_by_category") or []
    top = report.metrics.get("top_kernels") or []
    if not has_data(report):
        return [Section("Kernels", empty=empty.worded(EMPTY, report))]
    ranks = sorted({r["rank"] for r in top})
    shown = [r for r in top if r["rank"] in ranks[:MAX_RANKS]]
    left = f" Charted: the first {MAX_RANKS} of {len(ranks)} ranks; the table lists all." \
        if len(ranks) > MAX_RANKS else ""
    return [Section("GPU time by category", note="ms of GPU activity per rank, by kind of work.",
                    items=[category_chart(by_category)]),
            Section("Top kernels", note="The kernels with the most GPU time on each rank. Names are shortened: "
                                        "namespaces, casts and parameters left out, nested template arguments "
                                        "written '<…>', and where two kernels would read alike, only the "
                                        "template arguments that tell them apart kept; the full name is on hover. "
                                        f"{SHARE}: {SHARE_HELP}." + left,
                    items=[top_kernels_chart(shown),
                           table_html(top, top_columns(kernel_labels((r["name"] for r in top), TABLE_CHARS)))])]


def category_chart(rows: list[dict[str, Any]]) -> Any:
    """One stacked bar per rank: ms of GPU time in each category."""
    per_rank: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        per_rank[f"rank {r['rank']}"][r["category"]] = float(r["total_ms"] or 0)
    categories = [c for c in CATEGORY_COLORS if any(c in v for v in per_rank.values())]
    categories += sorted({c for v in per_rank.values() for c in v} - set(categories))
    stacks = {c: [per_rank[rank].get(c, 0.0) for rank in per_rank] for c in categories}
    return stacked_hbar_chart(list(per_rank), stacks, [CATEGORY_COLORS.get(c, "#999999") for c in categories],
                              "GPU time (ms)")


def top_kernels_chart(rows: list[dict[str, Any]]) -> Any:
    """Bars of total time per kernel, grouped by rank, coloured by category."""
    counters: dict[int, int] = defaultdict(int)
    labels = kernel_labels((r["name"] for r in rows), CHART_CHARS)
    factors = []
    for r in rows:
        counters[r["rank"]] += 1
        factors.append((f"rank {r['rank']}", f"{counters[r['rank']]}. {middle_cut(labels[r['name']], CHART_CHARS)}"))
    return hbar_chart(factors, [float(r["total_ms"] or 0) for r in rows],
                      [CATEGORY_COLORS.get(r["category"], "#999999") for r in rows], "GPU time (ms)",
                      [("kernel", "@name"), ("category", "@category"), ("total", "@value{0,0.000} ms"),
                       ("launches", "@launches"), ("of kernel time", "@share{0.0}%")],
                      extra={"name": [r["name"] for r in rows], "category": [r["category"] for r in rows],
                             "launches": [r["launch_count"] for r in rows],
                             "share": [r["share_pct"] for r in rows]})
