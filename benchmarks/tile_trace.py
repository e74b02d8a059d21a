"""Build a large PyTorch profiler trace by tiling a real one in time (for benchmarks; one test tiles two copies, to
check that steps parted by time outside the steps are replayed apart: tests/test_observer.py).

Each copy of the source events is shifted by the source's time span; correlation ids, External ids, flow ids and
ProfilerStep numbers are offset so the copies stay distinct, as in a longer recording of the same job.

    python benchmarks/tile_trace.py samples/decode-eager/trace.json.gz bench-data/large.json --min-mb 220
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

_ID_ARGS = ("correlation", "External id")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a real trace (.json or .json.gz)")
    parser.add_argument("out", type=Path, help="the tiled trace to write (.json)")
    parser.add_argument("--min-mb", type=float, default=220.0, help="tile until the output is at least this big")
    args = parser.parse_args()

    with args.source.open("rb") as f:
        opener = gzip.open if f.read(2) == b"\x1f\x8b" else open
    with opener(args.source, "rt") as f:
        doc = json.load(f)
    events: list[dict[str, Any]] = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)
    ids = [_int(e["args"].get(k)) for e in events if isinstance(e.get("args"), dict) for k in _ID_ARGS]
    max_id = max(ids + [_int(e.get("id")) for e in events])
    steps = [int(e["name"].split("#")[1]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    encoded = [json.dumps(e) for e in events]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = json.dumps(doc, indent=1)[:-2]  # the object without its closing brace
    with args.out.open("w") as out:
        out.write(header + ',\n  "traceEvents": [\n')
        copies, written = 0, 0
        while written < args.min_mb * 1e6:
            for i, event in enumerate(events):
                text = encoded[i] if copies == 0 else json.dumps(_shifted(event, copies, span, max_id, step_span))
                out.write(("" if copies == 0 and i == 0 else ",\n") + "  " + text)
                written += len(text) + 4
            copies += 1
        out.write("\n  ]\n}\n")
    print(f"{args.out}: {copies} copies of {len(events)} events, {args.out.stat().st_size / 1e6:.0f} MB, "
          f"{copies * len(events):,} events")


def _shifted(event: dict[str, Any], k: int, span: float, max_id: int, step_span: int) -> dict[str, Any]:
    e = dict(event)
    if isinstance(e.get("ts"), int | float):
        e["ts"] = round(e["ts"] + k * span * 1.0001, 3)
    if "id" in e and _int(e["id"]):
        e["id"] = _int(e["id"]) + k * (max_id + 1)
    if isinstance(e.get("args"), dict):
        a = dict(e["args"])
        for key in _ID_ARGS:
            if _int(a.get(key)):
                a[key] = _int(a[key]) + k * (max_id + 1)
        e["args"] = a
    name = str(e.get("name", ""))
    if name.startswith("ProfilerStep#") and step_span:
        e["name"] = f"ProfilerStep#{int(name.split('#')[1]) + k * step_span}"
    return e


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


if __name__ == "__main__":
    main()
