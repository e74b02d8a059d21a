"""The Python API for notebooks: docs/python-api.md's example runs as written and prints what the page shows;
report.frames and Report._repr_html_ on the real samples' reports."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import tracedoc
from tests.conftest import ROOT
from tracedoc import Report  # its public name: the notebook view comes with it

DOC = ROOT / "docs" / "python-api.md"
# A python block, and the text block right after it: what the python block prints.
_BLOCK = re.compile(r"```python\n(.*?)```\s*(?:```text\n(.*?)```)?", re.DOTALL)


def test_the_worked_example_runs_as_written_and_prints_what_the_page_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the page's paths are a checkout's
    blocks = _BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 4 and all(shown for _, shown in blocks)
    namespace: dict[str, object] = {}
    for code, shown in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert out.getvalue() == shown, code
    report = namespace["report"]
    assert isinstance(report, Report) and report.findings[0].rule == "launch-bound"
    # the frames hold the report's rows: the attribution sums per cause are the report's own
    by_cause: dict[str, float] = {}
    for row in report.attribution:
        by_cause[row["cause"]] = by_cause.get(row["cause"], 0.0) + row["ms"]
    for cause, ms in namespace["by_cause"].rows():
        assert ms == round(by_cause[cause], 1)


@pytest.mark.parametrize("path", sorted((ROOT / "reports").glob("*.json")), ids=lambda p: p.stem)
def test_every_gallery_report_gives_a_frame_per_table(path: Path) -> None:
    """The gallery's reports (one per sample): every table becomes a DataFrame with one row per row."""
    report = Report.from_json(path.read_text())
    frames = report.frames
    own = {"findings": report.findings, "attribution": report.attribution, "efficiency": report.efficiency,
           "operators": report.operators, "memory": report.memory}  # efficiency and operators: where the trace had
    # operator shapes; memory: where an input held allocator data
    assert set(frames) == {"findings", "attribution",
                           *(n for n in ("efficiency", "operators", "memory") if own[n]), *report.metrics}
    for name in frames:
        rows = own.get(name, report.metrics.get(name))
        frame = frames[name]
        assert frame.height == len(rows), name
        if rows and name not in ("findings", "efficiency", "operators", "memory"):  # these flatten nested fields
            assert set(frame.columns) == {k for row in rows for k in row}, name
    findings = frames["findings"]
    assert findings["rule"].to_list() == [f.rule for f in report.findings]
    assert findings["impact_ms"].to_list() == [f.impact_ms for f in report.findings]
    with pytest.raises(KeyError, match="no such table"):
        frames["nothing"]


def test_notebook_overview_is_the_report_head_with_trace_strings_escaped() -> None:
    """A copy of the decode-eager report whose first finding's title was edited to hold markup."""
    report = Report.from_json((ROOT / "reports" / "decode-eager.json").read_text())
    report.findings[0].title = "<script>alert(1)</script> starved"
    html = report._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; starved" in html
    for finding in report.findings:
        assert f"<code>{finding.rule}</code>" in html
    assert "wall 207 ms" in html and "Where the time went" in html and "launch overhead" in html.lower()
    # the style applies inside the output only: every rule's selectors start with the wrapper
    style = re.search(r"<style>(.*?)</style>", html, re.DOTALL).group(1)
    selectors = [s.strip() for rule in re.findall(r"([^{}]+)\{", style) for s in rule.split(",")]
    assert selectors and all(s.startswith("div.tracedoc") for s in selectors)


def test_open_store_is_public_and_loaded_on_first_use() -> None:
    assert "open_store" in tracedoc.__all__
    assert tracedoc.open_store.__module__ == "tracedoc.explore"
