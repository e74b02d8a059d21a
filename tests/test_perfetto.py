"""--format perfetto: the trace read back (Chrome JSON trace event format, as Perfetto reads it) holds the store's
events on named tracks, tracedoc's findings over their time ranges and the report's time attribution.

Perfetto's trace_processor (the `perfetto` package) fetches its binary from get.perfetto.dev on first use, which
this test cannot count on (it runs offline): it checks the format's rules that Perfetto's JSON importer relies on
instead (every event's fields, named processes and threads, slices on one thread nested)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.api import analyze
from tracedoc.cli import cli
from tracedoc.errors import InputError
from tracedoc.explore import open_store
from tracedoc.report import Report


def read_back(path: Path) -> list[dict[str, Any]]:
    events = json.loads(path.read_text())
    assert isinstance(events, list) and events
    return events


def tracks(events: list[dict[str, Any]]) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    """Process names by pid and thread names by (pid, tid), from the metadata events."""
    processes = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    return processes, threads


def slices_by_track(events: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    processes, threads = tracks(events)
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            out[(processes[e["pid"]], threads[(e["pid"], e["tid"])])].append(e)
    return out


def check_schema(events: list[dict[str, Any]]) -> None:
    """Every event as the trace event format has it; every slice on a named process and thread."""
    processes, threads = tracks(events)
    for e in events:
        assert e["ph"] in ("X", "M", "s", "f") and isinstance(e["name"], str) and isinstance(e["cat"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["args"], dict)
        if e["ph"] in ("X", "s", "f"):
            assert isinstance(e["ts"], float) and e["ts"] >= 0 and (e["ph"] != "X" or e["dur"] >= 0)
            assert e["pid"] in processes and (e["pid"], e["tid"]) in threads
        if e["ph"] in ("s", "f"):
            assert isinstance(e["id"], int) and (e["ph"] == "s" or e["bp"] == "e")
        elif e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and e["args"]["name"]


def assert_nested(slices: list[dict[str, Any]], track: tuple[str, str]) -> None:
    """Slices of one thread nest (the JSON importer drops those that overlap partially), to the ns."""
    open_ends: list[int] = []
    for s in sorted(slices, key=lambda s: (round(s["ts"] * 1000), -round(s["dur"] * 1000))):
        start, end = round(s["ts"] * 1000), round((s["ts"] + s["dur"]) * 1000)
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        assert not open_ends or end <= open_ends[-1], (track, s["name"])
        open_ends.append(end)


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("perfetto") / "ddp-straggler.perfetto.json"
    report = analyze(SAMPLES / "ddp-straggler", perfetto=path)
    return report, read_back(path)


def test_events_equal_the_stores_on_named_tracks(straggler: tuple[Report, list[dict[str, Any]]]) -> None:
    report, events = straggler
    check_schema(events)
    counts = Counter({track: len(s) for track, s in slices_by_track(events).items()})
    with open_store(SAMPLES / "ddp-straggler") as store:
        gpu = store.query("SELECT rank, device, stream, count(*) AS n FROM gpu_activity GROUP BY ALL")
        host = store.query("SELECT rank, tid, count(*) AS n FROM cpu_activity GROUP BY ALL")
        steps = store.query("SELECT rank, count(*) AS n FROM steps GROUP BY ALL")
    assert len(gpu) == 4 and len(host) >= 4 and len(steps) == 2
    for r in gpu:
        assert counts[(f"rank {r['rank']} · GPU {r['device']}", f"stream {r['stream']}")] == r["n"]  # no syncs
    for r in host:
        assert counts[(f"rank {r['rank']} · host", f"thread {r['tid']}")] == r["n"]
    for r in steps:
        assert counts[(f"rank {r['rank']} · tracedoc", "steps")] == r["n"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert any(e["name"].startswith("ncclDevKernel") or e["name"].startswith("ncclKernel") for e in kernels)


def test_each_launch_points_to_its_gpu_work(straggler: tuple[Report, list[dict[str, Any]]]) -> None:
    """A flow from each runtime call to the kernel or copy it launched, as the PyTorch profiler's own traces have:
    its start lies inside the call's slice on the host thread, its end inside the GPU work's slice."""
    _, events = straggler
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    slices = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            slices[(e["pid"], e["tid"])].append(e)

    def inside(point: dict[str, Any], kinds: tuple[str, ...]) -> bool:
        return any(s["ts"] <= point["ts"] <= s["ts"] + s["dur"] and s["cat"] in kinds
                   for s in slices[(point["pid"], point["tid"])])

    launched = {(e["pid"] // 1000, e["args"]["correlation_id"]) for e in events  # per input: pid // 1000
                if e["ph"] == "X" and e["cat"] in ("runtime", "driver")}
    gpu_work = [e for e in events if e["ph"] == "X" and e["cat"] in ("kernel", "memcpy", "memset")]
    # every piece of GPU work whose launch is in the trace (work queued before the capture began has none)
    assert len(ends) == sum(1 for e in gpu_work if (e["pid"] // 1000, e["args"]["correlation_id"]) in launched) > 2000
    for flow_id in list(starts)[:500]:
        assert inside(starts[flow_id], ("runtime", "driver")) and inside(ends[flow_id], ("kernel", "memcpy", "memset"))


def test_attribution_tracks_sum_to_the_reports(straggler: tuple[Report, list[dict[str, Any]]]) -> None:
    report, events = straggler
    ours: dict[tuple[str, str], float] = defaultdict(float)
    theirs: dict[tuple[str, str], float] = defaultdict(float)
    rows: Counter[tuple[str, str]] = Counter()
    for (process, thread), slices in slices_by_track(events).items():
        if thread.startswith("time attribution"):
            assert_nested(slices, (process, thread))  # disjoint: one cause at a time
            for s in slices:
                ours[(process + " " + thread, s["args"]["cause"])] += s["dur"] / 1000
    for row in report.attribution:
        key = (f"rank {row['rank']} · tracedoc time attribution · GPU {row['device']}", row["cause"])
        theirs[key] += row["ms"]
        rows[key] += 1
    assert set(ours) == set(theirs) and len(ours) >= 6
    for key, ms in theirs.items():
        assert ours[key] == pytest.approx(ms, abs=0.0005 * rows[key] + 1e-6), key


def test_findings_lie_over_their_time(straggler: tuple[Report, list[dict[str, Any]]]) -> None:
    """The straggler finding spans rank 1's window; every finding has its own thread."""
    report, events = straggler
    findings = [e for e in events if e["cat"].startswith("finding,")]
    assert [e["args"]["rule"] for e in findings] == [f.rule for f in report.findings] == ["straggler-rank"]
    (slice_,) = findings
    _, threads = tracks(events)
    assert threads[(slice_["pid"], slice_["tid"])] == "finding #1 · straggler-rank"
    with open_store(SAMPLES / "ddp-straggler") as store:
        store.include("trace.window")
        zero = store.scalar("SELECT least((SELECT min(ts_ns) FROM gpu_activity), "
                            "(SELECT min(ts_ns) FROM cpu_activity))")
        start, end = store.query("SELECT start_ns, end_ns FROM trace_windows WHERE rank = 1")[0].values()
    assert round(slice_["ts"] * 1000) == start - zero and round(slice_["dur"] * 1000) == end - start


def test_a_gap_finding_lies_over_its_longest_gap(tmp_path: Path) -> None:
    """nsys-torch-h100: a 0.65 s host pause; the gpu-gaps slice covers the longest gap gpu.gaps measured. Written
    by the CLI without the cache, from the store held in memory."""
    out = tmp_path / "nsys.perfetto.json"
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "nsys-torch-h100"), "--no-cache", "--out", str(out)])
    assert result.exit_code == 0, result.output
    events = json.loads(out.read_text())
    check_schema(events)
    (gap,) = [e for e in events if e["cat"].startswith("finding,") and e["args"]["rule"] == "gpu-gaps"]
    with open_store(SAMPLES / "nsys-torch-h100") as store:
        store.include("gpu.gaps")
        zero = store.scalar("SELECT least((SELECT min(ts_ns) FROM gpu_activity), (SELECT min(ts_ns) FROM cpu_activity),"
                            " (SELECT min(ts_ns) FROM steps))")
        ts, end = store.query("SELECT ts_ns, end_ns FROM gpu_gaps_all ORDER BY dur_ns DESC LIMIT 1")[0].values()
    # the report's evidence is in ms to the µs: the slice lies on the gap within 1 µs
    assert abs(gap["ts"] - (ts - zero) / 1000) <= 1 and abs(gap["dur"] - (end - ts) / 1000) <= 1
    assert gap["dur"] > 500_000  # µs
    for track, slices in slices_by_track(events).items():
        assert_nested(slices, track)


def test_cli_writes_it_by_extension_and_by_format(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "trace.perfetto.json"
    result = runner.invoke(cli, ["analyze", str(SAMPLES / "decode-eager"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    by_extension = json.loads(out.read_text())
    result = runner.invoke(cli, ["analyze", str(SAMPLES / "decode-eager"), "--format", "perfetto", "--no-cache",
                                 "--out", f"{tmp_path}/dir/"])
    assert result.exit_code == 0, result.output
    by_format = json.loads((tmp_path / "dir" / "tracedoc-report.perfetto.json").read_text())
    assert len(by_extension) == len(by_format) > 9000
    # decode-eager's kernels overlap on their stream here and there: those go to a thread beside it
    tracks_ = slices_by_track(by_extension)
    assert ("rank 0 · GPU 0", "stream 7 · overlapping") in tracks_
    for track, slices in tracks_.items():
        assert_nested(slices, track)
    # an explicit format wins over the extension of --out
    result = runner.invoke(cli, ["analyze", str(SAMPLES / "decode-eager"), "--format", "perfetto", "--out",
                                 str(tmp_path / "x.json")])
    assert result.exit_code == 0 and len(json.loads((tmp_path / "x.json").read_text())) == len(by_format)


def test_what_cannot_be_written_is_one_line_exit_2(tmp_path: Path) -> None:
    """An input without a timeline, a Dask run (no single store), and a saved report (no store) each say why."""
    runner = CliRunner()
    result = runner.invoke(cli, ["analyze", str(SAMPLES / "ncu-h100-transpose-naive"), "--format", "perfetto",
                                 "--out", str(tmp_path / "ncu.perfetto.json")])
    assert result.exit_code == 2 and "no timeline to write" in result.output
    assert not (tmp_path / "ncu.perfetto.json").exists()
    result = runner.invoke(cli, ["analyze", str(SAMPLES / "ddp-straggler"), "--format", "perfetto", "--workers", "2",
                                 "--out", str(tmp_path / "ddp.perfetto.json")])
    assert result.exit_code == 2 and "not with --workers" in result.output
    saved = tmp_path / "saved.json"
    assert runner.invoke(cli, ["analyze", str(SAMPLES / "decode-eager"), "--out", str(saved)]).exit_code == 0
    result = runner.invoke(cli, ["analyze", str(saved), "--out", str(tmp_path / "saved.perfetto.json")])
    assert result.exit_code == 2 and "give the traces for --format perfetto" in result.output
    assert not (tmp_path / "saved.perfetto.json").exists()
    with pytest.raises(InputError, match="no timeline to write"):
        analyze(SAMPLES / "ncu-h100-transpose-naive", perfetto=tmp_path / "api.perfetto.json")


def test_standard_input_without_the_cache(tmp_path: Path) -> None:
    """`zcat trace.json.gz | tracedoc analyze - --no-cache --format perfetto > x`: the inputs are read once, the
    trace written from the store that was analysed, to standard output."""
    trace = gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes())
    out = tmp_path / "stdin.perfetto.json"
    with out.open("wb") as f:
        proc = subprocess.run([sys.executable, "-m", "tracedoc", "analyze", "-", "--no-cache", "--format", "perfetto"],
                              input=trace, stdout=f, stderr=subprocess.PIPE, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    events = json.loads(out.read_text())
    assert sum(1 for e in events if e.get("cat") == "kernel") == 4608


def test_a_reader_that_stops_early_is_not_an_error() -> None:
    """`… --format perfetto | head`: exit 141 (as a shell reports SIGPIPE), nothing on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "tracedoc", "analyze", str(SAMPLES / "decode-eager"),
                             "--format", "perfetto"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.read(100)
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141 and not err.strip(), err.decode()
