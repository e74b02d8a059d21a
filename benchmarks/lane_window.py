"""Whether a sweep over one lane gains from being cut by time (for docs/speed.md, never tests).

attribution.time sweeps each lane's boundaries with a window (a running sum and the next boundary, ordered by time,
partitioned by lane); an export of one GPU is one lane of about 4M boundaries. This times that window over 4M random
boundaries in one partition against the same boundaries cut by time into --pieces partitions, at each thread count
given, --rounds rounds in turn, and prints the medians of wall and process CPU seconds.

    python benchmarks/lane_window.py --threads 2 4 16
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckdb

_SPAN_NS = 40_000_000_000  # 40 s of trace
_SWEEP = ("CREATE OR REPLACE TABLE swept AS SELECT k, t, lead(t) OVER w AS e, "
          "sum(d) OVER (w RANGE UNBOUNDED PRECEDING) AS total FROM boundaries "
          "WINDOW w AS (PARTITION BY k{cut} ORDER BY t)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000, help="boundaries in the lane")
    parser.add_argument("--pieces", type=int, default=16, help="partitions the lane is cut into by time")
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="DuckDB thread counts to time")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    con = duckdb.connect()
    con.execute(f"CREATE TABLE boundaries AS SELECT 0 AS k, (random() * {_SPAN_NS})::BIGINT AS t, "
                f"(CASE WHEN random() < 0.5 THEN 1 ELSE -1 END)::BIGINT AS d FROM range({int(args.rows)})")
    ways = {"one partition": "", f"{args.pieces} pieces by time": f", t // {-(-_SPAN_NS // args.pieces)}"}
    for threads in args.threads:
        con.execute(f"SET threads = {int(threads)}")
        times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
        for _ in range(args.rounds):
            for way, cut in ways.items():
                cpu, wall = time.process_time(), time.perf_counter()
                con.execute(_SWEEP.format(cut=cut))
                times[way].append((time.perf_counter() - wall, time.process_time() - cpu))
        for way, runs in times.items():
            print(f"{threads:3d} threads, {way:18s}: wall {statistics.median(r[0] for r in runs):.3f} s, "
                  f"CPU {statistics.median(r[1] for r in runs):.3f} s", flush=True)


if __name__ == "__main__":
    main()
