"""Kernels page: GPU time by category per rank, and each rank's top kernels (metrics gpu_time_by_category and
top_kernels)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tracedoc.pages.charts import CATEGORY_COLORS, Section, hbar_chart, kernel_short, short, stacked_hbar_chart
from tracedoc.pages.fragments import Column, number, table_html
from tracedoc.report import Report

TITLE = "Kernels"
ROUTE = "kernels"
MAX_RANKS = 8

TOP_COLUMNS = [Column("rank", "rank"), Column("name", "kernel", wide=True, abbreviate=kernel_short),
               Column("category", "category"),
               Column("launch_count", "launches", number(), numeric=True),
               Column("total_ms", "total ms", number(3), numeric=True),
               Column("mean_us", "mean µs", number(1), numeric=True),
               Column("share_pct", "% of GPU time", number(1), numeric=True)]


def sections(report: Report) -> list[Section]:
    by_category = report.metrics.get("gpu_time_by_category") or []
    top = report.metrics.get("top_kernels") or []
    if not by_category and not top:
        return [Section("Kernels", empty="No GPU activity in these inputs: kernels come from PyTorch profiler traces "
                                         "and Nsight Systems reports (Nsight Compute kernels are on the ncu page).")]
    ranks = sorted({r["rank"] for r in top})
    shown = [r for r in top if r["rank"] in ranks[:MAX_RANKS]]
    left = f" Charted: the first {MAX_RANKS} of {len(ranks)} ranks; the table lists all." \
        if len(ranks) > MAX_RANKS else ""
    return [Section("GPU time by category", note="ms of GPU activity per rank, by kind of work.",
                    items=[category_chart(by_category)]),
            Section("Top kernels", note="The kernels with the most GPU time on each rank; template arguments and "
                                        "parameters are shortened to '<…>' and '(…)', the full name is on hover."
                                        + left,
                    items=[top_kernels_chart(shown), table_html(top, TOP_COLUMNS)])]


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
    factors = []
    for r in rows:
        counters[r["rank"]] += 1
        factors.append((f"rank {r['rank']}", f"{counters[r['rank']]}. {short(kernel_short(r['name']))}"))
    return hbar_chart(factors, [float(r["total_ms"] or 0) for r in rows],
                      [CATEGORY_COLORS.get(r["category"], "#999999") for r in rows], "GPU time (ms)",
                      [("kernel", "@name"), ("category", "@category"), ("total", "@value{0,0.000} ms"),
                       ("launches", "@launches"), ("share", "@share{0.0}%")],
                      extra={"name": [r["name"] for r in rows], "category": [r["category"] for r in rows],
                             "launches": [r["launch_count"] for r in rows],
                             "share": [r["share_pct"] for r in rows]})
