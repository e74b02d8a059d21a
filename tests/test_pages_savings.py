"""The overview's savings chart and finding cards: bars only for savings (not a hang's wait, not an informational
health finding), one per rule and GPU, a scale on which a 95 µs saving shows beside a 183 ms one, every bar
labelled; and the cards' evidence with a figure given in two units on one row."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from bokeh.models import LabelSet, LogScale

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.pages import overview, savings
from tracedoc.pages.fragments import Html, findings_html
from tracedoc.report import Report
from tracedoc.saved import read_report


def chart_of(report: Report) -> object | None:
    """The overview's savings chart (None when the section has none)."""
    section = next(s for s in overview.sections(report) if s.title == "Estimated saving per finding")
    return next((item for item in section.items if not isinstance(item, Html)), None)


def committed(sample: str) -> Report:
    """The committed gallery report of a sample (what tracedoc wrote for it)."""
    return Report.from_dict(json.loads((ROOT / "reports" / f"{sample}.json").read_text()))


def test_a_hang_gets_no_saving_bar() -> None:
    """hang-4rank-stuck: the collective-hang's 14.5 s is how long the ranks waited, not a saving: no chart, the
    section says why, and the card says what the time is instead of 'estimated saving'."""
    report = analyze([SAMPLES / "hang-4rank-stuck"])
    [hang] = [f for f in report.findings if f.rule == "collective-hang"]
    assert hang.impact_ms > 10_000
    assert chart_of(report) is None
    section = next(s for s in overview.sections(report) if s.title == "Estimated saving per finding")
    assert "hang" in section.empty and "not a saving" in section.empty
    card = findings_html(report).markup
    assert "estimated saving" not in card and "no saving to estimate: the job is stuck" in card


def test_a_users_hang_rule_is_drawn_as_a_hang(tmp_path: Path) -> None:
    """collective-hang copied under another id into a user's rule folder (an edited copy: its id changed): its
    finding on hang-4rank-stuck is a hang as the built-in's is, with no saving bar and the card saying so; read back
    from the saved JSON, the built-in's finding is a hang again."""
    rules = tmp_path / "rules"
    rules.mkdir()
    text = (ROOT / "rules" / "collective-hang.yaml").read_text().replace("id: collective-hang", "id: my-hang", 1)
    (rules / "my-hang.yaml").write_text(text)
    report = analyze([SAMPLES / "hang-4rank-stuck"], rules_dirs=[rules])
    [mine] = [f for f in report.findings if f.rule == "my-hang"]
    assert (mine.kind, mine.impact_ms > 10_000) == ("hang", True)
    assert chart_of(report) is None
    assert "estimated saving" not in findings_html(report).markup
    saved = tmp_path / "hang.json"
    saved.write_text(analyze([SAMPLES / "hang-4rank-stuck"]).to_json())
    assert {f.kind for f in read_report(saved).findings if f.rule == "collective-hang"} == {"hang"}
    assert {f.kind for f in Report.from_json(saved.read_text()).findings} == {"saving"}  # raw: no rules asked


def test_informational_health_findings_get_no_bar() -> None:
    """health-2xh200: 'GPU held to its power limit' (nothing broken) gets no bar and its card says it saves
    nothing, though its rule counts 1.16 s of clock time given up."""
    report = analyze([SAMPLES / "health-2xh200"])
    capped = [f for f in report.findings if f.rule == "gpu-power-capped"]
    assert capped and max(f.impact_ms for f in capped) > 1000
    assert chart_of(report) is None
    assert "informational, no saving" in findings_html(report).markup


def test_one_bar_per_rule_and_gpu() -> None:
    """An edited copy of health-2xh200's committed report with its power-capping findings raised to warnings (as a
    finding that costs time would be) and each found a second time on its GPU with a smaller time (as the NVML
    snapshot found it before the rule kept telemetry's finding alone): the chart shows one bar per GPU, the larger;
    kernel findings of one name (ncu-h200-torch-csv's two small-grid kernels) all keep their bars."""
    report = committed("health-2xh200")
    report.findings += [dataclasses.replace(f, impact_ms=f.impact_ms / 2) for f in report.findings]
    for f in report.findings:
        f.severity = "warning"
    assert len(report.findings) == 4
    chart = chart_of(report)
    data = chart.renderers[0].data_source.data
    assert len(data["y"]) == 2 and sorted(data["value"]) == sorted(
        max(f.impact_ms for f in report.findings if f.scope.device == d) for d in (0, 1))
    assert all("2 times here" in found for found in data["found"])
    ncu = committed("ncu-h200-torch-csv")
    small = [f for f in ncu.findings if f.rule == "small-grid"]
    assert len(small) == 2 and small[0].scope == small[1].scope
    labels = chart_of(ncu).renderers[0].data_source.data["y"]
    assert sum("small-grid" in label for label in labels) == 2


def test_small_savings_show_beside_large_ones() -> None:
    """decode-eager: launch-bound saves 183 ms, low-gpu-utilization 95 µs. On a linear axis the small bar would be
    0.05 % of the large one; the axis is logarithmic and the small bar takes a visible share of it, and every bar
    carries its saving as a label."""
    report = analyze([SAMPLES / "decode-eager"])
    values = sorted(f.impact_ms for f in report.findings)
    assert values[-1] / values[0] > 1000
    chart = chart_of(report)
    assert isinstance(chart.x_scale, LogScale)
    start, end = chart.x_range.start, chart.x_range.end
    shares = [(math.log10(v) - math.log10(start)) / (math.log10(end) - math.log10(start)) for v in values]
    assert min(shares) > 0.1
    [labels] = chart.select({"type": LabelSet})
    texts = labels.source.data["saving"]
    assert texts == [savings.bar_text(f, report.summary["wall_ms"]) for f in report.findings]
    assert any("µs" in t for t in texts) and any("ms" in t for t in texts)


def test_savings_of_one_size_keep_a_linear_axis() -> None:
    """ddp-straggler's single finding: nothing small to bring out, so the axis stays linear, from 0."""
    report = analyze([SAMPLES / "ddp-straggler"])
    chart = chart_of(report)
    assert not isinstance(chart.x_scale, LogScale) and chart.x_range.start == 0


@pytest.mark.parametrize("sample, name", [("decode-eager", "idle between launches"),
                                          ("ddp-straggler", "others' exposed wait for it per step")])
def test_a_figure_in_two_units_is_one_evidence_row(sample: str, name: str) -> None:
    """A figure given in ms and as a share under one name reads as one row, '182.7 ms (88.3%)'."""
    report = analyze([SAMPLES / sample])
    finding = report.findings[0]
    pair = [e for e in finding.evidence if e.name == name]
    assert [e.unit for e in pair] == ["ms", "%"]
    card = findings_html(report, [finding]).markup
    escaped = name.replace("'", "&#x27;")
    assert card.count(f"<td>{escaped}</td>") == 1
    row = card.split(f"<td>{escaped}</td>")[1].split("</tr>")[0]
    assert f"{pair[0].value:,.1f} ms ({pair[1].value:.1f}%)" in row or \
        f"{pair[0].value:.3g} ms ({pair[1].value:.1f}%)" in row, row
