"""The Memory page for samples/memory-leak (a training loop keeping every step's 32 MiB output, made on an H200),
opened in headless Chromium as a user would: the timeline of allocated and reserved memory is drawn with the steps
on its axis, and the breakdown of what is live at the peak by site. What the browser holds is checked against the
trace's own ``[memory]`` events (read here with the json module) and the steps' ``ProfilerStep#N`` ranges. A
screenshot is saved in the test's folder (`pytest --basetemp=DIR` keeps it)."""

from __future__ import annotations

import gzip
import json
import lzma
import pickle
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, needs_chromium, page_text, served
from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.dashboard.app import route
from tracedoc.pages import memory
from tracedoc.pages.fragments import Html

LEAK = SAMPLES / "memory-leak"
MIB = 1 << 20

# Per figure of the page: the columns of its data sources and its ranges, as the browser has them.
FIGURES_JS = """() => { const out = [];
  for (const doc of window.Bokeh.documents) for (const m of doc.all_models) if (m.type === 'Figure') {
    const sources = [];
    for (const r of m.renderers) if (r.data_source) {
      const d = r.data_source.data, cols = {};
      for (const [k, v] of (d instanceof Map ? d.entries() : Object.entries(d))) cols[k] = Array.from(v);
      sources.push(cols); }
    out.push({sources, y_factors: m.y_range.factors ? Array.from(m.y_range.factors, String) : null,
              x: [m.x_range.start, m.x_range.end]}); }
  return out; }"""
# Bokeh draws into canvases inside shadow roots: each canvas with its size and how many of its pixels are not blank.
CANVAS_JS = """() => { const out = [];
  const walk = (node) => { if (node.shadowRoot) walk(node.shadowRoot);
    for (const c of node.children || []) { if (c.tagName === 'CANVAS' && c.width > 0 && c.height > 0) {
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let inked = 0;
        for (let i = 0; i < px.length; i += 4)
          if (px[i + 3] > 0 && (px[i] < 235 || px[i + 1] < 235 || px[i + 2] < 235)) inked++;
        out.push({w: c.width, h: c.height, inked}); }
      walk(c); } };
  walk(document.body); return out; }"""


def trace_memory() -> tuple[list[dict[str, Any]], dict[int, tuple[float, float]]]:
    """The GPU's allocator events, and each ProfilerStep#N's (start, end) in µs."""
    events = json.loads(gzip.decompress((LEAK / "trace.json.gz").read_bytes()))["traceEvents"]
    memory_events = [e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    steps = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")}
    return memory_events, steps


def test_the_page_holds_the_curve_and_the_breakdown() -> None:
    report = analyze([LEAK], use_cache=False)
    sections = memory.sections(report)
    titles = [s.title for s in sections]
    assert titles.index("Memory over time") < titles.index("Live at the peak, by allocation site")
    chart = next(s for s in sections if s.title == "Memory over time").items[0]
    assert not isinstance(chart, Html)
    events, steps = trace_memory()
    data = next(r.data_source.data for r in chart.renderers if "allocated" in r.data_source.data)
    assert max(data["allocated"]) == pytest.approx(max(e["args"]["Total Allocated"] for e in events) / MIB)
    assert max(data["reserved"]) == pytest.approx(max(e["args"]["Total Reserved"] for e in events) / MIB)
    bands = chart.renderers[0].data_source.data
    assert bands["label"] == [str(n) for n in sorted(steps)]
    # each band lasts as long as its ProfilerStep#N range (ms; the curve's origin is shared)
    widths = [r - left for left, r in zip(bands["left"], bands["right"], strict=True)]
    assert widths == pytest.approx([(steps[n][1] - steps[n][0]) / 1000 for n in sorted(steps)], abs=0.002)


@needs_chromium
def test_the_memory_page_in_the_browser(tmp_path: Path) -> None:
    events, steps = trace_memory()
    peak_mib = max(e["args"]["Total Allocated"] for e in events) / MIB
    with chromium() as browser, served([LEAK], tmp_path / "cache", tmp_path / "server.log") as url:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.set_default_timeout(60_000)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url + route(memory))
        try:
            page.get_by_text("Memory over time").filter(visible=True).first.wait_for()
            page.locator(".bk-Figure canvas").first.wait_for()
        except Exception as exc:
            page.screenshot(path=str(tmp_path / "memory.failed.png"), full_page=True)
            exc.add_note(f"the page's text: {page_text(page)}")
            raise
        page.wait_for_timeout(1500)  # the charts paint
        page.screenshot(path=str(tmp_path / "memory.png"), full_page=True)
        figures = page.evaluate(FIGURES_JS)
        canvases = page.evaluate(CANVAS_JS)
        assert dialogs == [] and "Traceback" not in page.content()
        page.close()
    timeline = next(f for f in figures if any("allocated" in s for s in f["sources"]))
    line = next(s for s in timeline["sources"] if "allocated" in s)
    assert max(line["allocated"]) == pytest.approx(peak_mib)
    bands = next(s for s in timeline["sources"] if "label" in s)
    assert bands["label"] == [str(n) for n in sorted(steps)]
    assert timeline["x"][1] >= max(line["t"])  # the whole curve in view
    breakdown = next(f for f in figures if f["y_factors"] and any("run.py:48" in y for y in f["y_factors"]))
    bars = next(s for s in breakdown["sources"] if "value" in s)
    by_site = dict(zip(bars["site"], bars["value"], strict=True))
    assert by_site["mem-wl/run.py:48 (forward)"] == pytest.approx(10 * 32)  # ten leaked outputs live at the peak
    # both charts are drawn: canvases of a plot's size with ink on them
    drawn = [c for c in canvases if c["w"] >= 300 and c["h"] >= 150 and c["inked"] > 2000]
    assert len(drawn) >= 2, canvases


def test_the_failed_request_is_marked_where_it_happened() -> None:
    """samples/memory-oom: the leak under a memory cap until Adam asks for 64 MiB and fails. The cross sits at the
    trace's [OutOfMemory] event: its time from the first allocator event or step, and the allocated bytes it
    reports."""
    sample = SAMPLES / "memory-oom"
    events = json.loads(gzip.decompress((sample / "trace.json.gz").read_bytes()))["traceEvents"]
    gpu = [e for e in events if e.get("name") in ("[memory]", "[OutOfMemory]")
           and e["args"].get("Device Type") == 1]
    steps = [e["ts"] for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
    origin = min([e["ts"] for e in gpu if e["name"] == "[memory]"] + steps)
    (oom,) = [e for e in gpu if e["name"] == "[OutOfMemory]"]
    assert oom["args"]["Bytes"] == 64 * MIB
    report = analyze([sample], use_cache=False)
    chart = next(s for s in memory.sections(report) if s.title == "Memory over time").items[0]
    crosses = [r for r in chart.renderers if getattr(r.glyph, "marker", None) == "x"]
    (cross,) = crosses
    data = cross.data_source.data
    assert data["x"][0] == pytest.approx((oom["ts"] - origin) / 1000, abs=0.002)
    assert data["y"][0] == pytest.approx(oom["args"]["Total Allocated"] / MIB)
    legend = [item.label["value"] for item in chart.legend[0].items]
    assert "out of memory: 64.0 MiB requested" in " ".join(legend)


def test_a_snapshot_alone_is_drawn_from_its_history(tmp_path: Path) -> None:
    """samples/memory-fragment's snapshot without its trace: the curve from its history, its steps from its
    ProfilerStep annotations, and the bars of what was live at the peak by site: the fifty 4 MiB buffers held at
    run.py:93 (main) are 200 MiB."""
    snapshot = tmp_path / "snapshot.pickle"
    snapshot.write_bytes(gzip.decompress((SAMPLES / "memory-fragment" / "snapshot.pickle.gz").read_bytes()))
    report = analyze([snapshot], use_cache=False)
    sections = memory.sections(report)
    curve = next(s for s in sections if s.title == "Memory over time").items[0]
    assert curve.below[-1].items  # the legend below the plot, not over the curve
    drawn = max(max(r.data_source.data.get("allocated") or [0]) for r in curve.renderers
                if hasattr(r, "data_source"))
    assert drawn * (1 << 20) == pytest.approx(report.memory[0]["peak_bytes"])
    assert len(report.metrics["memory_steps"]) >= 10
    chart = next(s for s in sections if s.title == "Live at the peak, by allocation site").items[0]
    data = chart.renderers[0].data_source.data
    by_site = dict(zip(data["site"], data["value"], strict=True))
    assert by_site["mem-wl/run.py:93 (main)"] == pytest.approx(50 * 4)


def test_a_snapshot_without_history_shows_what_was_live_when_dumped(tmp_path: Path) -> None:
    """The same snapshot with its history left out (an edited copy: _record_memory_history off): no curve, and the
    bars of what was live when it was dumped."""
    real = pickle.loads(gzip.decompress((SAMPLES / "memory-fragment" / "snapshot.pickle.gz").read_bytes()))
    snapshot = tmp_path / "snapshot.pickle"
    snapshot.write_bytes(pickle.dumps({"segments": real["segments"]}, protocol=4))
    sections = memory.sections(analyze([snapshot], use_cache=False))
    assert "Memory over time" not in [s.title for s in sections]
    chart = next(s for s in sections if s.title == "Live in the snapshot, by allocation site").items[0]
    data = chart.renderers[0].data_source.data
    by_site = dict(zip(data["site"], data["value"], strict=True))
    assert by_site["mem-wl/run.py:93 (main)"] == pytest.approx(50 * 4)


def test_cuda_memory_events_draw_one_line_of_what_cuda_gave(tmp_path: Path) -> None:
    """samples/nsys-memory-leak: Nsight Systems' CUDA memory events count one total, what the process took from
    CUDA; the chart draws that one line (not allocated and reserved as if they were two) and says so. Its peak is
    the export's own running sum of CUDA_GPU_MEMORY_USAGE_EVENTS."""
    export = tmp_path / "leak.sqlite"
    with lzma.open(SAMPLES / "nsys-memory-leak" / "sample.sqlite.xz") as src, export.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    with sqlite3.connect(export) as con:
        (peak,) = con.execute("""
            SELECT max(total) FROM (SELECT sum(CASE memoryOperationType WHEN 1 THEN -bytes ELSE bytes END)
                                        OVER (ORDER BY start ROWS UNBOUNDED PRECEDING) AS total
                                    FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind IN (2, 3, 5))""").fetchone()
    report = analyze([export], use_cache=False)
    section = next(s for s in memory.sections(report) if s.title == "Memory over time")
    assert "what the process took from CUDA" in section.note
    chart = section.items[0]
    legend = [item.label["value"] for item in chart.legend[0].items]
    assert "taken from CUDA" in legend and "allocated" not in legend and "reserved" not in legend
    lines = [r for r in chart.renderers if type(r.glyph).__name__ == "Line"]
    (line,) = lines
    assert max(line.data_source.data["allocated"]) == pytest.approx(peak / MIB)
