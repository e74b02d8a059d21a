"""Each input format is declared once (tracedoc/ingest/base.py FORMATS): its reader module exists and names it;
ingest and the run kinds read that one list. The analyses say what they read in their headers (store.modules)."""

from __future__ import annotations

import gzip
import importlib
import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tracedoc import analyze, kinds
from tracedoc.errors import InputError
from tracedoc.ingest import FORMATS as READERS
from tracedoc.ingest import discover, reader
from tracedoc.ingest.base import (
    FORMATS,
    HEALTH,
    Format,
    PreparesFiles,
    Reader,
    ReadsMany,
    ReadsStream,
    SetsAsideInDirectory,
)
from tracedoc.pipeline import open_store
from tracedoc.store.modules import facts, on_client


def test_every_declared_format_has_its_reader() -> None:
    assert list(READERS) == [f.name for f in FORMATS]
    for f in FORMATS:
        assert f.name == importlib.import_module(f.module).FORMAT


def _parameters(function: Callable[..., object]) -> list[tuple[str, bool]]:
    """A function's parameters (self left out): each name and whether it is required."""
    return [(p.name, p.default is inspect.Parameter.empty) for p in inspect.signature(function).parameters.values()
            if p.name != "self"]


@pytest.mark.parametrize("declared", FORMATS, ids=lambda f: f.name)
def test_every_reader_module_keeps_the_reader_contract(declared: Format) -> None:
    """Each declared format's module has the Reader members, and each optional member it has takes the parameters
    its protocol states (the type checker checks the types; this catches a format missing from its list)."""
    module = importlib.import_module(declared.module)
    assert isinstance(module, Reader)
    for protocol, member in ((Reader, "sniff"), (Reader, "load"), (ReadsMany, "load_many"),
                             (ReadsStream, "load_stream"), (PreparesFiles, "prepare"),
                             (SetsAsideInDirectory, "redundant_in_directory")):
        if hasattr(module, member):
            assert _parameters(getattr(module, member)) == _parameters(getattr(protocol, member)), member


def test_the_readers_offer_what_their_formats_need() -> None:
    """PyTorch ranks are parsed together and as they unpack; a compressed flight-recorder dump is read from its
    stream; an Nsight Compute input unpacks itself (so that its errors and hints name the user's file); Nsight
    Systems reports are exported together first and an export beside its report is set aside; every other format is
    one file at a time, a compressed one unpacked for it."""
    offered = {}
    for f in FORMATS:
        found = reader(f.name)
        members = {"many": found.many, "streamed": found.streamed, "prepares": found.prepares,
                   "sets_aside": found.sets_aside}
        offered[f.name] = tuple(name for name, member in members.items() if member is not None)
    assert offered.pop("torch") == ("many", "streamed")
    assert offered.pop("ncu") == ("streamed",)
    assert offered.pop("flight_recorder") == ("streamed",)
    assert offered.pop("nsys") == ("prepares", "sets_aside")
    assert set(offered.values()) == {()}


def test_the_run_kinds_and_the_analyses_follow_the_declarations() -> None:
    for f in FORMATS:
        assert kinds.kind_of([f.name]) == f.kind
        assert f.distributable == (f.name in ("torch", "nsys", "flight_recorder"))
    assert kinds.kind_of(["not_a_format"]) == HEALTH


def test_a_module_applies_where_the_tables_its_header_reads_have_rows() -> None:
    """The analyses run for the inputs that wrote what their headers say they read (``-- reads:``), and those
    that compare ranks (``-- scope: ranks``) only for several ranks."""
    assert facts("ncu.cublas_ceiling").reads == ("ncu_kernels", "gemm_ladder_results")
    assert on_client("trace.summary") and on_client("ranks.stragglers") and not on_client("gpu.idle")
    stores = {name: open_store(discover([SAMPLES / name / file]), None)[0] for name, file in (
        ("hang-2rank-stuck-notiming", ""), ("memory-leak", "trace.json.gz"), ("decode-eager", ""))}
    try:
        hang, memory, eager = stores.values()
        assert hang.applies("hang.progress") and not hang.applies("memory.timeline")
        assert memory.applies("memory.report") and memory.applies("gpu.idle")
        assert not memory.applies("hang.progress") and not memory.applies("ranks.stragglers")  # one rank
        assert not eager.applies("memory.timeline") and not eager.applies("ncu.sol")
        assert not hang.applies("attribution.time") and hang.applies("trace.summary")  # no timeline there
    finally:
        for store in stores.values():
            store.close()


def test_a_compressed_file_is_unpacked_no_further_than_its_format_declares(tmp_path: Path) -> None:
    """The GEMM ladder declares 16 MiB: a gzipped file that sniffs as one and unpacks to more is refused."""
    path = tmp_path / "ladder.json.gz"
    path.write_bytes(gzip.compress(b'{"format": "tracedoc-gemm-ladder", "rungs": []' + b" " * (17 << 20) + b"}"))
    with pytest.raises(InputError, match=r"unpacks to more than 16,777,216 bytes, larger than any gemm_ladder file"):
        analyze([path], use_cache=False)
