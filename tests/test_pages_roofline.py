"""The ncu page's roofline (roofs told apart, kernel numbers that never overlap) and the notebook's view of a
report (each finding opens on its message and fix)."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from itertools import combinations

import pytest
from bokeh.models import Label

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.pages import ncu, roofline
from tracedoc.report import Report


def chart(sample: str) -> object:
    report = analyze([SAMPLES / sample])
    return next(s for s in ncu.sections(report) if s.title == "Roofline").items[0]


def glyphs(fig: object, kind: str) -> list:
    return [r for r in fig.renderers if r.glyph.__class__.__name__ == kind]


def test_the_roofs_are_told_apart() -> None:
    """gemm-ladder-ncu runs fp32 and bf16 tensor-core kernels on one H100: two roofs, each in its own colour and
    named on its flat part with its peak; each kernel's dot takes its roof's colour (and the dashed cuBLAS line
    keeps a colour of its own)."""
    report = analyze([SAMPLES / "gemm-ladder-ncu"])
    fig = next(s for s in ncu.sections(report) if s.title == "Roofline").items[0]
    points = report.metrics["ncu_roofline"]
    roofs = {(p["precision"], p["peak_tflop_per_s"]) for p in points}
    assert len(roofs) == 2
    lines = [r for r in glyphs(fig, "Line") if r.glyph.line_dash == []]
    colours = [r.glyph.line_color for r in lines]
    assert len(lines) == 2 and len(set(colours)) == 2 and roofline.CUBLAS_COLOR not in colours
    names = {label.text: label.text_color for label in fig.select({"type": Label})}
    by_precision = {}
    for precision, peak in roofs:
        [(text, colour)] = [(t, c) for t, c in names.items() if t.startswith(f"{precision}:")]
        assert f"{peak:,g} TFLOP/s" in text and colour in colours
        by_precision[precision] = colour
    [dots] = glyphs(fig, "Scatter")
    data = dots.data_source.data
    assert [by_precision[p] for p in data["precision"]] == data["color"]


def boxes(fig: object) -> list[tuple[float, float, float, float]]:
    """The labels' boxes on the nominal plot, from the chart's own data: where they were placed to be read."""
    [dots] = glyphs(fig, "Scatter")
    xs = dots.data_source.data["x"]
    x_range = (min(xs) / 10, max(xs) * 10)
    y_range = (fig.y_range.start, fig.y_range.end)
    [text] = glyphs(fig, "Text")
    data = text.data_source.data
    out = []
    for x, y, number, dx, dy, align in zip(data["x"], data["y"], data["number"], data["dx"], data["dy"],
                                           data["align"]):
        px, py = roofline._to_px(x, y, x_range, y_range)
        out.append(roofline._box(px + dx, py + dy, roofline.CHAR_W * len(number), align))
    return out


@pytest.mark.parametrize("sample", ["ncu-h100-gemm-sol", "ncu-h200-torch-csv", "gemm-ladder-ncu", "ncu-a40-julia"])
def test_kernel_numbers_do_not_overlap(sample: str) -> None:
    """Each kernel's number is written once, at its dot, and no two labels overlap: ncu-h100-gemm-sol's two nvjet
    GEMMs sit almost on one spot (769 and 789 FLOP/byte, 662 and 713 TFLOP/s) and share one label, '3, 4'."""
    fig = chart(sample)
    [dots] = glyphs(fig, "Scatter")
    numbers = sorted(label.split(".")[0] for label in dots.data_source.data["label"])
    [text] = glyphs(fig, "Text")
    assert sorted(n for t in text.data_source.data["number"] for n in t.split(", ")) == numbers
    placed = boxes(fig)
    assert not any(roofline._overlap(a, b) for a, b in combinations(placed, 2))
    if sample == "ncu-h100-gemm-sol":
        assert "3, 4" in text.data_source.data["number"]


def test_the_notebook_view_opens_each_finding_on_its_message_and_fix() -> None:
    """A report's rich display in a notebook: every finding a <details> line (number, severity, rule, where,
    saving, title) that opens on its message, evidence and fix, all escaped; for hang-4rank-stuck the culprit and
    what it last did are there."""
    report = analyze([SAMPLES / "hang-4rank-stuck"])
    html = report._repr_html_()
    blocks = re.findall(r"<details class=\"finding [a-z]+\">(.*?)</details>", html, re.DOTALL)
    assert len(blocks) == len(report.findings)
    for finding, block in zip(report.findings, blocks):
        summary, body = block.split("</summary>")
        assert finding.title in unescape(summary) and finding.rule in summary
        assert unescape(finding.message) in unescape(body) and unescape(finding.fix) in unescape(body)
    hang = next(f for f in report.findings if f.rule == "collective-hang")
    assert f"Rank {hang.scope.rank} is the culprit" in unescape(html)


def test_the_notebook_view_escapes_what_it_opens_on() -> None:
    """An edited copy of decode-eager's committed report whose first finding's message and fix hold markup."""
    report = Report.from_dict(json.loads((ROOT / "reports" / "decode-eager.json").read_text()))
    report.findings[0].message = "<img src=x onerror=alert(1)> idle"
    report.findings[0].fix = "<script>alert(2)</script>"
    html = report._repr_html_()
    assert "<img" not in html and "<script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt; idle" in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def efficiency_sections(sample_or_trace) -> dict[str, object]:
    from tracedoc.pages import efficiency
    return {s.title: s for s in efficiency.sections(analyze([sample_or_trace]))}


def test_efficiency_roofline_draws_ops_without_flops_and_labels_the_largest() -> None:
    """memory-fixed, a small training step recorded with shapes: its ops without FLOPs (the optimizer's _foreach_
    ops, the elementwise ops) are squares on the bandwidth side of the operators' roofline, each as high as the
    bandwidth it reaches; the largest points carry their names; the table writes a share of roofline over 100 %
    as '>100' and says why (_foreach_addcmul_ at 3.7 TB/s against a peak given as 2,000 GB/s: no op of the samples
    reads over 100 % of its datasheet's roofline since its byte model counts the gradient once)."""
    from tracedoc.options import Peaks
    from tracedoc.pages import efficiency
    report = analyze([SAMPLES / "memory-fixed"], peaks=Peaks(peak_gbps=2000))
    sections = {s.title: s for s in efficiency.sections(report)}
    fig = sections["Roofline of operators"].items[0]
    squares = [r for r in glyphs(fig, "Scatter") if r.glyph.marker == "square"]
    assert len(squares) == 1
    data = squares[0].data_source.data
    no_flops = {o["op"]: o for o in report.operators if not o["flops"] and o["gbps"]}
    assert no_flops and set(data["op"]) == set(no_flops)
    for op, y in zip(data["op"], data["y"], strict=True):
        assert y == pytest.approx(efficiency.NO_FLOP_INTENSITY * no_flops[op]["gbps"] / 1e3)
    labelled = [text for layout in fig.center if layout.__class__.__name__ == "LabelSet"
                for text in layout.source.data["label"]]
    drawn = [o for o in sorted(report.operators, key=lambda o: -o["gpu_ms"])
             if (o["tflops"] or 0) > 0 and (o["intensity"] or 0) > 0 or not o["flops"] and (o["gbps"] or 0) > 0]
    assert sorted(labelled) == sorted(o["op"].removeprefix("aten::")[:24] for o in efficiency.labelled_ops(drawn))
    assert 0 < len(labelled) <= efficiency.LABELLED_POINTS
    over = next(o for o in report.operators if o["op"] == "aten::_foreach_addcmul_")
    assert over["roofline_pct"] > 100
    table = sections["Operators"].items[0].markup
    assert "<td class=\"num\">&gt;100</td>" in table and "fewer bytes than its model" in sections["Operators"].note


def test_efficiency_table_names_a_compute_kernel_before_a_copy() -> None:
    """gpt-step-base's aten::slice_backward spends most of its time in a DtoD memcpy, then an elementwise kernel:
    its top kernel is the kernel; and with one rank the table has no rank column."""
    from tracedoc.pages import efficiency
    report = analyze([ROOT / "tests" / "data" / "efficiency-h200" / "gpt-step-base.trace.json.gz"])
    op = next(o for o in report.operators if o["op"] == "aten::slice_backward")
    assert op["kernels"][0]["name"].startswith("Memcpy DtoD")
    assert not efficiency.top_kernels(op["kernels"])[0]["name"].startswith("Memcpy")
    table = next(s for s in efficiency.sections(report) if s.title == "Operators").items[0].markup
    row = next(r for r in table.split("<tr>") if "aten::slice_backward" in r)
    shown = row.split("</td>")[-2].rsplit('">', 1)[-1]  # the cell's text; its title holds all three kernels
    assert shown.startswith("vectorized_elementwise_kernel") and "<th>rank</th>" not in table


def test_efficiency_table_shortens_each_top_kernel_with_its_count() -> None:
    """conv-step (saved report): aten::native_batch_norm_backward's top kernel is batch_norm_backward_kernel with
    ten tensor-accessor arguments; the cell shows its short form and count, not the whole argument list (the count
    once stopped the name being shortened: 300 characters across ten lines)."""
    from tracedoc.pages import efficiency
    from tracedoc.saved import read_report
    report = read_report(ROOT / "reports" / "conv-step.json")
    table = next(s for s in efficiency.sections(report) if s.title == "Operators").items[0].markup
    cells = {}
    for row in table.split("<tr>")[2:]:
        tds = row.split("</td>")
        cells[unescape(re.sub(r"<[^>]+>", "", tds[0]))] = unescape(tds[-2].rsplit('">', 1)[-1])
    assert cells["aten::native_batch_norm_backward"] == "batch_norm_backward_kernel<…>(…) ×159"
    assert all(len(shown) <= 60 for shown in cells.values()), cells


def test_efficiency_roofline_labels_do_not_overlap() -> None:
    """conv-step (saved report): aten::conv2d lies on aten::convolution_backward, batch_norm on its backward and
    threshold_backward on add_, and the elementwise squares stack on one another; of such neighbours only the
    largest is labelled, none within a label's width across and a line and a half up or down of another."""
    from tracedoc.pages import efficiency
    from tracedoc.saved import read_report
    report = read_report(ROOT / "reports" / "conv-step.json")
    fig = efficiency.roofline_chart(report.operators, report.efficiency[0]["peak"])
    points = [(math.log10(x), math.log10(y), text) for layout in fig.center
              if layout.__class__.__name__ == "LabelSet"
              for x, y, text in zip(layout.source.data["x"], layout.source.data["y"], layout.source.data["label"],
                                    strict=True)]
    names = {text.rstrip("…") for _, _, text in points}
    assert {"convolution_backward", "native_batch_norm_backw", "add_"} <= names
    assert not names & {"conv2d", "batch_norm", "threshold_backward"}
    for (x1, y1, a), (x2, y2, b) in combinations(points, 2):
        assert abs(x1 - x2) > efficiency.LABEL_APART_X or abs(y1 - y2) > efficiency.LABEL_APART_Y, (a, b)
