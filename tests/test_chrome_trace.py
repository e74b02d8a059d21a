"""The shared reader of Chrome-trace JSON event arrays (tracedoc/ingest/chrome/chrome_trace.py): a timeline format
written in Chrome-trace JSON is its EventFormat and a few one-line functions (tests/chrome_format_example.py),
declared with one Format line; ingest then reads it plain, several files together, and compressed as it unpacks."""

from __future__ import annotations

import gzip
import json
import lzma
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tracedoc import formats, ingest
from tracedoc.errors import InputError
from tracedoc.formats import JSON, TIMELINE, Format
from tracedoc.ingest.chrome import chrome_trace
from tracedoc.store import Store, modules

EXAMPLE = Format("chrome_example", "tests.chrome_format_example", "Chrome trace (example)", TIMELINE, (JSON,))
TRACES = [SAMPLES / "decode-eager" / "trace.json.gz", SAMPLES / "ddp-straggler" / "rank1.trace.json.gz"]


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example format declared first among the formats (so that it, not the PyTorch reader, claims the files),
    as its Format line in tracedoc/formats.py would."""
    monkeypatch.setattr(formats, "FORMATS", (EXAMPLE, *formats.FORMATS))
    monkeypatch.setattr(modules, "FORMATS", formats.FORMATS)
    monkeypatch.setitem(formats.BY_NAME, EXAMPLE.name, EXAMPLE)  # the one dict every reader of BY_NAME holds
    monkeypatch.setattr(ingest, "FORMATS", {EXAMPLE.name: EXAMPLE.module, **ingest.FORMATS})


def _complete_events(trace: Path) -> tuple[int, int]:
    """How many complete ('X') events the trace holds and their total duration in ns, read the obvious way."""
    events = [e for e in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
              if e.get("ph") == "X" and isinstance(e.get("ts"), int | float)]
    return len(events), sum(round(max(e.get("dur", 0), 0) * 1000) for e in events)


def _stored(paths: list[Path]) -> list[tuple[int, int, int]]:
    """Per source: its row count and total duration in cpu_activity, and its event count in ``sources``."""
    with Store.create(None) as store:
        ingest.load_all(store, ingest.discover(paths))
        return [tuple(r) for r in store.con.execute(
            "SELECT s.source_id, count(c.source_id), coalesce(sum(c.dur_ns), 0) FROM sources s "
            "LEFT JOIN cpu_activity c USING (source_id) GROUP BY s.source_id ORDER BY s.source_id").fetchall()]


@pytest.mark.usefixtures("declared")
@pytest.mark.parametrize("packing", ["gzip", "xz", "plain", "plain, together"])
def test_a_new_chrome_trace_format_reads_real_traces_every_way(tmp_path: Path, packing: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real PyTorch traces read by the example format: each complete event is one row of its source, gzipped
    and xz (streamed as they unpack), plain one by one, and plain together in small parts (parts of both files in
    one pass)."""
    paths = []
    for n, trace in enumerate(TRACES):
        text = gzip.decompress(trace.read_bytes())
        path = tmp_path / f"{n}.json{'.gz' if packing == 'gzip' else '.xz' if packing == 'xz' else ''}"
        path.write_bytes(gzip.compress(text) if packing == "gzip" else lzma.compress(text) if packing == "xz" else text)
        paths.append(path)
    assert {i.format for i in ingest.discover(paths)} == {"chrome_example"}
    if packing == "plain, together":
        monkeypatch.setattr(chrome_trace, "_PART_BYTES", 256 << 10)
        monkeypatch.setattr(chrome_trace, "_MIN_PART_BYTES", 256 << 10)
        stored = _stored(paths)
    else:
        stored = [row for n, path in enumerate(paths) for row in [(n, *_stored([path])[0][1:])]]
    assert stored == [(n, *_complete_events(trace)) for n, trace in enumerate(TRACES)]


@pytest.mark.usefixtures("declared")
def test_a_new_chrome_trace_format_names_its_bad_input(tmp_path: Path) -> None:
    """The shared reader's checks hold for the new format: a file without events, malformed events, a closing
    bracket missing."""
    cases = {"empty.json": b'{"traceEvents": []}',
             "mangled.json": b'{"traceEvents": [\n{"ph": "X", "ts": 1},\n{"ph" "X"}\n]}',
             "unclosed.json": b'{"traceEvents": [\n{"ph": "X", "ts": 1}\n, "x": 1}'}
    for name, text in cases.items():
        (tmp_path / name).write_bytes(text)
    for name, message in (("empty.json", "the trace holds no events"), ("mangled.json", "malformed trace JSON"),
                          ("unclosed.json", "truncated or malformed trace")):
        with pytest.raises(InputError, match=f"{name}: {message}"), Store.create(None) as store:
            ingest.load_all(store, ingest.discover([tmp_path / name]))
