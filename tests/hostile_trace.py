"""A copy of a real two-rank trace whose second-busiest kernel on rank 0 is named like an HTML injection."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from tests.conftest import SAMPLES

HOSTILE = "<img src=x onerror=alert(1)>"
SOURCE = SAMPLES / "ddp-straggler"
RENAMED = "nvjet_sm90_tst_192x192_64x3_1x2_h_bz_coopB_NTN"  # 32 launches, 23 ms on rank 0


def hostile_ranks(directory: Path, name: str = HOSTILE) -> Path:
    """samples/ddp-straggler with RENAMED called ``name`` (HOSTILE) in rank 0's trace; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    doc = json.loads(gzip.decompress((SOURCE / "rank0.trace.json.gz").read_bytes()))
    renamed = 0
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel" and event.get("name") == RENAMED:
            event["name"] = name
            renamed += 1
    assert renamed == 32, renamed
    (directory / "rank0.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    shutil.copyfile(SOURCE / "rank1.trace.json.gz", directory / "rank1.trace.json.gz")
    return directory
