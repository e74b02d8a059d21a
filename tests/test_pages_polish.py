"""What the first report shows, row by row: counts as whole numbers, sizes in a unit that keeps them short, a flag as
yes or no, and 'part of #N' instead of a saving of 0 µs for a finding whose time another one counts (a kernel's
facets in Nsight Compute, low-gpu-utilization beside a host-bound finding), on the pages and in the Markdown and
text reports alike."""

from __future__ import annotations

import re
from html import unescape

import pytest

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.pages import hang
from tracedoc.pages.fragments import Html, findings_html
from tracedoc.render.markdown import MarkdownRenderer
from tracedoc.render.text import TextRenderer
from tracedoc.words.findings import fmt_value


def card(report, rule: str) -> str:
    """The text of the first finding card of ``rule``."""
    finding = next(f for f in report.findings if f.rule == rule)
    return unescape(re.sub(r"<[^>]+>", " ", findings_html(report, [finding]).markup))


def test_counts_are_whole_numbers() -> None:
    """decode-eager's launch-bound: 1,152 kernels per step, not '1,152.0'."""
    text = card(analyze([SAMPLES / "decode-eager"]), "launch-bound")
    assert re.search(r"kernels per step\s+1,152\b", text) and "1,152.0" not in text
    assert fmt_value(16.143, "count") == "16.1" and fmt_value(49894570.667, "count") == "49,894,571"


def test_sizes_are_written_in_a_unit_that_keeps_them_short() -> None:
    """ncu-h100-gemm-sol's uncoalesced-access: 1.92 TB of excess traffic, not '1,924,615.1 MB'."""
    text = card(analyze([SAMPLES / "ncu-h100-gemm-sol"]), "uncoalesced-access")
    assert re.search(r"excess traffic\s+1\.92 TB", text) and "1,924,615" not in text
    assert fmt_value(0.25, "MB") == "250.0 KB" and fmt_value(12.5, "MB") == "12.5 MB"


def test_hang_tables_say_yes_or_no() -> None:
    """hang-4rank-stuck's tables: whether a rank left a dump and whether it was used read yes or no, never Python's
    True and False."""
    report = analyze([SAMPLES / "hang-4rank-stuck"])
    tables = " ".join(i.markup for s in hang.sections(report) for i in s.items if isinstance(i, Html))
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", tables)
    assert "yes" in cells and not {"True", "False"} & set(cells)


@pytest.mark.parametrize("sample, rule, owner", [("gemm-ladder-ncu", "no-tensor-cores", "below-cublas-ceiling"),
                                                 ("ncu-a40-julia", "warp-stall-wait", "latency-bound"),
                                                 ("nsys-nvfuser-h200", "low-gpu-utilization", "gpu-idle-host-bound")])
def test_a_finding_another_counts_says_part_of(sample: str, rule: str, owner: str) -> None:
    """A kernel's facet points to the primary finding on the same kernel and launch configuration; nvfuser's
    low-gpu-utilization (its idle all waits on the host) to gpu-idle-host-bound, which counts that time. Each says
    'part of #N' on its card, in the Markdown table and on the text report's panel, never '0.0 µs'."""
    report = analyze([SAMPLES / sample])
    findings = [f for f in report.findings if f.rule == rule]
    assert findings and all(f.impact_ms == 0 and f.part_of for f in findings)
    for f in findings:
        primary = report.findings[f.part_of - 1]
        assert primary.rule == owner and primary.scope.kernel == f.scope.kernel and primary.impact_ms > 0
        grid = [e.value for e in f.evidence if e.name == "grid"]
        assert grid == [e.value for e in primary.evidence if e.name == "grid"]
    number = report.findings.index(findings[0]) + 1
    head = card(report, rule).split(findings[0].message[:40])[0]  # the card's line above its message
    assert f"part of #{findings[0].part_of}" in head and "0.0 µs" not in head
    markdown = MarkdownRenderer().render(report)
    [row] = [line for line in markdown.splitlines() if line.startswith(f"| {number} |")]
    assert row.endswith(f"| part of #{findings[0].part_of} |")
    terminal = TextRenderer().render(report)
    assert "saves ~0.0 µs" not in terminal and f"part of #{findings[0].part_of}" in terminal
