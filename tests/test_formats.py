"""Each input format is declared once (tracedoc/ingest/base.py FORMATS): its reader module exists and names it,
and the analysis groups it feeds exist; ingest, the store's choice of analyses and the run kinds read that one
list."""

from __future__ import annotations

import gzip
import importlib
import inspect
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from tracedoc import analyze, kinds
from tracedoc.errors import InputError
from tracedoc.ingest import FORMATS as READERS
from tracedoc.ingest import reader
from tracedoc.ingest.base import (
    FORMATS,
    HEALTH,
    Format,
    PreparesFiles,
    Reader,
    ReadsCompressed,
    ReadsMany,
    SetsAsideInDirectory,
)
from tracedoc.store.modules import applies, group_formats


def test_every_declared_format_has_its_reader_and_its_groups() -> None:
    assert list(READERS) == [f.name for f in FORMATS]
    groups = {p.name for p in resources.files("tracedoc.analyses").iterdir() if p.is_dir()}
    for f in FORMATS:
        assert f.name == importlib.import_module(f.module).FORMAT
        assert set(f.groups) <= groups, f.name
        assert all(f.name in group_formats()[g] for g in f.groups)


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
                             (ReadsCompressed, "load_compressed"), (PreparesFiles, "prepare"),
                             (SetsAsideInDirectory, "redundant_in_directory")):
        if hasattr(module, member):
            assert _parameters(getattr(module, member)) == _parameters(getattr(protocol, member)), member


def test_the_readers_offer_what_their_formats_need() -> None:
    """PyTorch ranks are parsed together and as they unpack; Nsight Systems reports are exported together first
    and an export beside its report is set aside; every other format is one file at a time."""
    offered = {}
    for f in FORMATS:
        found = reader(f.name)
        members = {"many": found.many, "streamed": found.streamed, "prepares": found.prepares,
                   "sets_aside": found.sets_aside}
        offered[f.name] = tuple(name for name, member in members.items() if member is not None)
    assert offered.pop("torch") == ("many", "streamed")
    assert offered.pop("nsys") == ("prepares", "sets_aside")
    assert set(offered.values()) == {()}


def test_the_run_kinds_and_the_analyses_follow_the_declarations() -> None:
    for f in FORMATS:
        assert kinds.kind_of([f.name]) == f.kind
        assert f.distributable == (f.name in ("torch", "nsys", "flight_recorder"))
    assert kinds.kind_of(["not_a_format"]) == HEALTH
    assert applies("hang.progress", ["flight_recorder"], 2) and not applies("hang.progress", ["torch"], 2)
    assert applies("memory.timeline", ["torch_memory"], 1) and applies("gpu.idle", ["nsys"], 1)
    assert not applies("gpu.idle", ["ncu"], 1) and not applies("attribution.time", ["flight_recorder"], 2)
    assert applies("trace.summary", ["ncu"], 1) and applies("gpu.idle", ["ncu", "torch"], 1)


def test_a_compressed_file_is_unpacked_no_further_than_its_format_declares(tmp_path: Path) -> None:
    """The GEMM ladder declares 16 MiB: a gzipped file that sniffs as one and unpacks to more is refused."""
    path = tmp_path / "ladder.json.gz"
    path.write_bytes(gzip.compress(b'{"format": "tracedoc-gemm-ladder", "rungs": []' + b" " * (17 << 20) + b"}"))
    with pytest.raises(InputError, match=r"unpacks to more than 16,777,216 bytes, larger than any gemm_ladder file"):
        analyze([path], use_cache=False)
