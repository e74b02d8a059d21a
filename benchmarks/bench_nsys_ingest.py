"""Nsight Systems export → store ingestion speed, in rows per second (not a test).

Loads each export into a fresh store with each available reader (ADBC's SQLite driver and the sqlite3 fallback)
and prints rows read, seconds and rows/s. ``--tile N`` first copies the export and repeats its kernel, memcpy,
runtime and NVTX rows N times (shifted in time), to measure on more rows than a small sample has.

    python benchmarks/bench_nsys_ingest.py samples/nsys-torch-h100/sample.sqlite --tile 64
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from tracedoc.ingest import nsys, sqlite_arrow
from tracedoc.store import Store

_TILED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")


def tile(src: Path, dst: Path, times: int) -> None:
    """Copy ``src`` to ``dst`` with the event tables repeated ``times`` times, each copy after the last."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in _TILED:
        if table not in tables:
            continue
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        rows, span = con.execute(f'SELECT max(rowid), max("end") - min(start) + 1 FROM {table}').fetchone()
        for k in range(1, times):
            shifted = ", ".join(f'"{c}" + {k * (span or 1)}' if c in ("start", "end")
                                else "NULL" if c == "eventId" else f'"{c}"' for c in cols)
            con.execute(f"INSERT INTO {table} SELECT {shifted} FROM {table} WHERE rowid <= {rows}")
    con.commit()
    con.close()


def measure(path: Path, reader: str) -> tuple[int, float]:
    """Rows read and seconds for one load of ``path`` into a new store."""
    saved = sqlite_arrow._adbc
    if reader == "sqlite3":
        sqlite_arrow._adbc = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.create(Path(tmp) / "bench.duckdb")
            start = time.perf_counter()
            result = nsys.load(store, 0, path, Path(tmp))
            seconds = time.perf_counter() - start
            store.close()
    finally:
        sqlite_arrow._adbc = saved
    return result.event_count, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exports", nargs="+", type=Path)
    parser.add_argument("--tile", type=int, default=1, help="repeat the event rows this many times first")
    args = parser.parse_args()
    readers = ["adbc", "sqlite3"] if sqlite_arrow._adbc is not None else ["sqlite3"]
    with tempfile.TemporaryDirectory() as tmp:
        for export in args.exports:
            path = export
            if args.tile > 1:
                path = Path(tmp) / f"tiled-{export.name}"
                tile(export, path, args.tile)
            size = path.stat().st_size / 1e6
            for reader in readers:
                rows, seconds = measure(path, reader)
                print(f"{export.name} ×{args.tile} ({size:.0f} MB) {reader:8s} {rows:>10,d} rows "
                      f"{seconds:7.2f} s {rows / seconds / 1e6:6.2f} M rows/s")


if __name__ == "__main__":
    main()
