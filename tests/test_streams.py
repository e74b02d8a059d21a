"""A compressed input is a stream of its unpacked bytes (tracedoc/ingest/compressed.py ``Unpacking``) wrapped around
its format's reader: readers that parse as they read (``load_stream``) never see an unpacked copy, the others get
one saved from the stream; the format's size bound holds on the stream as on the copy."""

from __future__ import annotations

import dataclasses
import gzip
import lzma
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tracedoc import formats, ingest
from tracedoc.errors import InputError
from tracedoc.ingest import compressed
from tracedoc.store import Store

HANG = SAMPLES / "hang-4rank-stuck"
FR_ROWS = ("SELECT source_id, count(*) AS n, sum(record_id) AS r, count(DISTINCT profiling_name) AS p "
           "FROM fr_entries GROUP BY source_id ORDER BY source_id")


def _packed(paths: list[Path], into: Path, kind: str) -> list[Path]:
    into.mkdir()
    pack = gzip.compress if kind == "gzip" else lzma.compress
    out = [into / f"{p.name}.{'gz' if kind == 'gzip' else 'xz'}" for p in paths]
    for src, dst in zip(paths, out):
        dst.write_bytes(pack(src.read_bytes()))
    return out


def _rows(paths: list[Path], sql: str) -> list[tuple]:
    with Store.create(None) as store:
        ingest.load_all(store, ingest.discover(paths))
        return store.con.execute(sql).fetchall()


@pytest.mark.parametrize("kind", ["gzip", "xz"])
def test_compressed_dumps_and_traces_are_read_from_their_stream(tmp_path: Path, kind: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The four flight-recorder dumps of hang-4rank-stuck, compressed, give the rows the plain dumps give, and a
    compressed PyTorch trace its events, with no unpacked copy saved for either."""
    dumps = sorted(HANG.glob("trace_rank_*"))
    plain = _rows(dumps, FR_ROWS)
    assert len(plain) == 4 and all(row[1] for row in plain)

    def no_copy(self: compressed.Unpacking, out: Path) -> None:
        raise AssertionError(f"{self.name} was unpacked into a file")

    monkeypatch.setattr(compressed.Unpacking, "save", no_copy)
    assert _rows(_packed(dumps, tmp_path / "dumps", kind), FR_ROWS) == plain
    trace = tmp_path / "trace.json"
    trace.write_bytes(gzip.decompress((SAMPLES / "decode-eager" / "trace.json.gz").read_bytes()))
    events = _rows([trace], "SELECT event_count FROM sources")
    assert _rows(_packed([trace], tmp_path / "trace", kind), "SELECT event_count FROM sources") == events


def test_the_formats_bound_holds_on_the_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flight-recorder dump read from its stream stops at the format's max_bytes (lowered here below the dump's
    size) with the format's one-line error, as an unpacked copy did."""
    dump = sorted(HANG.glob("trace_rank_*"))[0]
    size = dump.stat().st_size
    small = dataclasses.replace(formats.BY_NAME["flight_recorder"], max_bytes=size - 1)
    monkeypatch.setitem(formats.BY_NAME, "flight_recorder", small)
    packed = _packed([dump], tmp_path / "dump", "gzip")
    with pytest.raises(InputError, match=rf"^{packed[0]}: unpacks to more than {size - 1:,} bytes, larger than any "
                                         "flight_recorder file$"):
        _rows(packed, FR_ROWS)
