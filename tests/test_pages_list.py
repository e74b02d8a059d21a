"""The one ordered page list (tracedoc.pages.PAGES): the HTML report and the dashboard both show every page of it,
in its order, so a page added to the list appears in both with nothing else to change."""

from __future__ import annotations

import copy
import re
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.dashboard import app
from tracedoc.pages import PAGES, Page, empty, overview, page_modules, timeline
from tracedoc.pages.charts import Section
from tracedoc.pages.fragments import Html
from tracedoc.render.html import HtmlRenderer


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A page added to the list as one entry, with data for any report."""
    page = ModuleType("tracedoc.pages.probe")
    page.TITLE, page.ROUTE = "Probe", "probe"  # type: ignore[attr-defined]
    page.sections = lambda report: [Section("Probe section", items=[Html("<p>probe body</p>")])]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, page.__name__, page)
    monkeypatch.setattr("tracedoc.pages.PAGES", (*PAGES[:3], Page("probe"), *PAGES[3:]))
    return page


def test_every_page_has_a_title_and_a_route_of_its_own() -> None:
    pages = page_modules()
    assert [p.__name__.rsplit(".", 1)[1] for p in pages] == [p.module for p in PAGES]
    assert len({p.ROUTE for p in pages}) == len(pages) and all(p.TITLE for p in pages)
    assert all(callable(p.sections) for p in page_modules(store=False))  # the others draw from the store
    assert page_modules(store=False) == tuple(p for p in pages if p is not timeline)


def test_every_page_words_its_own_empty_state() -> None:
    """Every page after the overview says in its own module when and why it has nothing to show: ``EMPTY`` (input
    kind → sentence, with 'other') and ``has_data``, or, drawn from the store, the dashboard's check of the store.
    What the navigation greys out is what the page draws empty, on reports of two kinds and one rank's timeline
    without steps (an edited copy of decode-eager's report)."""
    for entry, page in zip(PAGES[1:], page_modules()[1:], strict=True):
        sentences = getattr(page, "EMPTY", None)
        assert isinstance(sentences, dict) and sentences.get("other"), page.ROUTE
        assert all(isinstance(s, str) and s.endswith(".") for s in sentences.values()), page.ROUTE
        assert set(sentences) <= set(empty.INPUT_KINDS) or hasattr(page, "empty_sentence"), page.ROUTE
        if entry.needs_store:
            assert page.ROUTE in app.STORE_PAGE_MISSING and not hasattr(page, "has_data"), page.ROUTE
        else:
            assert callable(getattr(page, "has_data", None)), page.ROUTE
    reports = {sample: analyze([SAMPLES / sample]) for sample in ("ncu-h800-sglang-csv", "decode-eager")}
    reports["one rank, no steps"] = copy.deepcopy(reports["decode-eager"])
    reports["one rank, no steps"].metrics["rank_steps"] = []
    for name, report in reports.items():
        for page in page_modules(store=False)[1:]:
            assert page.sections(report)[0].empty == (empty.why_empty(page, report) or ""), (name, page.ROUTE)
        assert empty.why_empty(overview, report) is None


def test_a_snapshot_alone_greys_out_the_pages_of_a_timeline_and_says_why() -> None:
    """samples/snapshot-leak-default, an allocator snapshot alone: the pages it cannot fill (timeline, kernels,
    efficiency, overlap, ranks) say that an allocator snapshot holds allocations, not what they chart, and point to
    the Memory page where one helps, rather than a bare 'No GPU kernels in these inputs'."""
    from tracedoc.pages import efficiency, kernels, memory, overlap, ranks

    report = analyze([SAMPLES / "snapshot-leak-default"])
    assert empty.input_kind(report) == "allocator snapshots"
    assert empty.why_empty(memory, report) is None
    for page in (timeline, kernels, efficiency, overlap, ranks):
        why = empty.sentence(page, report)
        assert "allocator snapshot holds" in why, page.ROUTE
    for page in (timeline, kernels, efficiency):
        assert "Memory page" in empty.sentence(page, report), page.ROUTE


def test_a_page_added_to_the_list_shows_in_the_html_report_and_the_dashboard(probe: ModuleType,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    report = analyze([SAMPLES / "decode-eager"])
    html = HtmlRenderer().render(report)
    shown = re.findall(r'<section id="([a-z]+)">', html)
    assert "probe" in shown and "probe body" in html and '<a href="#probe">Probe</a>' in html
    store_free = [p.ROUTE for p in page_modules(store=False)]
    assert shown == [r for r in store_free if r in shown]  # the list's order
    assert shown[0] == overview.ROUTE
    assert empty.why_empty(probe, report) is None  # without has_data: always drawn, never greyed out

    nav = app.navigation(overview).markup
    assert re.findall(r'<a href="\.(/[a-z]*)"', nav) == [app.route(p) for p in page_modules()]
    served: dict[str, Any] = {}
    monkeypatch.setattr(app, "serve_routes", lambda loading, routes, titles, *a: served.update(routes=routes,
                                                                                             titles=titles))
    app.serve(None, "127.0.0.1", 0, False)  # type: ignore[arg-type]
    assert list(served["routes"]) == [app.route(p) for p in page_modules()]
    assert served["titles"]["/probe"] == "tracedoc · Probe"
