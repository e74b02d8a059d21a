"""The dashboard: its pages drawn from real reports, its timeline queried per view from real stores, the serve
command's errors, and every page of `tracedoc serve` loaded in a real headless browser."""

from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from pathlib import Path
from typing import Any

import holoviews as hv
import numpy as np
import pandas as pd
import pytest
from bokeh.models import ColorBar, LinearColorMapper
from click.testing import CliRunner

from tests.browser import chromium, needs_chromium, page_text, served
from tests.conftest import SAMPLES
from tests.hostile_trace import HOSTILE, hostile_ranks
from tracedoc import Report, analyze
from tracedoc.api import open_store
from tracedoc.cli import cli
from tracedoc.dashboard.app import body
from tracedoc.dashboard.source import Loading, Target
from tracedoc.dashboard.target import resolve
from tracedoc.dashboard.views import timeline_view
from tracedoc.ingest import discover
from tracedoc.pages import hang, kernels, ncu, overlap, overview, ranks, timeline
from tracedoc.pages.charts import kernel_short
from tracedoc.pages.fragments import Html
from tracedoc.store import Store

PAGE_TIMEOUT_MS = 60_000  # the first page waits for the traces to load on a busy machine


@pytest.fixture(scope="module")
def straggler() -> Report:
    return analyze([SAMPLES / "ddp-straggler"])


@pytest.fixture(scope="module")
def hang_report() -> Report:
    return analyze([SAMPLES / "hang-slow-rank"])


def charts(sections: list[Any]) -> list[Any]:
    return [item for s in sections for item in s.items if not isinstance(item, Html)]


# --- pages, from the report only ----------------------------------------------------------------------------------

def test_ranks_page_marks_the_straggler(straggler: Report) -> None:
    assert [f.scope.rank for f in straggler.findings if f.rule == "straggler-rank"] == [1]
    heatmaps = charts(ranks.sections(straggler))
    assert len(heatmaps) == len(ranks.MAPS)
    factors = list(heatmaps[0].y_range.factors)
    assert factors == ["rank 1 (straggler)", "rank 0"]  # drawn top to bottom: rank 0 first
    source = heatmaps[0].renderers[0].data_source.data
    outlined = {y for y, width in zip(source["y"], source["line_width"]) if width}
    assert outlined == {"rank 1 (straggler)"}


def test_ranks_step_time_is_coloured_against_the_median(straggler: Report) -> None:
    """The step-time map is coloured by the % difference from the median step on a scale of at least ±10 %: the
    straggler's slow steps stand out, small differences stay pale; the waits are coloured from 0 ms."""
    steps, wait, _ = charts(ranks.sections(straggler))
    rows = straggler.metrics["rank_steps"]
    median = statistics.median(r["step_ms"] for r in rows)
    deviations = [100 * (r["step_ms"] - median) / median for r in rows]
    mapper = steps.select_one({"type": LinearColorMapper})
    span = max(max(abs(d) for d in deviations), ranks.MIN_SPAN_PCT)
    assert (mapper.low, mapper.high) == pytest.approx((-span, span))
    faster, slower = (tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in (mapper.palette[0], mapper.palette[-1]))
    assert faster[2] > faster[0] and slower[0] > slower[2]  # below the median blue, above it red
    assert sorted(steps.renderers[0].data_source.data["shade"]) == pytest.approx(sorted(deviations))
    assert steps.select_one({"type": ColorBar}).title == "% vs median"
    assert wait.select_one({"type": LinearColorMapper}).low == 0
    assert ranks.sections(straggler)[0].note.count("±") == 2


def test_hang_page_marks_the_culprit(hang_report: Report) -> None:
    [section, dumps] = hang.sections(hang_report)
    [chart, table] = section.items
    culprit = next(f for f in hang_report.findings if f.rule == "collective-hang")
    assert culprit.scope.rank == 1
    data = chart.renderers[0].data_source.data
    assert {x[0] for x, line in zip(data["x"], data["line"]) if line} == {"rank 1 (culprit)"}
    assert f"culprit: never issued seq {culprit.scope.seq}" in table.markup
    assert "trace_rank_0" in dumps.items[0].markup
    ticker = chart.yaxis[0].ticker
    assert ticker.min_interval == 1  # sequence numbers: whole ticks


def test_overview_filters(straggler: Report, hang_report: Report) -> None:
    assert overview.filter_findings(straggler, ["warning"], [], ["1"]) == straggler.findings
    assert overview.filter_findings(straggler, [], [], ["0"]) == []
    assert overview.filter_findings(hang_report, [], ["straggler-rank"], []) == []
    empty = overview.sections(straggler, [])
    assert any(s.empty == "No finding matches the filters." for s in empty)


def test_overview_shows_where_the_time_went(straggler: Report, hang_report: Report) -> None:
    """Under the headline, each GPU's time per step and cause; it stays whatever the findings' filters; a report
    that attributes no time (a hang) has no such section."""
    titles = [s.title for s in overview.sections(straggler)]
    assert titles == ["Summary", "Where the time went", "Estimated saving per finding", "Findings", "Inputs"]
    [chart] = charts([overview.sections(straggler, [])[1]])
    assert [item.label.value for item in chart.legend[0].items] == ["launch overhead", "waiting for a peer",
                                                                    "communication", "GPU computing"]
    assert "Where the time went" not in [s.title for s in overview.sections(hang_report)]


@pytest.mark.parametrize("page", [kernels, ranks, overlap, ncu])
def test_pages_without_data_say_so(page: Any, hang_report: Report) -> None:
    sections = page.sections(hang_report)
    assert len(sections) == 1 and sections[0].empty and not sections[0].items


def test_kernels_page_keeps_the_full_names(straggler: Report) -> None:
    [by_category, top] = kernels.sections(straggler)
    names = {r["name"] for r in straggler.metrics["top_kernels"]}
    chart, table = top.items
    assert set(chart.renderers[0].data_source.data["name"]) == names
    assert all(n.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in table.markup for n in names)
    assert "compute" in charts([by_category])[0].renderers[0].data_source.data
    long_names = [n for n in names if kernel_short(n) != n]
    assert long_names, "ddp-straggler's top kernels include C++ templates"
    for name in long_names:  # shown short, the full name on hover
        shown, full = escape(kernel_short(name)), escape(name)
        assert f' title="{full}">{shown}</td>' in table.markup and len(kernel_short(name)) <= 80


def test_kernel_names_are_shortened_readably() -> None:
    assert kernel_short("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
                        "at::detail::Array<char*, 1>)") == \
        "at::native::vectorized_elementwise_kernel<4, FillFunctor<…>, Array<…>>(…)"  # the functor tells it apart
    assert kernel_short("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>("
                        "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)") == \
        "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(…)"
    assert kernel_short(HOSTILE * 3) == HOSTILE * 3  # not C++: as it is


def test_ncu_page_sets_gemm_kernels_against_cublas() -> None:
    report = analyze([SAMPLES / "gemm-ladder-ncu"])
    [table] = next(s for s in ncu.sections(report) if s.title == "Against cuBLAS").items
    rows = report.metrics["ncu_cublas_ceiling"]
    assert len(rows) == 4 and table.markup.count("<tr>") == 1 + len(rows)
    wmma = next(r for r in rows if r["kernel"] == "gemm_wmma")
    assert f"{wmma['pct_of_cublas']:,.1f}" in table.markup and "4096×4096×4096" in table.markup
    assert all(s.title != "Against cuBLAS" for s in ncu.sections(analyze([SAMPLES / "ncu-h800-sglang-csv"])))
    [roofline] = next(s for s in ncu.sections(report) if s.title == "Roofline").items
    levels = [r.data_source.data["y"] for r in roofline.renderers if getattr(r.glyph, "line_dash", None)]
    assert levels == [[rows[0]["cublas_tflop_per_s"]] * 2]  # cuBLAS's measured FLOP/s, dashed, across the chart
    [labels] = [r for r in roofline.renderers if r.glyph.__class__.__name__ == "Text"]
    [dots] = [r.data_source.data for r in roofline.renderers if r.glyph.__class__.__name__ == "Scatter"]
    data = labels.data_source.data  # each point labelled with its kernel's # of the tables, at that point
    kernels = [k.get("demangled") or k["kernel"] for k in report.metrics["ncu_kernels"]]
    point = {label.split(".")[0]: (x, y, kernel) for label, x, y, kernel in zip(dots["label"], dots["x"], dots["y"],
                                                                                 dots["kernel"])}
    assert sorted(n for text in data["number"] for n in text.split(", ")) == sorted(point)
    for text, x, y in zip(data["number"], data["x"], data["y"]):
        assert (x, y) in [point[n][:2] for n in text.split(", ")]
    assert all(kernels[int(n) - 1] == kernel for n, (_, _, kernel) in point.items())


# --- timeline: DuckDB per view, datashader when binned ------------------------------------------------------------

@contextmanager
def timeline_of(sample: str, cache: Path) -> Iterator[timeline.Timeline]:
    store, _ = open_store(discover([SAMPLES / sample]), cache)
    with store:
        yield timeline.Timeline(store, threading.Lock())


@pytest.fixture(scope="module")
def straggler_timeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[timeline.Timeline]:
    with timeline_of("ddp-straggler", tmp_path_factory.getbasetemp() / "cache") as tl:
        yield tl


@pytest.fixture(scope="module")
def nsys_timeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[timeline.Timeline]:
    with timeline_of("nsys-torch-h100", tmp_path_factory.getbasetemp() / "cache") as tl:
        yield tl


def test_timeline_lanes(straggler_timeline: timeline.Timeline) -> None:
    """Per rank: steps, ranges by depth, each host thread's operators and CUDA API calls, then the GPU streams."""
    for rank in (0, 1):
        labels = [lane.label.removeprefix(f"rank {rank} · ") for lane in straggler_timeline.lanes_of([rank])]
        assert labels[0] == "steps" and labels[-2:] == [f"GPU {rank} · stream 7", f"GPU {rank} · stream 17"]
        assert any(label.endswith("· ranges, depth 1") for label in labels)
        threads = {label.split(" · ")[0] for label in labels if label.startswith("thread ")}
        assert len(threads) >= 2 and all(f"{t} · CUDA API" in labels for t in threads if f"{t} · ops" in labels)
    assert [lane.lane for lane in straggler_timeline.lanes] == list(range(len(straggler_timeline.lanes)))


def marks(tl: timeline.Timeline) -> Any:
    """Every step and range of the trace, each with its lane's label."""
    frame, binned = tl.view(tl.start_ms, tl.end_ms)["marks"]
    assert not binned
    return frame.assign(label=[tl.lanes[lane].label for lane in frame["lane"]])


def test_nested_ranges_have_their_own_rows(nsys_timeline: timeline.Timeline, tmp_path: Path) -> None:
    """nsys NVTX: 'epoch' ⊃ 'step 3' ⊃ 'checkpoint', each once, a row each ('step 3' is also the step tracedoc
    found there, in the steps lane); record_function ranges of input-slow and host-stall-sleep: 'optimizer' ⊃
    'Optimizer.step#…'."""
    frame = marks(nsys_timeline)
    where = {name: set(frame["label"][frame["name"] == name]) for name in ("epoch", "step 3", "checkpoint")}
    assert where == {"epoch": {"rank 0 · ranges"}, "step 3": {"rank 0 · ranges, depth 1", "rank 0 · steps"},
                     "checkpoint": {"rank 0 · ranges, depth 2"}}
    assert (frame["name"] == "epoch").sum() == 1
    for sample, inner in (("input-slow", "Optimizer.step#SGD.step"), ("host-stall-sleep", "Optimizer.step#AdamW.step")):
        with timeline_of(sample, tmp_path / "cache") as tl:
            frame = marks(tl)
        assert set(frame["label"][frame["name"] == "optimizer"]) == {"rank 0 · ranges"}
        assert set(frame["label"][frame["name"] == inner]) == {"rank 0 · ranges, depth 1"}
        assert set(frame["label"][frame["category"] == "step"]) == {"rank 0 · steps"}


def test_timeline_zero_is_the_reports(nsys_timeline: timeline.Timeline) -> None:
    """The gap the report places 'X ms into the trace' lies at X: the GPU's work stops there and resumes after the
    gap's length; the finding opens the timeline around it."""
    report = analyze([SAMPLES / "nsys-torch-h100"])
    gaps = next(f for f in report.findings if f.rule == "gpu-gaps")
    assert gaps.span is not None
    at, length = gaps.span.start_ms, gaps.span.dur_ms
    assert f"{at:,.0f} ms into the trace" in gaps.message.replace(",", ",")
    focus = nsys_timeline.focus_of(gaps)
    assert focus.ranks == (0,) and focus.x0_ms < at and focus.x1_ms > at + length
    work, binned = nsys_timeline.view(focus.x0_ms, focus.x1_ms)["work"]
    assert not binned
    gpu = work[work["category"].astype(str).isin(["compute", "memcpy", "memset", "communication"])]
    ends, starts = nsys_timeline.ms(gpu["end_ns"]), nsys_timeline.ms(gpu["ts_ns"])
    assert abs(ends[ends <= at + 0.01].max() - at) < 0.01  # the last GPU work before the gap ends at X
    assert abs(starts[starts >= at + 1].min() - (at + length)) < 0.01  # and the next starts after its length


def outermost(rows: list[tuple[int, int]]) -> int:
    """How many of a thread's intervals (start, end) no earlier one still covers when it starts."""
    count, covered = 0, None
    for ts, end in sorted(rows, key=lambda r: (r[0], -(r[1] - r[0]))):
        if covered is None or covered <= ts:
            count += 1
        covered = end if covered is None else max(covered, end)
    return count


def test_timeline_detail_view_holds_every_interval(tmp_path: Path) -> None:
    """input-slow zoomed out holds few enough intervals to draw each: its steps, ranges, GPU work and each thread's
    outermost operators and CUDA API calls (counted here apart from the SQL)."""
    with timeline_of("input-slow", tmp_path / "cache") as tl:
        con = tl.store.con
        calls = 0
        for kinds in (("op", "python"), ("runtime", "driver")):
            rows = con.execute(f"SELECT tid, ts_ns, ts_ns + dur_ns FROM cpu_activity "
                               f"WHERE kind IN {kinds}").fetchall()
            for tid in {r[0] for r in rows}:
                calls += outermost([(r[1], r[2]) for r in rows if r[0] == tid])
        total = sum(con.execute(sql).fetchone()[0] for sql in (
            "SELECT count(*) FROM gpu_activity", "SELECT count(*) FROM steps",
            "SELECT count(*) FROM cpu_activity WHERE kind = 'annotation' AND name NOT LIKE 'ProfilerStep#%'"))
        total += calls
        parts = tl.view(tl.start_ms, tl.end_ms)
        assert not any(binned for _, binned in parts.values())
        assert sum(len(frame) for frame, _ in parts.values()) == total <= timeline.DETAIL_MAX
        rects = tl.draw(None).get(1)
        assert isinstance(rects, hv.Rectangles) and len(rects) == total
        names = set(rects["name"])
        assert {"ProfilerStep#4", "optimizer", "cudaLaunchKernel"} <= names and any(n.startswith("aten::")
                                                                                   for n in names)


def test_timeline_hover_reads_in_readable_units(nsys_timeline: timeline.Timeline) -> None:
    assert [timeline.fmt_duration(ns) for ns in (2_025_416_468, 652_403_706, 4_210_000, 812_400, 350)] == \
        ["2.025 s", "652.4 ms", "4.210 ms", "812.4 µs", "350 ns"]
    rects = nsys_timeline.draw(None).get(1)
    epoch = rects.dframe().query("name == 'epoch'").iloc[0]
    assert (epoch["duration"], epoch["category"], epoch["lane"]) == ("2.025 s", "NVTX / annotation range",
                                                                      "rank 0 · ranges")
    assert epoch["start"] == f"{epoch['x0']:,.3f} ms" == "336.500 ms"  # 'epoch' opens 336.5 ms into the window


def test_timeline_binned_view_is_shaded_by_busy_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past DETAIL_MAX the view comes back binned: each lane's busy time per pixel column is exact (its sum is the
    lane's busy time in view) and sets the pixel's opacity, so a GPU busy part of the time is a tint, not solid."""
    with timeline_of("input-slow", tmp_path / "cache") as tl:
        x0, x1 = tl.start_ms, tl.end_ms
        detail = pd.concat([frame for frame, _ in tl.view(x0, x1).values()])
        monkeypatch.setattr(timeline, "DETAIL_MAX", 20)
        monkeypatch.setattr(timeline, "RASTER_PX", 50)
        monkeypatch.setattr(timeline, "LEVEL_MIN_BINS", 10**9)  # from the intervals, not the bins made in advance
        parts = tl.view(x0, x1)
        assert all(binned for _, binned in parts.values())
        assert sum(frame["intervals"].sum() for frame, _ in parts.values()) == len(detail)
        row = {lane.lane: lane.lane for lane in tl.lanes}
        px_ns = tl.grid(x0, x1).px_ns
        busy = timeline.busy_per_pixel(pd.concat([frame for frame, _ in parts.values()]), row, px_ns)
        gpu = tl.labels.index("rank 0 · GPU 0 · stream 7")
        kernels = detail[detail["lane"] == gpu]
        assert float(np.nansum(busy.values[gpu])) == pytest.approx(float((kernels["end_ns"] - kernels["ts_ns"]).sum()))
        raster, rects, _ = tl.draw((x0, x1)).values()
        assert len(rects) == 0 and isinstance(raster, hv.RGB)
        alpha = raster.dimension_values("A", flat=False)  # rows: lanes, from the top
        fraction = np.nansum(busy.values, axis=2) / px_ns
        drawn = fraction > 0
        assert ((alpha > 0) == drawn).all()
        expected = timeline.MIN_ALPHA + np.clip(fraction, 0, 1) * (255 - timeline.MIN_ALPHA)
        assert np.abs(alpha[drawn] - expected[drawn]).max() <= 2
        # input-slow's GPU waits for the data loader most of each step: faint pixels, few solid ones
        assert 0 < (alpha[gpu] == 255).sum() < drawn[gpu].sum() / 2


def test_timeline_wide_views_read_the_bins_made_in_advance(straggler_timeline: timeline.Timeline,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A view of the whole trace past DETAIL_MAX reads timeline_work_bins, on pixel columns aligned with the bins:
    each lane's busy time per column is the one binned from the intervals themselves."""
    tl = straggler_timeline
    monkeypatch.setattr(timeline, "DETAIL_MAX", 100)
    grid = tl.grid(tl.start_ms, tl.end_ms)
    [(level, lo_ns, bin_ns), _] = tl.levels
    assert grid.level == level and grid.px_ns % bin_ns == 0 and (grid.x0_ns - lo_ns) % bin_ns == 0
    assert grid.x0_ns <= tl.zero_ns + tl.start_ms * 1e6 and grid.end_ns >= grid.x1_ns
    con = tl.store.con
    rebinned = con.execute("SELECT * FROM timeline_rebinned(?, ?, ?, ?)",
                           [level, grid.x0_ns, grid.end_ns, grid.px_ns]).df()
    direct = con.execute("SELECT * FROM timeline_binned('timeline_work', ?, ?, ?)",
                         [grid.x0_ns, grid.end_ns, grid.px_ns]).df()
    row = {lane.lane: lane.lane for lane in tl.lanes}
    a, b = (timeline.busy_per_pixel(f, row, grid.px_ns).values for f in (rebinned, direct))
    assert np.allclose(np.nan_to_num(a), np.nan_to_num(b), rtol=1e-9, atol=1e-3)
    work, binned = tl.view(tl.start_ms, tl.end_ms)["work"]
    assert binned and work["intervals"].sum() == direct["intervals"].sum() == len(con.table("timeline_work"))


def test_timeline_zoomed_bins_clip_what_started_before_the_view(straggler_timeline: timeline.Timeline) -> None:
    """A wide view that starts inside the trace, on a bin's edge: intervals running into it from before count from
    the view's start, as the direct binning clips them, so its first column is not darkened by time before it."""
    tl = straggler_timeline
    con = tl.store.con
    level, lo_ns, bin_ns = tl.levels[0]
    hi_ns = con.execute("SELECT max(end_ns) FROM timeline_work").fetchone()[0]
    px_ns = 4 * bin_ns  # the narrowest columns read from the bins; a view is RASTER_PX of them
    checked = 0
    for x0_ns in range(lo_ns + 40 * bin_ns, hi_ns - timeline.RASTER_PX * px_ns, 97 * bin_ns):
        x1_ns = x0_ns + timeline.RASTER_PX * px_ns
        crossing = con.execute("SELECT count(*) FROM timeline_work WHERE ts_ns < ? AND end_ns > ?",
                               [x0_ns, x0_ns]).fetchone()[0]
        rebinned = con.execute("SELECT * FROM timeline_rebinned(?, ?, ?, ?)", [level, x0_ns, x1_ns, px_ns]).df()
        direct = con.execute("SELECT * FROM timeline_binned('timeline_work', ?, ?, ?)", [x0_ns, x1_ns, px_ns]).df()
        row = {lane.lane: lane.lane for lane in tl.lanes}
        a, b = (timeline.busy_per_pixel(f, row, px_ns).values for f in (rebinned, direct))
        assert np.allclose(np.nan_to_num(a), np.nan_to_num(b), rtol=1e-9, atol=1e-3), x0_ns
        checked += crossing > 0
    assert checked  # at least one view begins inside an interval


def test_timeline_focus_round_trips_through_the_url(straggler_timeline: timeline.Timeline) -> None:
    """A slice of 'Where the time went' opens its step on its rank; the URL's query gives the same focus back, and
    a malformed one none."""
    focus = straggler_timeline.focus_of_slice(1, 4)
    step = straggler_timeline.steps[(1, 4)]
    assert focus.ranks == (1,) and focus.x0_ms < step[0] < step[1] < focus.x1_ms
    args = {k: [v.encode()] for k, v in (p.split("=") for p in focus.query().lstrip("?").split("&"))}
    again = timeline.Focus.parse({k: [urllib.parse.unquote(v[0].decode()).encode()] for k, v in args.items()})
    assert again == timeline.Focus(round(focus.x0_ms, 6), round(focus.x1_ms, 6), (1,))
    assert timeline.Focus.parse({"start": [b"nan"], "end": [b"2"]}) is None
    assert timeline.Focus.parse({"start": [b"<script>"], "end": [b"2"]}) is None


def test_timeline_of_a_report_says_it_has_none() -> None:
    pane = timeline_view(None)
    assert "saved report holds no events" in pane.object


# --- loading and errors -------------------------------------------------------------------------------------------

def test_pages_show_the_loading_progress(tmp_path: Path) -> None:
    """Until the data is there a page shows a spinner and what is being done: each file read, then the analysis."""
    from tracedoc.dashboard.app import page_app

    loading = Loading(resolve([SAMPLES / "ddp-straggler"]), tmp_path / "cache")
    seen: list[str] = []
    shown = loading._progress
    loading._progress = lambda message: (seen.append(message), shown(message))
    app = page_app(loading, overview)
    spinner, status = app.objects[1].objects[0].objects
    assert spinner.value and "starting…" in status.object
    loading.start()
    assert loading.done.wait(60) and loading.error is None
    assert [m.split(":")[0] for m in seen] == ["reading file 1 of 2", "reading file 2 of 2", "analysing"]
    loading.store.close()


def test_what_only_the_timeline_needs_waits_for_the_first_page(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline's bins for wide views and datashader compiled (for its shaded views) would slow the first page
    down: they are made once a page drawn from the loaded data has been shown, not as soon as the data is loaded;
    the overview's links into the timeline need neither."""
    from tracedoc.dashboard import source
    from tracedoc.dashboard.app import page_app

    shown_at_warm_up: list[bool] = []
    warmed = threading.Event()
    loading = Loading(resolve([SAMPLES / "ddp-straggler"]), tmp_path / "cache")
    monkeypatch.setattr(source, "WARM_UP_AFTER_S", 600.0)
    monkeypatch.setattr(source, "warm_up", lambda: (shown_at_warm_up.append(loading.shown.is_set()), warmed.set()))
    loading.start()
    assert loading.done.wait(60) and loading.error is None
    assert not warmed.wait(1.0) and not loading.shown.is_set()
    assert loading.store is not None and loading.timeline is not None
    bins = "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'timeline_work_bins'"
    assert loading.store.scalar(bins) == 0
    assert loading.report is not None and loading.report.findings
    assert all(loading.timeline.focus_of(f) for f in loading.report.findings)  # the overview's links
    assert loading.store.scalar(bins) == 0
    page_app(loading, overview)  # drawn at once; outside a server a drawn page counts as shown
    assert warmed.wait(60) and shown_at_warm_up == [True]
    assert loading.store.scalar(bins) == 1 and loading.timeline.levels
    loading.store.close()


def test_a_failed_load_shows_one_line_in_every_page(tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"  # a real trace cut in half: recognised, then failing to load
    whole = gzip.decompress((SAMPLES / "input-slow" / "trace.json.gz").read_bytes())
    bad.write_bytes(whole[: len(whole) // 2])
    loading = Loading(Target(inputs=discover([bad])), tmp_path / "cache")
    loading.start()
    assert loading.done.wait(60)
    assert loading.error and "\n" not in loading.error
    for page in (overview, timeline, kernels):
        text = body(loading, page).object
        assert "Could not load the input" in text and "Traceback" not in text


def test_a_saved_report_and_store_are_served(tmp_path: Path, hang_report: Report) -> None:
    saved = tmp_path / "report.json"
    saved.write_text(hang_report.to_json())
    assert resolve([saved]).report is not None
    cache = tmp_path / "cache"
    analyze([SAMPLES / "hang-slow-rank"], cache_dir=cache)
    [store] = cache.glob("*.duckdb")
    loading = Loading(resolve([store]), cache)
    loading.start()
    assert loading.done.wait(60) and loading.error is None
    assert [f.rule for f in loading.report.findings] == [f.rule for f in hang_report.findings]
    loading.store.close()


@pytest.mark.parametrize("content, needle", [(b"not a database", "not a tracedoc store"),
                                             (b'{"findings": [', "not a tracedoc JSON report")])
def test_serve_rejects_bad_input_in_one_line(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / ("x.duckdb" if content.startswith(b"not") else "x.json")
    path.write_bytes(content)
    for target in (path, tmp_path / "missing.json.gz"):
        result = CliRunner().invoke(cli, ["serve", str(target), "--no-show"])
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
    assert needle in CliRunner().invoke(cli, ["serve", str(path), "--no-show"]).output


def test_serve_without_the_dashboard_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "panel", None)
    result = CliRunner().invoke(cli, ["serve", str(SAMPLES / "hang-slow-rank"), "--no-show"])
    assert result.exit_code == 2
    assert "pip install 'tracedoc[dashboard]'" in result.output and len(result.output.strip().splitlines()) == 1


def test_an_incomplete_store_is_refused(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "partial.duckdb")
    store.close()
    result = CliRunner().invoke(cli, ["serve", str(tmp_path / "partial.duckdb"), "--no-show"])
    assert result.exit_code == 2 and "incomplete tracedoc store" in result.output


# --- a real browser -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


def visit(browser: Any, url: str, shot: Path, texts: list[str], figures: int) -> tuple[Any, list[str]]:
    """Open a page, wait for its texts and at least ``figures`` drawn Bokeh figures, save a screenshot.

    Returns the open page (the caller closes it) and the dialogs it raised (dismissed).
    """
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    try:
        for text in texts:
            page.get_by_text(text).filter(visible=True).first.wait_for()
    except Exception as exc:
        page.screenshot(path=str(shot.with_suffix(".failed.png")), full_page=True)  # what the page showed instead
        exc.add_note(f"the page's text: {page_text(page)}")
        raise
    if figures:
        page.locator(".bk-Figure").nth(figures - 1).wait_for()
        page.locator(".bk-Figure canvas").first.wait_for()
    page.wait_for_timeout(300)  # let the last canvases paint before the screenshot
    page.screenshot(path=str(shot), full_page=True)
    return page, dialogs


LEGEND_LABELS_JS = """() => { const out = [];
  for (const doc of window.Bokeh.documents) for (const model of doc.all_models)
    if (model.type === 'Legend') out.push(model.items.map(item => item.label.value));
  return out; }"""


def legends(page: Any) -> list[list[str]]:
    """The labels of every legend the page's Bokeh documents hold, as the browser has them."""
    return page.evaluate(LEGEND_LABELS_JS)


def hover_time_went(page: Any) -> str:
    """Move the mouse over the bars of 'Where the time went' (the page's first chart) until Bokeh's hover shows a
    segment: its cause, where, detail, time and share of the step; returns the tooltip's text ('' if none)."""
    box = page.locator(".bk-Figure").first.bounding_box()
    for fx in (0.23, 0.31, 0.39, 0.15, 0.19, 0.27, 0.35):  # across rank 0's bars, at the height of GPU computing
        page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * 0.75)
        page.wait_for_timeout(250)
        share = page.get_by_text("% of the step").filter(visible=True)
        if share.count():
            return share.first.locator("xpath=ancestor::*[contains(., 'cause')][1]").inner_text()
    return ""


@needs_chromium
def test_dashboard_pages_of_a_multi_rank_trace(browser: Any, tmp_path: Path) -> None:
    """Every page of a two-rank trace whose kernel is named like an injection: findings, charts, no script run."""
    target = hostile_ranks(tmp_path / "ranks")
    with served([target], tmp_path / "cache", tmp_path / "server.log") as url:
        expectations = {
            "/": (["One rank holds the others up at the collectives", "straggler-rank", "Severity",
                   "Where the time went", "waiting for a peer"], 2),
            "/timeline": (["Wheel or drag a box to zoom"], 1),
            "/kernels": (["Top kernels", HOSTILE], 2),
            "/ranks": (["Wait inside collectives"], 3),
            "/overlap": (["Communication and compute"], 1),
        }
        for path, (texts, figures) in expectations.items():
            page, dialogs = visit(browser, url + path, tmp_path / f"{path.strip('/') or 'overview'}.png", texts,
                                  figures)
            try:
                assert dialogs == [], path
                assert page.locator("img").count() == 0, path
                if path == "/kernels":
                    assert page.get_by_text(HOSTILE, exact=True).count() >= 1
                if path == "/ranks":
                    assert page.locator("tr.hl").count() == 3  # rank 1's three steps
                if path == "/":
                    assert "of which" in page.get_by_text("GPU busy").first.inner_text()  # the busy breakdown
                    assert ["launch overhead", "waiting for a peer", "communication",
                            "GPU computing"] in legends(page)  # the window's causes, top to bottom as stacked
                    tooltip = hover_time_went(page)
                    assert all(f"{field}:" in tooltip for field in ("cause", "where", "detail", "time", "share")) \
                        and "rank 0 · GPU 0, " in tooltip and "% of the step" in tooltip, tooltip
                    assert page.get_by_text("If fixed: step").filter(visible=True).count() == 1
                if path == "/timeline":
                    labels = timeline_figure(page)["labels"]
                    assert [label.split(" · ")[0] for label in labels[:2]] == ["rank 0", "rank 0"]
                    assert {"rank 0 · steps", "rank 1 · steps", "rank 1 · GPU 1 · stream 7"} <= set(labels)
                assert "Traceback" not in page.content()
            finally:
                page.close()


@needs_chromium
def test_dashboard_hang_and_ncu_pages(browser: Any, tmp_path: Path, hang_report: Report) -> None:
    """A saved hang report (no timeline) and a cached Nsight Compute store: their pages, and pages without data."""
    saved = tmp_path / "hang-report.json"
    saved.write_text(hang_report.to_json())
    with served([saved], tmp_path / "cache", tmp_path / "hang.log") as url:
        for path, texts, figures in (("/hang", ["culprit: never issued seq 3", "Process group 0"], 1),
                                     ("/timeline", ["a saved report holds no events"], 0)):
            page, dialogs = visit(browser, url + path, tmp_path / f"hang-{path.strip('/')}.png", texts, figures)
            page.close()
            assert dialogs == []
    cache = tmp_path / "ncu-cache"
    analyze([SAMPLES / "ncu-h800-sglang-csv"], cache_dir=cache)
    [store] = cache.glob("*.duckdb")
    with served([store], cache, tmp_path / "ncu.log") as url:
        for path, texts, figures in (("/ncu", ["Roofline", "Warp stall reasons", "distribution_elementwise"], 3),
                                     ("/hang", ["No NCCL flight-recorder dumps"], 0)):
            page, dialogs = visit(browser, url + path, tmp_path / f"ncu-{path.strip('/')}.png", texts, figures)
            page.close()
            assert dialogs == []


# sample, the pages to visit with the texts each must show and the Bokeh figures it must draw
SERVED_SAMPLES = {
    "nsys": ("nsys-torch-h100", {"/": (["GPU idle while the host works", "gpu-idle-host-bound"], 1),
                                 "/timeline": (["Wheel or drag a box to zoom"], 1),
                                 "/kernels": (["Top kernels"], 2)}),
    "flight-recorder": ("hang-4rank-stuck", {"/": (["collective-hang", "no saving to estimate"], 0),  # no bar
                                             "/hang": (["culprit: never issued seq 3", "trace_rank_3"], 1)}),
    "health": ("health-2xh200", {"/": (["gpu-power-capped", "informational, no saving"], 0)}),  # nothing broken
}


@needs_chromium
@pytest.mark.parametrize("kind", sorted(SERVED_SAMPLES))
def test_dashboard_of_each_input_format(browser: Any, tmp_path: Path, kind: str) -> None:
    """`tracedoc serve SAMPLE` of an Nsight Systems export, flight-recorder dumps and GPU telemetry: their pages."""
    sample, pages = SERVED_SAMPLES[kind]
    with served([SAMPLES / sample], tmp_path / "cache", tmp_path / "server.log") as url:
        for path, (texts, figures) in pages.items():
            page, dialogs = visit(browser, url + path, tmp_path / f"{kind}-{path.strip('/') or 'overview'}.png",
                                  texts, figures)
            try:
                assert dialogs == [] and "Traceback" not in page.content(), path
            finally:
                page.close()


FIGURE_JS = """() => {
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models)
    if (m.type === 'Figure' && m.left.length && m.left[0].ticker.ticks) {
      const labels = m.left[0].major_label_overrides;
      return {x: [m.x_range.start, m.x_range.end], y: [m.y_range.start, m.y_range.end],
              ticks: Array.from(m.left[0].ticker.ticks),
              labels: Array.from(labels instanceof Map ? labels.values() : Object.values(labels))};
    }
  return null; }"""
FRAME_JS = """() => { const found = [];
  const walk = (v) => { if (!v) return; if (v.frame && v.model.type === 'Figure') found.push(v.frame.bbox);
                        for (const c of (v.child_views || [])) walk(c); };
  for (const v of Object.values(window.Bokeh.index)) walk(v);
  const b = found[0]; return b ? [b.left, b.top, b.width, b.height] : null; }"""


def timeline_figure(page: Any) -> dict[str, Any]:
    """The timeline's ranges and lane labels as the browser has them."""
    page.wait_for_function(f"({FIGURE_JS})() !== null")
    return page.evaluate(FIGURE_JS)


def hover_at(page: Any, x_ms: float, lane: int) -> str:
    """Move the mouse onto the timeline at ``x_ms`` in the row of ``lane`` (0 on top); the tooltip's text."""
    figure = timeline_figure(page)
    left, top, width, height = page.evaluate(FRAME_JS)
    box = page.locator(".bk-Figure").first.bounding_box()
    (x0, x1), rows = figure["x"], len(figure["ticks"])
    x, y = box["x"] + left + (x_ms - x0) / (x1 - x0) * width, box["y"] + top + (lane + 0.5) / rows * height
    for dx in (-1, 0):  # a move onto the point: Bokeh's hover follows mouse moves
        page.mouse.move(x + dx, y)
        page.wait_for_timeout(200)
    duration = page.get_by_text("duration:").filter(visible=True).first
    duration.wait_for()
    return duration.locator("xpath=ancestor::*[contains(., 'lane:')][1]").inner_text()


@needs_chromium
def test_timeline_in_the_browser(browser: Any, tmp_path: Path) -> None:
    """nsys-torch-h100: the gpu-gaps card opens the timeline on the gap's time range and rank, where the nested
    'checkpoint' range shows in its own row; the wheel zooms time only and the lane labels stay."""
    report = analyze([SAMPLES / "nsys-torch-h100"])
    gaps = next(f for f in report.findings if f.rule == "gpu-gaps")
    assert gaps.span is not None
    at, length = gaps.span.start_ms, gaps.span.dur_ms
    with served([SAMPLES / "nsys-torch-h100"], tmp_path / "cache", tmp_path / "server.log") as url:
        page, dialogs = visit(browser, url + "/", tmp_path / "nsys-overview.png", ["The GPU stops for long stretches"],
                              1)
        try:
            card = page.locator("article.finding", has_text="gpu-gaps")
            card.get_by_text("show on the timeline").click()
            page.wait_for_url("**/timeline?**")
            assert "ranks=0" in page.url
            figure = timeline_figure(page)
            (x0, x1), labels = figure["x"], figure["labels"]
            assert x0 < at < at + length < x1 and x1 - x0 < 1.5 * length  # the gap, a little either side
            assert labels[:4] == ["rank 0 · steps", "rank 0 · ranges", "rank 0 · ranges, depth 1",
                                  "rank 0 · ranges, depth 2"]
            assert labels[-1] == "rank 0 · GPU 0 · stream 7"
            assert "step 3" in hover_at(page, at + length / 2, 0)  # the step tracedoc found, from the NVTX ranges
            assert "epoch" in hover_at(page, at + length / 2, 1)
            tip = hover_at(page, at - 0.2, len(labels) - 1)  # the GPU's last work before the gap
            assert re.search(r"duration:\s*[\d.,]+ (µs|ms)", tip), tip
            tip = hover_at(page, at + length / 2, 3)  # the nested range, in the depth-2 row
            assert "checkpoint" in tip and "1.094 s" in tip, tip
            page.screenshot(path=str(tmp_path / "nsys-timeline-gap.png"), full_page=True)  # full page: a relayout
            page.wait_for_timeout(800)
            box = page.locator(".bk-Figure").first.bounding_box()
            page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
            for _ in range(3):
                page.mouse.wheel(0, -300)
                page.wait_for_timeout(400)
            page.wait_for_function(f"({FIGURE_JS})().x[1] - ({FIGURE_JS})().x[0] < {0.9 * (x1 - x0)}")
            zoomed = timeline_figure(page)
            assert zoomed["y"] == figure["y"] and zoomed["labels"] == labels  # the lanes neither zoom nor go
            page.wait_for_timeout(800)
            page.screenshot(path=str(tmp_path / "nsys-timeline-zoomed.png"))
            with page.expect_download(timeout=60_000) as download:  # the trace for Perfetto, from the served store
                page.get_by_text("Download for Perfetto").click()
            events = json.loads(Path(download.value.path()).read_text())
            assert any(e.get("name") == "checkpoint" for e in events)
            assert any(gaps.title in str(e.get("name")) or "gpu-gaps" in json.dumps(e) for e in events)
        finally:
            page.close()
    assert dialogs == []


@needs_chromium
def test_overview_filters_in_the_browser(browser: Any, tmp_path: Path) -> None:
    """Choosing a severity in the overview's filter leaves only those findings, numbered as in the report."""
    from playwright.sync_api import expect

    report = analyze([SAMPLES / "nsys-torch-h100"])
    critical = [f"{i}. {f.title}" for i, f in enumerate(report.findings, 1) if f.severity == "critical"]
    assert 0 < len(critical) < len(report.findings)
    with served([SAMPLES / "nsys-torch-h100"], tmp_path / "cache", tmp_path / "server.log") as url:
        page, dialogs = visit(browser, url + "/", tmp_path / "before.png", [critical[0]], 1)
        try:
            cards = page.locator("article.finding h3")
            assert cards.count() == len(report.findings)
            page.locator(".choices").nth(0).click()  # the Severity multi-choice
            page.locator(".choices__list--dropdown .choices__item--choice", has_text="critical").first.click()
            expect(cards).to_have_count(len(critical))  # Playwright's locators see into Panel's shadow DOM
            assert cards.all_inner_texts() == critical
            page.screenshot(path=str(tmp_path / "critical.png"), full_page=True)
        finally:
            page.close()
    assert dialogs == []
