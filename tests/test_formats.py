"""Each input format is declared once (tracedoc/ingest/base.py FORMATS): its reader module exists and names it,
and the analysis groups it feeds exist; ingest, the store's choice of analyses and the run kinds read that one
list."""

from __future__ import annotations

import gzip
import importlib
from importlib import resources
from pathlib import Path

import pytest

from tracedoc import analyze, kinds
from tracedoc.errors import InputError
from tracedoc.ingest import FORMATS as READERS
from tracedoc.ingest.base import FORMATS, HEALTH
from tracedoc.store.modules import applies, group_formats


def test_every_declared_format_has_its_reader_and_its_groups() -> None:
    assert list(READERS) == [f.name for f in FORMATS]
    groups = {p.name for p in resources.files("tracedoc.analyses").iterdir() if p.is_dir()}
    for f in FORMATS:
        assert f.name == importlib.import_module(f.module).FORMAT
        assert set(f.groups) <= groups, f.name
        assert all(f.name in group_formats()[g] for g in f.groups)


def test_the_run_kinds_and_the_analyses_follow_the_declarations() -> None:
    for f in FORMATS:
        assert kinds.kind_of([f.name]) == f.kind
        assert f.distributable == (f.name in ("torch", "nsys", "flight_recorder"))
    assert kinds.kind_of(["not_a_format"]) == HEALTH
    assert applies("hang.progress", ["flight_recorder"], 2) and not applies("hang.progress", ["torch"], 2)
    assert applies("memory.timeline", ["torch_memory"], 1) and applies("gpu.idle", ["nsys"], 1)


def test_a_compressed_file_is_unpacked_no_further_than_its_format_declares(tmp_path: Path) -> None:
    """The GEMM ladder declares 16 MiB: a gzipped file that sniffs as one and unpacks to more is refused."""
    path = tmp_path / "ladder.json.gz"
    path.write_bytes(gzip.compress(b'{"format": "tracedoc-gemm-ladder", "rungs": []' + b" " * (17 << 20) + b"}"))
    with pytest.raises(InputError, match=r"unpacks to more than 16,777,216 bytes, larger than any gemm_ladder file"):
        analyze([path], use_cache=False)
