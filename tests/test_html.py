"""The HTML report: one self-contained file with the dashboard's charts, for every input format; strings from
traces stay text, in the file and in a real browser opening it offline."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.browser import chromium, needs_chromium
from tests.conftest import ROOT, SAMPLES
from tests.hostile_trace import HOSTILE, hostile_ranks
from tracedoc import Report, analyze
from tracedoc.cli import cli
from tracedoc.dashboard import DASHBOARD_MODULES
from tracedoc.render.html import HtmlRenderer


class Document(HTMLParser):
    """What a browser would fetch or run from a page, its section ids, chart roots, table rows and text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.fetches: list[str] = []
        self.sections: list[str] = []
        self.chart_roots = 0
        self.inline_script_chars = 0
        self.highlighted_rows = 0
        self.text: list[str] = []
        self._in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "audio", "video", "source", "embed") and a.get("src"):
            self.fetches.append(a["src"] or "")
        if tag == "link" and a.get("href"):
            self.fetches.append(a["href"] or "")
        if tag == "section":
            self.sections.append(a.get("id") or "")
        if tag == "div" and "data-root-id" in a:
            self.chart_roots += 1
        if tag == "tr" and a.get("class") == "hl":
            self.highlighted_rows += 1
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.inline_script_chars += len(data)
        else:
            self.text.append(data)

    @property
    def plain(self) -> str:
        return " ".join(" ".join(self.text).split())


# sample, the pages it has data for, and a sentence its report must show
CASES = {
    "torch": ("ddp-straggler", ["overview", "kernels", "ranks", "overlap"], "One rank holds the others up"),
    "nsys": ("nsys-torch-h100", ["overview", "kernels"], "GPU time by category"),
    "ncu": ("ncu-h800-sglang-csv", ["overview", "ncu"], "Roofline"),
    "hang": ("hang-slow-rank", ["overview", "hang"], "culprit: never issued seq 3"),
    "health": ("health-2xh200", ["overview"], "gpu-power-capped"),
}


@pytest.fixture(scope="module")
def reports() -> dict[str, Report]:
    return {fmt: analyze([SAMPLES / sample]) for fmt, (sample, _, _) in CASES.items()}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_html_report_of_each_format(fmt: str, reports: dict[str, Report]) -> None:
    _, pages, sentence = CASES[fmt]
    report = reports[fmt]
    doc = Document(HtmlRenderer().render(report))
    assert doc.fetches == [], "the report must open offline: nothing to fetch"
    assert doc.inline_script_chars > 500_000, "Bokeh's JavaScript is inline"
    assert doc.sections == pages  # pages without data are left out
    assert doc.chart_roots >= len(pages)  # every page shown has at least one chart
    assert sentence in doc.plain
    for i, finding in enumerate(report.findings, 1):
        assert f"{i}. {finding.title}" in doc.plain and finding.rule in doc.plain


def test_html_marks_the_straggler_and_the_culprit(reports: dict[str, Report]) -> None:
    ranks = Document(HtmlRenderer().render(reports["torch"]))
    steps = len({r["step"] for r in reports["torch"].metrics["rank_steps"]})
    assert ranks.highlighted_rows == steps  # rank 1's row of each step in the ranks table
    hang = Document(HtmlRenderer().render(reports["hang"]))
    assert hang.highlighted_rows == 1


def test_cli_writes_html_by_extension(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "hang-slow-rank"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_hostile_kernel_name_is_escaped(tmp_path: Path) -> None:
    report = analyze([hostile_ranks(tmp_path / "ranks")])
    assert any(k["name"] == HOSTILE for k in report.metrics["top_kernels"])
    html = HtmlRenderer().render(report)
    assert not re.search(r"<img", html, re.IGNORECASE)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert HOSTILE in Document(html).plain  # shown as the literal text


def test_html_without_the_dashboard_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bokeh", None)  # as if not installed: importing it raises ImportError
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "hang-slow-rank"), "--format", "html"])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'tracedoc[dashboard]'" in lines[0], result.output


def test_core_never_imports_the_dashboard_extra() -> None:
    """text, JSON and Markdown reports work without Panel, HoloViews, Bokeh and datashader installed."""
    code = ("import sys\n"
            f"for name in {DASHBOARD_MODULES!r}: sys.modules[name] = None\n"
            "from click.testing import CliRunner\n"
            "from tracedoc.cli import cli\n"
            "for fmt in ('text', 'json', 'md'):\n"
            f"    r = CliRunner().invoke(cli, ['analyze', {str(SAMPLES / 'hang-slow-rank')!r}, '--format', fmt])\n"
            "    assert r.exit_code == 0, (fmt, r.output)\n"
            f"r = CliRunner().invoke(cli, ['serve', {str(SAMPLES / 'hang-slow-rank')!r}, '--no-show'])\n"
            "assert r.exit_code == 2 and \"pip install 'tracedoc[dashboard]'\" in r.output, r.output\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


@needs_chromium
def test_html_report_in_a_browser_offline(tmp_path: Path) -> None:
    """The file draws its charts with the network cut, and the hostile kernel name runs nothing."""
    path = tmp_path / "report.html"
    path.write_text(HtmlRenderer().render(analyze([hostile_ranks(tmp_path / "ranks")])))
    requests: list[str] = []
    dialogs: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.set_default_timeout(30_000)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.route(re.compile(r"^(?!file:).*"), lambda route: (requests.append(route.request.url), route.abort()))
        page.goto(path.as_uri())
        page.locator(".bk-Figure").nth(6).wait_for()
        assert page.locator(".bk-Figure canvas").count() >= 7
        assert page.locator(".bk-Figure").count() == 7  # savings, categories, top kernels, 3 heatmaps, overlap
        assert page.get_by_text(HOSTILE, exact=True).count() >= 1
        assert page.locator("img").count() == 0
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert requests == [] and dialogs == []
