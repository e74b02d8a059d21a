"""How DuckDB's read of a Kineto trace's parts scales with its threads: the statement tracedoc runs on each batch of
parts (``chrome_trace._read_events``: Kineto's columns and each event's kind into the temp table ``_raw``), the same
columns parsed and hashed but not kept, and a bare scan (``count(*)``), for each part size, thread count and
``preserve_insertion_order``.

    python benchmarks/read_threads.py TRACE.json [--part-mib 32 8] [--threads 2 4 8 16] [--rounds 2]

TRACE is plain JSON (e.g. benchmarks/tile_trace.py's 205 MB tiling of decode-eager). The parts are cut as tracedoc
cuts them, all of them read in one statement (tracedoc reads them in batches of one part per thread), in one
process, each configuration on a fresh in-memory database; the best of ``--rounds`` is printed (wall and process
CPU), with MB/s of the parts' bytes.
"""

from __future__ import annotations

import argparse
import mmap
import resource
import tempfile
import time
from pathlib import Path

import duckdb

from tracedoc.ingest.chrome import chrome_trace
from tracedoc.ingest.chrome.kineto import KINETO
from tracedoc.store.store import sql_literal


def cut(trace: Path, part_bytes: int, workdir: Path) -> list[Path]:
    """The trace's event array cut into part files of about ``part_bytes`` at event boundaries, as tracedoc cuts."""
    parts = []
    with trace.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        _, start, end = chrome_trace._locate_events(mm, trace, KINETO)
        cuts = chrome_trace._event_cuts(mm, start, end, part_bytes)
        for a, b in zip(cuts, cuts[1:]):
            part = chrome_trace._write_part(mm, f.fileno(), a, b, workdir / f"part-{a}.json", trace)
            if part is not None:
                parts.append(part)
    return parts


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(sql: str, threads: int, preserve: bool) -> tuple[float, float]:
    """Wall and CPU seconds of ``sql`` on a fresh database with these settings."""
    con = duckdb.connect(":memory:", config={"threads": threads, "preserve_insertion_order": preserve})
    con.execute("SET enable_progress_bar = false")
    wall, used = time.perf_counter(), cpu()
    con.execute(sql).fetchall()
    wall, used = time.perf_counter() - wall, cpu() - used
    con.close()
    return wall, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--part-mib", type=int, nargs="+", default=[32, 8])
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print("| part MiB | parts | threads | preserve order | statement | wall s | CPU s | MB/s (wall) |")
    print("|---|---|---|---|---|---|---|---|")
    for mib in args.part_mib:
        with tempfile.TemporaryDirectory() as tmp:
            parts = cut(args.trace, mib << 20, Path(tmp))
            mb = sum(p.stat().st_size for p in parts) / 1e6
            read = (f"read_json([{', '.join(sql_literal(str(p)) for p in parts)}], format = 'array', "
                    f"columns = {KINETO.columns}, maximum_object_size = 16777216)")
            statements = {"scan": f"SELECT count(*) FROM {read}",
                          "parse": f"SELECT bit_xor(hash(ph, cat, name, pid, tid, ts, dur, id, args)) FROM {read}",
                          "_raw": f"CREATE TEMP TABLE _raw AS SELECT *, {KINETO.derived} FROM {read}"}
            for threads in args.threads:
                for preserve in (True, False):
                    for name, sql in statements.items():
                        wall, used = min(timed(sql, threads, preserve) for _ in range(args.rounds))
                        print(f"| {mib} | {len(parts)} | {threads} | {preserve} | {name} | {wall:.2f} | {used:.2f} | "
                              f"{mb / wall:.0f} |", flush=True)


if __name__ == "__main__":
    main()
