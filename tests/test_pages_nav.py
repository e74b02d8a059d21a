"""Finding one's way on the first day: pages without data greyed out in the dashboard's navigation, each page's
empty state worded for the inputs' format, filters that say 'all' when empty, and a straggler's 'show on the
timeline' opening every rank."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.api import open_store
from tracedoc.dashboard.app import empty_pages, navigation
from tracedoc.dashboard.source import Loading
from tracedoc.dashboard.target import resolve
from tracedoc.dashboard.views import ALL, overview_view, timeline_view
from tracedoc.ingest import discover
from tracedoc.pages import (
    efficiency,
    empty,
    hang,
    kernels,
    memory,
    ncu,
    overlap,
    overview,
    page_modules,
    ranks,
    timeline,
)

PAGES = page_modules()
REPORT_PAGES = (kernels, efficiency, ranks, overlap, ncu, hang, memory)


def loaded(sample: str, cache: Path) -> Loading:
    """What `tracedoc serve SAMPLE` loads, loaded."""
    loading = Loading(resolve([SAMPLES / sample]), cache)
    loading.start()
    assert loading.done.wait(120) and loading.error is None, loading.error
    return loading


@pytest.mark.parametrize("sample, with_data", [
    ("ncu-h800-sglang-csv", {overview, ncu}),
    ("hang-slow-rank", {overview, hang}),
    ("ddp-straggler", {overview, timeline, kernels, ranks, overlap}),
    ("nsys-torch-h100", {overview, timeline, kernels}),  # one rank: no ranks to compare
])
def test_navigation_greys_out_pages_without_data(sample: str, with_data: set, tmp_path: Path) -> None:
    """Once loaded, the pages with nothing to show for these inputs are greyed out, not links, with the reason on
    hover (five of seven for an Nsight Compute report); the others are links."""
    loading = loaded(sample, tmp_path / "cache")
    try:
        missing = empty_pages(loading)
        assert set(PAGES) - set(missing) == with_data
        markup = navigation(overview, missing).markup
        links = re.findall(r'<a href="\.(/[a-z]*)"', markup)
        assert links == [("/" if p is overview else f"/{p.ROUTE}") for p in PAGES if p in with_data]
        greyed = re.findall(r'<span class="off" aria-disabled="true" title="([^"]+)"[^>]*>([^<]+)</span>', markup)
        assert [title for _, title in greyed] == [p.TITLE for p in PAGES if p not in with_data]
        assert all(len(why) > 40 for why, _ in greyed)
    finally:
        if loading.store is not None:
            loading.store.close()


def test_before_loading_every_page_is_a_link() -> None:
    markup = navigation(overview).markup
    assert markup.count("<a href=") == len(PAGES) and 'class="off"' not in markup


@pytest.mark.parametrize("page", REPORT_PAGES, ids=lambda p: p.ROUTE)
def test_empty_states_are_worded_for_the_format(page: ModuleType) -> None:
    """A page without data says why in the words of what was given: an Nsight Compute profile, flight-recorder
    dumps, a single-rank trace; never one sentence for all of them."""
    reports = {sample: analyze([SAMPLES / sample]) for sample in ("ncu-h800-sglang-csv", "hang-slow-rank",
                                                                   "health-h100", "decode-eager")}
    said = {}
    for sample, report in reports.items():
        sections = page.sections(report)
        if sections[0].empty:  # the Efficiency page keeps the step without the profiler beside its empty state
            assert not sections[0].items and all(s.title == "Without the profiler" for s in sections[1:])
            said[sample] = sections[0].empty
            assert said[sample] == empty.sentence(page, report)
    assert len(said) >= 3 and len(set(said.values())) == len(said)
    words = {"ncu-h800-sglang-csv": "Nsight Compute", "hang-slow-rank": "flight-recorder", "health-h100": "telemetry",
             "decode-eager": "trace"}
    for sample, sentence in said.items():
        assert words[sample] in sentence, (sample, sentence)


def test_one_rank_is_told_why_the_ranks_page_has_little_to_compare() -> None:
    """decode-eager is one rank with four steps: its Ranks page is the greyed empty state, not heatmaps of one row
    whose waits are all zero. The ranks empty state of a single-rank timeline without steps is not that of a
    multi-rank one: an edited copy of decode-eager's report without its per-step rows."""
    report = analyze([SAMPLES / "decode-eager"])
    assert len(report.metrics["rank_steps"]) == 4 and not ranks.has_data(report)
    [section] = ranks.sections(report)
    assert "One rank only" in section.empty and not section.items
    assert ranks.has_data(analyze([SAMPLES / "ddp-straggler"]))
    report.metrics["rank_steps"] = []
    assert "One rank only" in ranks.sections(report)[0].empty
    report.summary["ranks"] = 2
    assert "No steps found" in ranks.sections(report)[0].empty


def test_the_timeline_page_says_why_an_ncu_profile_has_none(tmp_path: Path) -> None:
    loading = loaded("ncu-h800-sglang-csv", tmp_path / "cache")
    try:
        pane = timeline_view(loading.timeline, None, loading.report)
        assert "Nsight Compute profile replays each kernel on its own" in pane.object
    finally:
        loading.store.close()


def test_empty_filters_say_all(tmp_path: Path) -> None:
    """The overview's filters (and the timeline's rank choice) read 'all' while nothing is chosen, which is what
    they then keep."""
    report = analyze([SAMPLES / "ddp-straggler"])
    view = overview_view(report)
    widgets = view.objects[0].objects
    assert [w.name for w in widgets] == ["Severity", "Rule", "Rank"]
    assert all(w.placeholder == ALL and w.value == [] for w in widgets)
    assert overview.filter_findings(report, [], [], []) == report.findings


def test_a_straggler_opens_the_timeline_with_every_rank(tmp_path: Path) -> None:
    """ddp-straggler: rank 1 holds rank 0 up; 'show on the timeline' opens both ranks over both windows, so the
    wait is seen beside what causes it. A finding about one rank's own GPU still opens that rank alone."""
    report = analyze([SAMPLES / "ddp-straggler"])
    straggler = next(f for f in report.findings if f.rule == "straggler-rank")
    store, _ = open_store(discover([SAMPLES / "ddp-straggler"]), tmp_path / "cache")
    with store:
        tl = timeline.Timeline(store, threading.Lock())
        focus = tl.focus_of(straggler)
        assert focus.ranks == () and "ranks=" not in focus.query()
        assert focus.x0_ms <= min(w[0] for w in tl.windows.values())
        assert focus.x1_ms >= max(w[1] for w in tl.windows.values())
    nsys = analyze([SAMPLES / "nsys-torch-h100"])
    gaps = next(f for f in nsys.findings if f.rule == "gpu-gaps")
    store, _ = open_store(discover([SAMPLES / "nsys-torch-h100"]), tmp_path / "cache")
    with store:
        assert timeline.Timeline(store, threading.Lock()).focus_of(gaps).ranks == (0,)


def test_the_time_axis_counts_from_the_first_activity_not_the_window(tmp_path: Path) -> None:
    """nsys-cupy-nopool: its judged steps start about 436 ms after its first activity, which the timeline draws at
    0 ms; the axis says what its zero is, not 'the window start'."""
    store, _ = open_store(discover([SAMPLES / "nsys-cupy-nopool"]), tmp_path / "cache")
    with store:
        tl = timeline.Timeline(store, threading.Lock())
        first = store.scalar("SELECT min(capture_start_ns) FROM trace_windows")
        assert tl.ms(first) == 0 and min(w[0] for w in tl.windows.values()) > 400
    assert "first activity" in timeline.TIME_AXIS and "window" not in timeline.TIME_AXIS
