"""Time the dashboard's timeline on a large trace: the DuckDB queries and the drawing of each view, from the whole
trace down to a view of single intervals (what one pan or zoom costs the server).

    python benchmarks/tile_trace.py samples/decode-eager/trace.json.gz bench-data/large.json --min-mb 1800
    python benchmarks/bench_timeline.py bench-data/large.json --cache-dir bench-data/cache
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tracedoc.api import open_store
from tracedoc.ingest import discover
from tracedoc.pages import timeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--repeats", type=int, default=5, help="timings per view (the median is printed)")
    parser.add_argument("--cache-dir", type=Path, help="keep the store here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        store, _ = open_store(discover([args.trace]), args.cache_dir or Path(tmp))
        with store:
            events = sum(store.scalar(f"SELECT count(*) FROM {t}") for t in ("gpu_activity", "cpu_activity"))
            ready = time.perf_counter()
            tl = timeline.Timeline(store, threading.Lock())
            tl.make_bins()  # made after the dashboard's first page; timed here with the lanes, as before
            intervals = store.scalar("SELECT (SELECT count(*) FROM timeline_marks) + "
                                     "(SELECT count(*) FROM timeline_work)")
            print(f"{args.trace}: {events:,} events, {intervals:,} intervals in {len(tl.lanes)} lanes, "
                  f"{tl.span_ms:,.1f} ms; store in {ready - start:.2f} s, lanes in {time.perf_counter() - ready:.2f} s")
            timeline.warm_up()
            # views centred on the median interval start, so that zoomed views hold work rather than a gap
            centre = tl.ms(store.scalar("SELECT median(ts_ns) FROM timeline_work"))
            print(f"{'view':>14} {'intervals':>10} {'drawn as':>22} {'query ms':>9} {'draw ms':>8}")
            for fraction in (1.0, 0.1, 0.01, 0.001, 0.0001):
                half = tl.span_ms * fraction / 2
                x0, x1 = (tl.start_ms, tl.end_ms) if fraction == 1 else (centre - half, centre + half)
                query, draw = [], []
                for _ in range(args.repeats):
                    t = time.perf_counter()
                    parts = tl.view(x0, x1)
                    query.append((time.perf_counter() - t) * 1e3)
                    t = time.perf_counter()
                    tl.draw((x0, x1))
                    draw.append((time.perf_counter() - t) * 1e3)
                shown = sum(int(f["intervals"].sum()) if binned else len(f) for f, binned in parts.values())
                drawn = " + ".join(f"{name} {'shaded' if binned else 'rects'}" for name, (_, binned) in parts.items())
                print(f"{x1 - x0:>11,.1f} ms {shown:>10,} {drawn:>22} {statistics.median(query):>9.1f} "
                      f"{statistics.median(draw):>8.1f}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
