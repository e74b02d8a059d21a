"""Compressed allocator snapshots (gzip, xz) are read as they unpack (memory_snapshot.load_stream,
snapshot_pickle.read_stream), never unpacked to a file: on the samples and on larger copies of the leak's history,
with the stream cut into small chunks and the bytes held refilled at nearly every frame, they give the rows the
unpacked file gives; edited copies are read alike or refused in one line; a pickle without frames is unpacked to a
file first; and a compressed snapshot that unpacks past the inflate cap or the snapshot's own limit is refused in
one line, having held a few MiB of it at a time."""

from __future__ import annotations

import gzip
import lzma
import pickle
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tests.test_snapshot_bulk import _copies, _leak
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.errors import InputError
from tracedoc.ingest import compressed
from tracedoc.ingest.memory import memory_snapshot, snapshot_pickle
from tracedoc.store import Store

TABLES = ("memory_segments", "memory_blocks", "memory_actions", "memory_annotations")
_PACK = {"gzip": gzip.compress, "xz": lzma.compress}


def _rows(store: Store) -> dict[str, list[tuple]]:
    return {table: store.con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall() for table in TABLES}


def _from_file(raw: bytes, tmp_path: Path) -> tuple[str, object]:
    """('rows', the memory tables) of the unpacked pickle read from a file, or ('error', the message's reason)."""
    path = tmp_path / "unpacked.pickle"
    path.write_bytes(raw)
    try:
        with Store.create(None) as store:
            memory_snapshot.load(store, 1, path, tmp_path)
            return "rows", _rows(store)
    except InputError as exc:
        return "error", str(exc).removeprefix(f"{path}: ")


def _from_stream(raw: bytes, tmp_path: Path, kind: str = "gzip", chunk: int = 1000) -> tuple[str, object]:
    """The same of the pickle compressed with ``kind`` and read as it unpacks, in chunks of ``chunk`` bytes and
    with as little held ahead, so that the bytes held are refilled at nearly every frame."""
    path = tmp_path / f"snapshot.pickle.{kind}"
    path.write_bytes(_PACK[kind](raw))
    stream = compressed.Unpacking(path, kind, 1 << 30, path)
    try:
        with pytest.MonkeyPatch.context() as patch, Store.create(None) as store:
            patch.setattr(compressed, "_CHUNK", chunk)
            patch.setattr(snapshot_pickle, "_READ_AHEAD", 1)
            memory_snapshot.load_stream(store, 1, stream, tmp_path, path)
            return "rows", _rows(store)
    except InputError as exc:
        return "error", str(exc).removeprefix(f"{path}: ")


@pytest.mark.parametrize("kind", ["gzip", "xz"])
@pytest.mark.parametrize("case", ["memory-leak", "memory-oom", "snapshot-leak-default", "snapshot-oom-cap"])
def test_the_samples_read_as_they_unpack_alike(case: str, kind: str, tmp_path: Path) -> None:
    raw = gzip.decompress((SAMPLES / case / "snapshot.pickle.gz").read_bytes())
    streamed = _from_stream(raw, tmp_path, kind)
    assert streamed == _from_file(raw, tmp_path)
    assert streamed[0] == "rows" and len(streamed[1]["memory_actions"]) > 1000  # type: ignore[index]


def test_a_larger_history_reads_alike_across_chunks_and_frames(tmp_path: Path) -> None:
    raw = pickle.dumps(_copies(_leak(), 6, fresh=True), protocol=4)
    for chunk in (61, 4093, 1 << 20):  # cut inside opcodes, inside frames; several frames at once
        assert _from_stream(raw, tmp_path, chunk=chunk) == _from_file(raw, tmp_path), chunk


def test_edited_copies_read_alike_or_are_refused_in_one_line(tmp_path: Path) -> None:
    """Bytes changed at random: read from the stream, the rows or the error the file gives; a changed frame length
    may instead be refused as such (the stream is read by its frames)."""
    real = pickle.dumps(_leak(), protocol=4)
    rng = random.Random(5)
    outcomes = set()
    for _ in range(24):
        data = bytearray(real)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        streamed, read = _from_stream(bytes(data), tmp_path, chunk=8192), _from_file(bytes(data), tmp_path)
        outcomes.add(streamed[0])
        if streamed[0] == "error":
            assert "\n" not in str(streamed[1])
        if streamed != read:
            assert streamed[0] == "error" and any(why in str(streamed[1]) for why in (
                "runs past the frame", "a frame of", "without frames")), (streamed, read)
    assert outcomes == {"rows", "error"}


def test_a_pickle_without_frames_is_unpacked_to_a_file_first(tmp_path: Path) -> None:
    raw = pickle.dumps(_leak(), protocol=2)
    assert _from_stream(raw, tmp_path) == _from_file(raw, tmp_path)
    assert list(tmp_path.glob("unpacked-*")) == []  # the copy is removed


@pytest.mark.parametrize("kind", ["gzip", "xz"])
def test_a_compressed_snapshot_is_never_saved_to_a_file(kind: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Analysed as a user gives it, the compressed sample finds what its unpacked copy finds, and nothing of it is
    written to disk."""
    raw = gzip.decompress((SAMPLES / "snapshot-leak-default" / "snapshot.pickle.gz").read_bytes())
    unpacked = tmp_path / "snapshot.pickle"
    unpacked.write_bytes(raw)
    packed = tmp_path / f"snapshot.pickle.{'gz' if kind == 'gzip' else 'xz'}"
    packed.write_bytes(_PACK[kind](raw))
    expected = analyze(unpacked, use_cache=False)

    def save(self: compressed.Unpacking, out: Path) -> None:
        raise AssertionError(f"{self.name} unpacked into {out}")

    monkeypatch.setattr(compressed.Unpacking, "save", save)
    report = analyze(packed, use_cache=False)
    assert [(f.rule, f.message) for f in report.findings] == [(f.rule, f.message) for f in expected.findings]
    assert "memory-leak" in {f.rule for f in report.findings}
    assert report.memory == expected.memory


def _bomb(path: Path, unpacked_mib: int) -> None:
    """A gzipped pickle framed as torch frames them that never ends: a snapshot's empty segments and history, then
    a top-level list of 255-byte strings, about
    ``unpacked_mib`` MiB of them, in frames of 25 KiB."""
    batch = b"(" + (b"\x8c\xff" + b"a" * 255) * 100 + b"e"
    frame = b"\x95" + struct.pack("<Q", len(batch)) + batch
    head = b"}\x94(\x8c\x08segments\x94]\x94\x8c\x0ddevice_traces\x94]\x94u\x8c\x05extra\x94]\x94"
    packer = zlib.compressobj(wbits=31)
    with path.open("wb") as out:
        out.write(packer.compress(b"\x80\x04\x95" + struct.pack("<Q", len(head)) + head))
        for _ in range((unpacked_mib << 20) // len(frame)):
            out.write(packer.compress(frame))
        out.write(packer.flush())


def test_a_snapshot_bomb_is_refused_by_the_inflate_cap_holding_a_few_mib(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Some 700 KB that unpack to 100 MiB: refused past the default cap (100 times the file, at least 64 MiB), in
    one line, while at most a few MiB of it were held; the snapshot's own limit refuses it the same way."""
    path = tmp_path / "bomb.pickle.gz"
    _bomb(path, 100)
    cap = compressed.max_inflate_bytes(path.stat().st_size)
    assert cap < 100 << 20
    held = []
    refill = snapshot_pickle._Window.refill

    def refilled(self: snapshot_pickle._Window, *args: Any) -> tuple[bytes, int, int]:
        held.append(len(got := refill(self, *args)[0]))
        return got, 0, len(got)

    monkeypatch.setattr(snapshot_pickle._Window, "refill", refilled)
    with pytest.raises(InputError) as caught:
        analyze(path, use_cache=False)
    assert f"unpacks to more than {cap:,} bytes: refused as a likely decompression bomb" in str(caught.value)
    assert len(held) > 8 and max(held) <= 9 << 20  # read ahead 4 MiB, a chunk of 4 MiB, the rest of a frame
    monkeypatch.setenv("TRACEDOC_MAX_SNAPSHOT_BYTES", str(8 << 20))
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert (f"unpacks to more than {8 << 20:,} bytes, over the limit for an allocator snapshot "
            "(set TRACEDOC_MAX_SNAPSHOT_BYTES to read more)") in result.stderr
