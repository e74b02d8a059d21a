"""Time the dashboard's timeline on a large trace: the DuckDB query and the drawing of each view, from the whole
trace down to a view of single intervals (what one pan or zoom costs the server).

    python benchmarks/tile_trace.py samples/decode-eager/trace.json.gz bench-data/large.json --min-mb 220
    python benchmarks/bench_timeline.py bench-data/large.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tracedoc.api import open_store
from tracedoc.pages import timeline
from tracedoc.ingest import discover


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--repeats", type=int, default=5, help="timings per view (the median is printed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        store, _ = open_store(discover([args.trace]), Path(tmp))
        with store:
            events = sum(store.scalar(f"SELECT count(*) FROM {t}") for t in ("gpu_activity", "cpu_activity"))
            tl = timeline.Timeline(store, threading.Lock())
            print(f"{args.trace}: {events:,} events, {len(tl.labels)} lanes, {tl.span_ms:,.1f} ms; store and lanes "
                  f"ready in {time.perf_counter() - start:.2f} s")
            timeline.warm_up()
            # views centred on the median interval start, so that zoomed views hold work rather than a gap
            centre = (store.scalar("SELECT median(ts_ns) FROM timeline_events") - tl.t0_ns) / 1e6
            print(f"{'view':>14} {'intervals':>10} {'binned':>6} {'query ms':>9} {'draw ms':>8}")
            for fraction in (1.0, 0.1, 0.01, 0.001, 0.0001):
                half = tl.span_ms * fraction / 2
                x0, x1 = (0.0, tl.span_ms) if fraction == 1 else (max(0.0, centre - half), centre + half)
                query, draw = [], []
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    frame, binned = tl.view(x0, x1)
                    query.append((time.perf_counter() - t) * 1e3)
                    t = time.perf_counter()
                    tl.draw((x0, x1))
                    draw.append((time.perf_counter() - t) * 1e3)
                shown = int(frame["intervals"].sum()) if binned else len(frame)
                print(f"{x1 - x0:>11,.1f} ms {shown:>10,} {'yes' if binned else 'no':>6} "
                      f"{statistics.median(query):>9.1f} {statistics.median(draw):>8.1f}")


if __name__ == "__main__":
    main()
