"""Many small ranks: samples/ddp-straggler's rank 1 trace cut to its first timed events, written once per rank with
the rank and world size its distributedInfo declares changed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.conftest import SAMPLES

SOURCE = SAMPLES / "ddp-straggler" / "rank1.trace.json.gz"


def many_rank_traces(folder: Path, ranks: int, events: int = 400) -> Path:
    """``folder`` holding rank{r}.trace.json.gz for r < ``ranks``: the source's metadata events and its first
    ``events`` timed events (by start), rank r of a world of ``ranks``."""
    doc = json.loads(gzip.decompress(SOURCE.read_bytes()))
    timed = sorted((e for e in doc["traceEvents"] if "ts" in e and e.get("ph") != "M"), key=lambda e: e["ts"])
    doc["traceEvents"] = [e for e in doc["traceEvents"] if "ts" not in e or e.get("ph") == "M"] + timed[:events]
    info = doc["distributedInfo"]
    info["world_size"] = ranks
    info["pg_config"][0]["pg_size"] = ranks
    info["pg_config"][0]["ranks"] = list(range(ranks))
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        info["rank"] = rank
        (folder / f"rank{rank}.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return folder
