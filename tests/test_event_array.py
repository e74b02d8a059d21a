"""Where the events lie in a chrome trace: any member order, members of any kind after ``traceEvents``, any layout
and compression, and a bare top-level array of events. Checked on real traces from other projects (tests/data, each
with its SOURCE.md) and on edited copies of them, against what Python's json module reads."""

from __future__ import annotations

import gzip
import json
import lzma
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT
from tracedoc.api import open_store
from tracedoc.cli import cli
from tracedoc.ingest import discover

DATA = ROOT / "tests" / "data"
INFO_AFTER = DATA / "kineto-info-after-events" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
PROPERTIES_AFTER = DATA / "kineto-device-properties-after-events" / "gaunernst_bert-small-uncased__1016001.json.gz"
ARRAY = DATA / "kineto-json-array" / "worker0.pt.trace.json.gz"
GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
             "memset": "memset"}


def stored(path: Path, cache: Path) -> dict[str, Any]:
    """What tracedoc stored of one trace: its event count and rank, GPU activity per kind, host rows, devices."""
    store, _ = open_store(discover([path]), cache)
    with store:
        return {"events": store.scalar("SELECT event_count FROM sources"),
                "rank": store.scalar("SELECT rank FROM sources"),
                "gpu": {r["kind"]: (r["n"], r["d"]) for r in store.query(
                    "SELECT kind, count(*) AS n, sum(dur_ns) AS d FROM gpu_activity GROUP BY kind")},
                "cpu": store.scalar("SELECT count(*) FROM cpu_activity"),
                "devices": [r["name"] for r in store.query("SELECT name FROM devices ORDER BY device")]}


def events_of(path: Path) -> list[dict[str, Any]]:
    """The trace's events, read the slow, obvious way."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc if isinstance(doc, list) else doc["traceEvents"]


def gpu_counts(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(GPU_KINDS[str(e.get("cat")).lower()] for e in events
                   if e.get("ph") == "X" and str(e.get("cat")).lower() in GPU_KINDS)


def test_a_log_array_after_the_events_is_not_read_as_events(tmp_path: Path) -> None:
    """HTA's CPU-only rank: Kineto's INFO log array follows traceEvents (the trace was refused as malformed JSON)."""
    got = stored(INFO_AFTER, tmp_path)
    assert got["events"] == len(events_of(INFO_AFTER)) == 30
    assert got["rank"] == 34
    assert got["cpu"] == sum(1 for e in events_of(INFO_AFTER) if e.get("ph") == "X" and e.get("cat") != "Trace")


def test_device_properties_after_the_events_are_read_as_the_header(tmp_path: Path) -> None:
    """TraceLens's H100 trace: deviceProperties (a list of objects) follows traceEvents; its events are all read
    and its GPU is taken from the members after them."""
    got = stored(PROPERTIES_AFTER, tmp_path)
    events = events_of(PROPERTIES_AFTER)
    assert got["events"] == len(events)
    assert {kind: n for kind, (n, _) in got["gpu"].items()} == dict(gpu_counts(events)) == {"kernel": 60, "memcpy": 1}
    assert got["devices"] == ["NVIDIA H100 80GB HBM3"]


def _reordered(doc: dict[str, Any], order: str) -> dict[str, Any]:
    """The document with traceEvents first, last or where it was, and a Kineto-style INFO log list after it."""
    events = doc["traceEvents"]
    rest = {k: v for k, v in doc.items() if k != "traceEvents"}
    log = {"INFO": ["INFO:... CuptiActivityProfiler.cpp:1232] Traces Recorded: ]", 'quote \\" and ] [ } {',
                    "a path that ends C:\\"]}
    if order == "first":
        return {"traceEvents": events, **log, **rest}
    if order == "last":
        return {**rest, **log, "traceEvents": events}
    keys = list(doc)
    at = keys.index("traceEvents") + 1
    return {**{k: doc[k] for k in keys[:at]}, **log, **{k: doc[k] for k in keys[at:]}}


def _text(doc: dict[str, Any], layout: str) -> bytes:
    """The document written pretty-printed, Kineto's way (one event a line) or on one line."""
    if layout == "pretty":
        return json.dumps(doc, indent=2).encode()
    if layout == "one line":
        return json.dumps(doc, separators=(",", ":")).encode()
    members = [f"{json.dumps(key)}: " + ("[\n" + ",\n".join(json.dumps(e) for e in value) + "\n]"
                                        if key == "traceEvents" else json.dumps(value)) for key, value in doc.items()]
    return ("{\n" + ",\n".join(members) + "\n}\n").encode()


def _compressed(text: bytes, compression: str, path: Path) -> Path:
    data = {"plain": text, "gzip": gzip.compress(text, mtime=0), "xz": lzma.compress(text)}[compression]
    path.write_bytes(data)
    return path


LAYOUTS = [("first", "pretty", "plain"), ("middle", "kineto", "gzip"), ("last", "one line", "xz"),
           ("first", "one line", "gzip"), ("middle", "pretty", "xz"), ("last", "kineto", "plain"),
           ("middle", "one line", "plain")]


@pytest.mark.parametrize(("order", "layout", "compression"), LAYOUTS, ids=["-".join(c) for c in LAYOUTS])
def test_any_member_order_layout_and_compression_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  order: str, layout: str, compression: str) -> None:
    """Edited copies of the H100 trace (its members reordered, a log list with brackets and quotes in its strings
    after the events, written three ways, plain, gzip or xz), read in parts of 16 KiB: what the original gives."""
    import tracedoc.ingest.chrome.chrome_trace as chrome_trace

    original = stored(PROPERTIES_AFTER, tmp_path / "original")
    doc = json.loads(gzip.decompress(PROPERTIES_AFTER.read_bytes()))
    edited = _compressed(_text(_reordered(doc, order), layout), compression, tmp_path / f"trace.json.{compression}")
    monkeypatch.setattr(chrome_trace, "_PART_BYTES", 16 << 10)
    monkeypatch.setattr(chrome_trace, "_MIN_PART_BYTES", 16 << 10)
    assert stored(edited, tmp_path / "edited") == original


def test_a_bare_array_of_events_reads_like_the_same_events_in_an_object(tmp_path: Path) -> None:
    """The 2020 Kineto plugin sample (edited copy, see its SOURCE.md) is a top-level array of events, as the Chrome
    trace format allows; it was refused as not a trace. Read gzipped (as it streams) and plain, with and without
    the closing ']' (which the format makes optional) and with a trailing comma: the rows of the same events
    wrapped in {"traceEvents": ...}."""
    text = gzip.decompress(ARRAY.read_bytes())
    events = json.loads(text)
    wrapped = stored(_compressed(json.dumps({"traceEvents": events}).encode(), "plain", tmp_path / "w.json"),
                     tmp_path / "c0")
    assert wrapped["events"] == 1034 and wrapped["gpu"]["kernel"][0] == 200
    unclosed = text.rstrip().removesuffix(b"]")
    variants = {"gzip": (text, "gzip"), "plain": (text, "plain"), "no ]": (unclosed, "plain"),
                "no ], gzip": (unclosed + b",\n", "gzip"), "comma before ]": (unclosed + b",\n]\n", "plain")}
    for i, (name, (variant, compression)) in enumerate(variants.items()):
        path = _compressed(variant, compression, tmp_path / f"array{i}.json.{compression}")
        assert stored(path, tmp_path / f"c{i + 1}") == wrapped, name


def _run(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", str(path)])
    return result.exit_code, result.stderr


@pytest.mark.parametrize("cut", ["in the log list", "in the events", "after the last member"])
def test_a_trace_broken_around_its_events_is_one_line_and_exit_2(tmp_path: Path, cut: str) -> None:
    """Edited copies of HTA's CPU-only rank: cut inside the INFO list after the events, inside the events (the
    rest of the document kept), or with its closing '}' gone. Each is refused in one line, exit 2."""
    text = gzip.decompress(INFO_AFTER.read_bytes())
    info = text.index(b'"INFO"')
    broken = {"in the log list": text[:info + 200],
              "in the events": text[:info - 400] + text[info - 10:],
              "after the last member": text.rstrip()[:-1]}[cut]
    path = tmp_path / "broken.json"
    path.write_bytes(broken)
    code, err = _run(path)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and str(path) in err
