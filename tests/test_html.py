"""The HTML report: one self-contained file with the dashboard's charts, for every input format; strings from
traces stay text, in the file and in a real browser opening it offline."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.browser import chromium, needs_chromium
from tests.conftest import ROOT, SAMPLES
from tests.hostile_trace import HOSTILE, hostile_ranks
from tracedoc import Report, analyze
from tracedoc.causes import label as cause_label
from tracedoc.causes import window_rows
from tracedoc.cli import cli
from tracedoc.pages import DASHBOARD_MODULES, attribution, overview, savings
from tracedoc.pages.fragments import CAUSE_COLORS
from tracedoc.pages.kinds import has_saving
from tracedoc.render.html import HtmlRenderer
from tracedoc.words.findings import summary_text, what_if_text


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
    "torch": ("ddp-straggler", ["overview", "kernels", "efficiency", "ranks", "overlap"],  # efficiency: the step
              "One rank holds the others up"),  # without the profiler, though no shapes give MFU
    "nsys": ("nsys-torch-h100", ["overview", "kernels", "efficiency"],  # efficiency: the step without nsys
             "GPU time by category"),  # one rank: no Ranks page
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
    # every page shown has at least one chart; the overview's savings chart only when a finding has a saving
    charted = [p for p in pages if p != "overview" or any(has_saving(f) for f in report.findings)]
    assert doc.chart_roots >= len(charted)
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
        page.locator(".bk-Figure").nth(7).wait_for()
        assert page.locator(".bk-Figure canvas").count() >= 8
        # where the time went, savings, categories, top kernels, 3 heatmaps, overlap
        assert page.locator(".bk-Figure").count() == 8
        assert page.get_by_text(HOSTILE, exact=True).count() >= 1
        assert page.locator("img").count() == 0
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert requests == [] and dialogs == []


# --- where the time went, what-if, part of ------------------------------------------------------------------------

def time_went(report: Report) -> Any:
    """The overview's 'Where the time went' section (None when absent)."""
    return next((s for s in overview.sections(report) if s.title == "Where the time went"), None)


def step_totals(report: Report) -> dict[tuple[str, str], dict[str, float]]:
    """ms per (rank·GPU, step label) and cause, summed from the report's attribution rows of the window."""
    rows = window_rows(report.attribution)
    stepped = {(r["rank"], r["device"]) for r in rows if r["step"] is not None}
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        label = f"step {r['step']}" if r["step"] is not None else \
            "before the first step" if (r["rank"], r["device"]) in stepped else "whole window"
        causes = out.setdefault((f"rank {r['rank']} · GPU {r['device']}", label), {})
        causes[r["cause"]] = causes.get(r["cause"], 0.0) + r["ms"]
    return out


def cause_column(data: dict[str, Any], label: str) -> int:
    """The position of the cause labelled ``label`` among the chart's stacked columns (s0, s1, …)."""
    return next(i for i in range(len(CAUSE_COLORS) + 1) if data[f"label{i}"][0] == label)


@pytest.fixture(scope="module")
def input_slow() -> Report:
    return analyze([SAMPLES / "input-slow"])


@pytest.mark.parametrize("sample", ["input-slow", "ddp-straggler"])
def test_where_the_time_went_charts_every_step(sample: str, input_slow: Report, reports: dict[str, Report]) -> None:
    """One stacked bar per rank·GPU and step, each cause's ms as attributed, causes in the fixed order and colours,
    the legend naming them; the table under it gives each GPU's shares."""
    report = input_slow if sample == "input-slow" else reports["torch"]
    section = time_went(report)
    chart, table = section.items
    expected = step_totals(report)
    data = chart.renderers[0].data_source.data
    assert data["x"] == list(expected)  # the window's time before its steps first, then the steps, rank by rank
    causes = [c for c in CAUSE_COLORS if any(c in v for v in expected.values())]
    labels = [data[f"label{i}"][0] for i in range(len(causes))]
    assert labels == [cause_label(c) for c in causes]
    for i, cause in enumerate(causes):
        assert data[f"s{i}"] == pytest.approx([v.get(cause, 0.0) for v in expected.values()])
    assert [r.glyph.fill_color for r in chart.renderers] == [CAUSE_COLORS[c] for c in causes]
    [legend] = chart.legend
    assert [item.label.value for item in legend.items] == labels[::-1]  # top to bottom, as stacked
    doc = Document(HtmlRenderer().render(report))
    assert "Where the time went" in doc.plain and "share of the window (mostly)" in doc.plain
    assert table.markup in HtmlRenderer().render(report)


def test_where_the_time_went_names_what_holds_the_time(input_slow: Report, reports: dict[str, Report]) -> None:
    """input-slow: its steps wait for the data loader; ddp-straggler: rank 0 waits for rank 1 in every step."""
    section = time_went(input_slow)
    plain = Document(section.items[1].markup).plain
    assert re.search(r"data loading \d+\.\d% \(enumerate\(DataLoader\)#_SingleProcessDataLoaderI", plain)
    data = section.items[0].renderers[0].data_source.data
    loading = cause_column(data, "data loading")
    assert all(pct > 50 for pct in data[f"pct{loading}"])  # the loader holds most of every step
    assert data[f"detail{loading}"][0].startswith("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ ")
    straggler = time_went(reports["torch"]).items[0].renderers[0].data_source.data
    wait = cause_column(straggler, "waiting for a peer")
    rank0_steps = [i for i, (group, step) in enumerate(straggler["x"]) if group == "rank 0 · GPU 0" and
                   step.startswith("step")]
    assert len(rank0_steps) == 3
    assert all(straggler[f"s{wait}"][i] > 5 and straggler[f"detail{wait}"][i] == "rank 1"
               for i in rank0_steps)


def test_headline_shows_what_the_busy_gpu_did(reports: dict[str, Report]) -> None:
    report = reports["torch"]
    plain = Document(HtmlRenderer().render(report)).plain
    assert summary_text(report.summary, len(report.inputs)) in plain
    assert re.search(r"GPU busy [\d.]+% \(computing [\d.]+%, communication [\d.]+%, of which [\d.]+% waiting "
                     r"for rank 1\)", plain)


def test_findings_say_what_if_fixed(input_slow: Report) -> None:
    plain = Document(HtmlRenderer().render(input_slow)).plain
    projection = input_slow.what_if_for(1)
    assert projection is not None and what_if_text(projection) in plain
    card = cards(HtmlRenderer().render(input_slow))["gpu-idle-host-bound"]
    assert "If fixed: step" in card and "next: host-sync (#2)" in card


def cards(html: str) -> dict[str, str]:
    """Each finding card's text by its rule."""
    out = {}
    for article in re.findall(r'<article class="finding.*?</article>', html, re.DOTALL):
        text = Document(article).plain
        out[re.search(r"<code>([^<]+)</code>", article).group(1)] = text
    return out


def test_a_finding_counted_by_a_bigger_one_says_part_of() -> None:
    """nsys-torch-h100: the long GPU gaps are the idle time gpu-idle-host-bound (#1) already counts."""
    report = analyze([SAMPLES / "nsys-torch-h100"])
    number, gaps = next((i, f) for i, f in enumerate(report.findings, 1) if f.rule == "gpu-gaps")
    assert gaps.part_of == 1 and gaps.impact_ms == 0
    html = HtmlRenderer().render(report)
    card = cards(html)["gpu-gaps"]
    assert "estimated saving part of #1" in card and "0 ms" not in card.split("estimated saving")[1][:20]
    assert "Its time is part of finding #1's, which counts it" in card
    assert "part of #" not in cards(html)["gpu-idle-host-bound"]
    data = savings.savings_chart(report, report.findings).renderers[0].data_source.data
    [label] = [text for y, text in zip(data["y"], data["saving"]) if y.startswith(f"{number}. ")]
    assert label == "part of #1"  # written at the bar's end


def test_no_time_attributed_no_section(reports: dict[str, Report]) -> None:
    """Kernel profiles, hang dumps and telemetry attribute no time: no section, no empty chart."""
    for fmt in ("ncu", "hang", "health"):
        assert reports[fmt].attribution == [] and attribution.section(reports[fmt]) is None
        assert "Where the time went" not in Document(HtmlRenderer().render(reports[fmt])).plain


def test_hostile_annotation_name_is_escaped_in_the_time_table(tmp_path: Path) -> None:
    """input-slow with its 'h2d' annotation named like an injection: the phase detail shows it as text."""
    trace = json.loads(gzip.decompress((SAMPLES / "input-slow" / "trace.json.gz").read_bytes()))
    for event in trace["traceEvents"]:
        if event.get("name") == "h2d":
            event["name"] = HOSTILE
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
    report = analyze([tmp_path / "in"])
    assert any(r["detail"] == HOSTILE for r in report.attribution)
    html = HtmlRenderer().render(report)
    assert not re.search(r"<img", html, re.IGNORECASE)
    section = time_went(report)
    assert f"({HOSTILE})" in Document(section.items[1].markup).plain  # the phases' top detail, as text
    data = section.items[0].renderers[0].data_source.data
    assert any(HOSTILE in d for d in data[f"detail{cause_column(data, 'named phases')}"])  # the tooltip's data


# Control and bidirectional characters of every kind: an escape sequence, NUL, a right-to-left override, a C1 CSI,
# a bidi isolate and a bell.
INVISIBLE = "k\x1b[2J\x00\u202eevil\x9b\u2066x\x07"
_RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_control_and_bidi_characters_in_names_are_visible_escapes(tmp_path: Path) -> None:
    """samples/ddp-straggler with rank 0's second-busiest kernel named INVISIBLE: its characters reached the HTML
    report raw (an override reorders what a reader sees, NUL and ESC are invisible). Each is now written visibly,
    in the text and in the charts' data, and no raw one is anywhere in the file."""
    report = analyze([hostile_ranks(tmp_path / "ranks", INVISIBLE)])
    assert any(k["name"] == INVISIBLE for k in report.metrics["top_kernels"])
    html = HtmlRenderer().render(report)
    assert not _RAW.search(html), repr(_RAW.search(html))
    shown = "k\\x1b[2J\\x00\\u202eevil\\x9b\\u2066x\\x07"
    assert shown in Document(html).plain  # the kernels table
    assert json.dumps(json.dumps(shown)[1:-1])[1:-1] in html  # the charts' data: JSON in a JSON string in the page
    assert any(k["name"] == INVISIBLE for k in report.metrics["top_kernels"])  # the report itself is unchanged
