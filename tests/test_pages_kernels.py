"""Kernel names on the Kernels and ncu pages: shortened, yet never two distinct kernels under one name; and the
top kernels' share labelled as what it is (a share of the kernels' summed time)."""

from __future__ import annotations

import json
from collections import defaultdict
from html import unescape
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.api import open_store
from tracedoc.ingest import discover
from tracedoc.pages import kernels, ncu
from tracedoc.pages.fragments import Html
from tracedoc.pages.names import kernel_labels, kernel_short
from tracedoc.report import Report


def shown_names(table: Html) -> list[str]:
    """The kernel cells of a table as shown (the text, not the full name on hover)."""
    import re

    return [unescape(m) for m in re.findall(r'<td class="name"(?: title="[^"]*")?>([^<]*)</td>', table.markup)]


def test_distinct_kernels_keep_distinct_names_on_the_kernels_page() -> None:
    """nsys-nvfuser-h200 runs six instances of vectorized_elementwise_kernel among its top kernels; each keeps the
    functor that tells it apart, in the table and on the chart's axis, and stays shorter than its full name."""
    report = analyze([SAMPLES / "nsys-nvfuser-h200"])
    top = report.metrics["top_kernels"]
    instances = [r["name"] for r in top if "vectorized_elementwise_kernel<" in r["name"]]
    assert len(set(instances)) >= 5
    [_, section] = kernels.sections(report)
    chart, table = section.items
    shown = shown_names(table)
    assert len(shown) == len(top) and len(set(shown)) == len({r["name"] for r in top})
    for name, text in zip((r["name"] for r in top), shown):
        assert len(text) <= len(name)
    axis = [label for _, label in chart.y_range.factors]
    assert len(set(label.split(". ", 1)[1] for label in axis)) == len({r["name"] for r in top})
    for name in instances:  # the functor that tells each instance apart is in its label
        functor = name.split(", ")[1].split("<")[0].split("::")[-1]
        assert functor in kernel_labels(instances)[name]


@pytest.mark.parametrize("limit", [kernels.TABLE_CHARS, kernels.CHART_CHARS])
def test_no_gallery_report_shows_two_kernels_under_one_name(limit: int) -> None:
    """Every sample's top kernels (the committed gallery's reports), per rank: as many names shown as kernels."""
    checked = 0
    for path in sorted((ROOT / "reports").glob("*.json")):
        by_rank: dict[int, set[str]] = defaultdict(set)
        for row in json.loads(path.read_text())["metrics"].get("top_kernels") or []:
            by_rank[row["rank"]].add(row["name"])
        for names in by_rank.values():
            labels = kernel_labels(names, limit)
            assert len(set(labels.values())) == len(names), path.name
            checked += any(kernel_short(n, limit) == kernel_short(m, limit) for n in names for m in names if n != m)
    assert checked  # some of them would have collapsed into one name


def test_top_kernels_share_is_a_share_of_kernel_time(tmp_path: Path) -> None:
    """The column reads '% of kernel time', and that is what it holds: each kernel's time over the summed time of
    every kernel of its rank in the analysed window (nsys-torch-h100; not its share of the wall time)."""
    report = analyze([SAMPLES / "nsys-torch-h100"])
    [_, section] = kernels.sections(report)
    _, table = section.items
    assert f'title="{kernels.SHARE_HELP}">{kernels.SHARE}</th>' in table.markup.replace("&#x27;", "'")
    assert "% of GPU time" not in table.markup
    store, _ = open_store(discover([SAMPLES / "nsys-torch-h100"]), tmp_path / "cache")
    with store:
        store.include("gpu.busy")
        total_ms = store.con.execute("SELECT sum(dur_ns) / 1e6 FROM gpu_work WHERE kind = 'kernel'").fetchone()[0]
    assert report.summary["wall_ms"] > total_ms  # a share of the wall time would be smaller
    for row in report.metrics["top_kernels"]:
        assert row["share_pct"] == pytest.approx(100 * row["total_ms"] / total_ms, abs=0.01)


def test_ncu_kernels_of_one_function_are_told_apart() -> None:
    """ncu-h200-torch-csv profiles two vectorized_elementwise_kernel instances at the same grid and block: the ncu
    page keys them by their demangled names, so each has its own row in the charts (no duplicate factors, which
    kept the charts from drawing) and its own name in the table."""
    report = analyze([SAMPLES / "ncu-h200-torch-csv"])
    rows = report.metrics["ncu_kernels"]
    same = [r for r in rows if r["kernel"] == "vectorized_elementwise_kernel"]
    assert len(same) == 2 and same[0]["grid"] == same[1]["grid"] and same[0]["block"] == same[1]["block"]
    assert same[0]["demangled"] != same[1]["demangled"]
    sections = {s.title: s for s in ncu.sections(report)}
    heatmap = sections["Speed of light and occupancy"].items[0]
    assert len(set(heatmap.y_range.factors)) == len(heatmap.y_range.factors) == len(rows)
    stalls = sections["Warp stall reasons"].items[0]
    assert len(set(stalls.y_range.factors)) == len(stalls.y_range.factors)
    shown = shown_names(sections["Kernels"].items[0])
    assert len(set(shown)) == len(rows)


def test_a_saved_report_without_demangled_names_still_draws() -> None:
    """An edited copy of the committed ncu-h800-sglang report with the demangled names taken out (as a report saved
    before they were carried): the page keys kernels by function name, as before."""
    data = json.loads((ROOT / "reports" / "ncu-h800-sglang.json").read_text())
    for table in data["metrics"].values():
        for row in table if isinstance(table, list) else []:
            if isinstance(row, dict):
                row.pop("demangled", None)
    report = Report.from_dict({"tracedoc": "0", **data})
    titles = [s.title for s in ncu.sections(report)]
    assert "Roofline" in titles and "Kernels" in titles


def test_an_elementwise_kernel_keeps_its_functor() -> None:
    """ddp-straggler's copy kernel: a 600-character name whose template arguments run past any limit keeps the
    functor that says what it does (direct_copy_kernel_cuda's lambda) in the table and on the chart, not only
    'unrolled_elementwise_kernel<…>(…)'."""
    report = analyze([SAMPLES / "ddp-straggler"])
    [name] = {r["name"] for r in report.metrics["top_kernels"] if "unrolled_elementwise_kernel" in r["name"]}
    sections = kernels.sections(report)
    top = next(s for s in sections if s.title == "Top kernels")
    table = unescape(next(i for i in top.items if isinstance(i, Html)).markup)
    chart = next(i for i in top.items if not isinstance(i, Html))
    expected = "unrolled_elementwise_kernel<direct_copy_kernel_cuda(…)::lambda(float), …>(…)"
    assert f">{expected}</td>" in table
    assert any(label.endswith(expected) for _, label in chart.renderers[0].data_source.data["y"])
    assert kernel_short(name) == expected


def test_a_long_plain_kernel_name_is_cut_on_the_chart() -> None:
    """conv-step (saved report): its tenth kernel, sm90_xmma_wgrad_…_kernel__5x_cudnn (151 characters, no template
    for kernel_short to shorten), once widened the chart's axis until the bars had a fifth of its width; on the
    chart it is cut in the middle, both ends kept, and every label fits the chart's length."""
    from tracedoc.pages import kernels
    from tracedoc.saved import read_report
    report = read_report(ROOT / "reports" / "conv-step.json")
    top = report.metrics["top_kernels"]
    long_name = next(r["name"] for r in top if r["name"].startswith("sm90_xmma_wgrad"))
    assert len(long_name) > kernels.CHART_CHARS + 50
    labels = [label for _, label in kernels.top_kernels_chart(top).y_range.factors]
    assert all(len(label.split(". ", 1)[1]) <= kernels.CHART_CHARS for label in labels), labels
    cut = next(label for label in labels if label.split(". ", 1)[1].startswith("sm90_xmma_wgrad"))
    assert "…" in cut and cut.endswith(long_name[-12:])
