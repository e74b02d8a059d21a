"""Many out-of-memory failures: samples/memory-oom's Kineto trace with its one '[OutOfMemory]' event repeated, and
its allocator snapshot with its one 'oom' history entry repeated."""

from __future__ import annotations

import copy
import gzip
import json
import pickle
from pathlib import Path

from tests.conftest import SAMPLES

TRACE = SAMPLES / "memory-oom" / "trace.json.gz"
SNAPSHOT = SAMPLES / "memory-oom" / "snapshot.pickle.gz"


def many_ooms_trace(path: Path, count: int, devices: int = 1) -> Path:
    """The trace with its '[OutOfMemory]' event repeated ``count`` times, 1 µs apart, on device ids 0 to
    ``devices`` - 1 in turn."""
    doc = json.loads(gzip.decompress(TRACE.read_bytes()))
    events = doc["traceEvents"]
    oom = next(e for e in events if e.get("name") == "[OutOfMemory]")
    for n in range(1, count):
        copied = copy.deepcopy(oom)
        copied["ts"] = oom["ts"] + n
        copied["args"]["Device Id"] = n % devices
        events.append(copied)
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return path


def many_ooms_snapshot(path: Path, count: int) -> Path:
    """The snapshot with its history's 'oom' entry repeated ``count`` times (each a copy, 1 µs apart)."""
    snapshot = pickle.loads(gzip.decompress(SNAPSHOT.read_bytes()))
    history = snapshot["device_traces"][0]
    oom = next(e for e in history if e["action"] == "oom")
    history.extend({**oom, "time_us": oom["time_us"] + n} for n in range(1, count))
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return path
