"""Every page of `tracedoc serve` for an Nsight Systems report, an Nsight Compute report, a multi-rank PyTorch trace
and a hang, opened in headless Chromium as a user would: the navigation greys out the pages without data, each
page shows its data or its format's empty state, the filters read 'all', a straggler opens the timeline with every
rank. A screenshot of every page is saved in the test's folder (`pytest --basetemp=DIR` keeps them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, needs_chromium, page_text, served
from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.dashboard.app import route
from tracedoc.pages import empty, overview, page_modules, timeline
from tracedoc.pages.charts import Section
from tracedoc.pages.kinds import has_saving

PAGES = page_modules()
PAGE_TIMEOUT_MS = 60_000
TIMELINE_FORMATS = {"nsys-ddp-larger-batch-ranks", "ddp-straggler"}
INPUTS = ("nsys-ddp-larger-batch-ranks", "gemm-ladder-ncu", "ddp-straggler", "hang-4rank-stuck")


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as b:
        yield b


def expected_text(page: Any, sample: str, sections: list[Section]) -> str:
    """A text the page must show: its first section's title, or the start of its empty-state sentence."""
    if page is timeline:
        return "Wheel or drag a box to zoom" if sample in TIMELINE_FORMATS else "No timeline:"
    first = sections[0]
    return first.empty[:50] if first.empty else first.title


def open_page(browser: Any, url: str, text: str, shot: Path) -> tuple[Any, list[str]]:
    """Open ``url``, wait for ``text`` and the page's charts to paint, save a full-page screenshot."""
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    try:
        page.get_by_text(text).filter(visible=True).first.wait_for()
    except Exception as exc:
        page.screenshot(path=str(shot.with_suffix(".failed.png")), full_page=True)
        exc.add_note(f"the page's text: {page_text(page)}")
        raise
    page.wait_for_timeout(1500)  # the last charts paint
    page.screenshot(path=str(shot), full_page=True)
    return page, dialogs


@needs_chromium
@pytest.mark.parametrize("sample", INPUTS)
def test_every_page_of_each_kind_of_input(browser: Any, tmp_path: Path, sample: str) -> None:
    report = analyze([SAMPLES / sample])
    sections = {p: (p.sections(report) if p is not timeline else []) for p in PAGES}
    with_data = {p for p in PAGES if p in (overview, timeline) and (p is overview or sample in TIMELINE_FORMATS)
                 or (p not in (overview, timeline) and empty.why_empty(p, report) is None)}
    with served([SAMPLES / sample], tmp_path / "cache", tmp_path / "server.log") as url:
        for p in PAGES:
            shot = tmp_path / f"{sample}-{p.ROUTE}.png"
            page, dialogs = open_page(browser, url + route(p), expected_text(p, sample, sections[p]), shot)
            try:
                assert dialogs == [] and "Traceback" not in page.content(), p.ROUTE
                nav = page.locator("nav").first
                nav.locator("a").first.wait_for()
                greyed = nav.locator("span.off")
                assert sorted(greyed.all_inner_texts()) == sorted(q.TITLE for q in PAGES if q not in with_data), \
                    p.ROUTE
                assert sorted(nav.locator("a").all_inner_texts()) == sorted(q.TITLE for q in with_data)
                if p is overview:
                    check_overview(page, report)
            finally:
                page.close()


def check_overview(page: Any, report: Any) -> None:
    """The filters read 'all' while empty; the savings chart is there only when a finding has a saving."""
    placeholders = page.locator(".choices input[placeholder='all']")
    assert placeholders.count() == 3
    has_bars = any(has_saving(f) for f in report.findings)
    text = page_text(page)
    assert ("No finding here has a time saving" in text) != has_bars


@needs_chromium
def test_a_straggler_card_opens_every_rank_on_the_timeline(browser: Any, tmp_path: Path) -> None:
    """ddp-straggler's straggler-rank card: 'show on the timeline' opens the timeline with rank 0 (who waits) and
    rank 1 (the straggler) both in view."""
    from tests.test_dashboard import timeline_figure

    with served([SAMPLES / "ddp-straggler"], tmp_path / "cache", tmp_path / "server.log") as url:
        page, dialogs = open_page(browser, url + "/", "One rank holds the others up", tmp_path / "overview.png")
        try:
            card = page.locator("article.finding", has_text="straggler-rank")
            card.get_by_text("show on the timeline").click()
            page.wait_for_url("**/timeline?**")
            assert "ranks=" not in page.url
            labels = timeline_figure(page)["labels"]
            assert {label.split(" · ")[0] for label in labels} == {"rank 0", "rank 1"}
            page.wait_for_timeout(1500)
            page.screenshot(path=str(tmp_path / "straggler-timeline.png"), full_page=True)
        finally:
            page.close()
    assert dialogs == []


@needs_chromium
def test_the_efficiency_page_shows_mfu_and_the_roofline_of_operators(browser: Any, tmp_path: Path) -> None:
    """A GPT-style step recorded with shapes on an H200 (tests/data/efficiency-h200, the GPT-2 vocabulary that
    plants low-mfu): the Efficiency page gives its MFU against the H200's bf16 peak, draws the operators' roofline
    (a Bokeh canvas that painted) and lists the operators; the screenshot is kept in the test's folder."""
    from tests.conftest import ROOT
    from tracedoc.pages import efficiency

    trace = ROOT / "tests" / "data" / "efficiency-h200" / "gpt-step-gpt2.trace.json.gz"
    report = analyze([trace])
    mfu = report.summary["efficiency"]
    assert mfu.startswith("MFU ") and "H200" in mfu
    with served([trace], tmp_path / "cache", tmp_path / "server.log") as url:
        page, dialogs = open_page(browser, url + route(efficiency), "Roofline of operators",
                                  tmp_path / "efficiency.png")
        try:
            text = page_text(page)
            assert "Operators" in text and "aten::mm" in text and "H200" in text
            canvases = page.locator("canvas")
            assert canvases.count() >= 1
            box = canvases.first.bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 200
        finally:
            page.close()
    assert dialogs == []


# Each drawn Bokeh plot of the page, in page order: its frame's (plot area's) left edge and width, and its own width
PLOT_FRAMES_JS = """() => { const out = [];
  const walk = (view) => {
    if (view.frame && view.model) out.push({left: view.frame.bbox.left, frame: view.frame.bbox.width,
                                            width: view.bbox.width});
    for (const child of (view.child_views ?? [])) walk(child); };
  for (const root of Object.values(window.Bokeh.index)) walk(root);
  return out; }"""


@needs_chromium
def test_the_category_chart_spends_its_width_on_its_bars(browser: Any, tmp_path: Path) -> None:
    """The conv step's Kernels page (samples/conv-step-gpu, one rank): the 'GPU time by category' chart labels its
    bar 'rank 0', so its plot area starts near its left edge and fills most of its width, although the top kernels'
    chart under it reserves half the page for kernel names (Bokeh used to align the two charts' frames, leaving
    the category chart's left half empty)."""
    from tracedoc.pages import kernels

    with served([SAMPLES / "conv-step-gpu"], tmp_path / "cache", tmp_path / "server.log") as url:
        page, dialogs = open_page(browser, url + route(kernels), "GPU time by category", tmp_path / "kernels.png")
        try:
            category, top = page.evaluate(PLOT_FRAMES_JS)[:2]
        finally:
            page.close()
    assert dialogs == []
    assert category["left"] < 100 and category["frame"] > 0.85 * category["width"], category
    assert top["left"] > 300, top  # the kernel names' side: what the category chart no longer copies
