"""tracedoc's speed against its peers on the same files, in one run: small traces, a large one, many ranks, nsys.

Every command runs in a fresh process (Python start-up included), --repeat times, the commands of one input in turn
(tracedoc, tracedoc cached, DuckDB's raw read_json of the trace, HTA, then again), so that a machine whose speed
drifts weighs on each alike. The table gives the median wall and CPU (user + system) time, MB/s of input (JSON
bytes for PyTorch traces, the export's bytes for Nsight Systems), the largest peak RSS, each tool's wall and CPU as
a ratio of tracedoc's on the same input, and the target each case has (docs/speed.md). DuckDB's read_json is the
floor of reading the trace at all: the whole Kineto object read and its event array unnested and counted. HTA
(HolisticTraceAnalysis) runs from its own virtual environment:

    python -m venv .venv-hta && .venv-hta/bin/pip install HolisticTraceAnalysis
    python benchmarks/speed.py --make bench-data                  # 200 MB trace, its .gz, 8 ranks of 25 MB
    python benchmarks/speed.py --small samples/decode-eager/trace.json.gz samples/input-slow \\
        --large bench-data/large.json bench-data/large.json.gz --ranks bench-data/ranks \\
        --hta-python .venv-hta/bin/python --memory-limit 80M

On a machine with Nsight Systems, ``--nsys EXPORT.sqlite`` times `nsys stats` (3 reports) plus `nsys analyze` against
`tracedoc analyze` on the same export (elsewhere tracedoc alone), and ``--nsys-readers EXPORT.sqlite [--tile N]``
the export's ingestion alone with each SQLite reader (ADBC's driver, Python's sqlite3), in rows/s, on the export's
event rows repeated N times. ``--snapshot FILE`` times an allocator snapshot (benchmarks/memory_snapshot.py --make).
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACEDOC = [sys.executable, "-m", "tracedoc", "analyze"]
# HTA: load the traces of a folder and compute its temporal breakdown (idle / compute / non-compute per rank).
HTA_SCRIPT = ("import sys, logging; logging.disable(logging.WARNING);"
              "from hta.trace_analysis import TraceAnalysis;"
              "TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)")
NSYS_REPORTS = "cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum"
# DuckDB reading a PyTorch trace as it is (one JSON object, its events unnested); gzip is read as it unpacks.
READ_JSON_SCRIPT = ("import sys, duckdb; path = sys.argv[1].replace(\"'\", \"''\");"
                    "duckdb.sql(f\"SELECT count(*) FROM (SELECT unnest(traceEvents) FROM read_json('{path}', "
                    "format='unstructured', maximum_object_size=4000000000))\").fetchall()")
SMALL_TARGET_S, LARGE_TARGET_MBPS, NSYS_TARGET_RATIO = 0.5, 250.0, 3.0
SNAPSHOT_TARGET_S, SNAPSHOT_TARGET_MB = 60.0, 2048


@dataclass
class Row:
    case: str
    tool: str
    input: str
    mb: float
    walls: list[float]
    rss_mb: float
    target: str = ""
    cpus: list[float] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus) if self.cpus else float("nan")


def measure(cmd: Sequence[str], cwd: Path = ROOT) -> tuple[float, float, float]:
    """Run ``cmd`` in a fresh process; (wall seconds, peak RSS MB of the largest process it waited for, CPU
    seconds: user + system). Never on a resident process (its CPU and memory would be another process's)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "TRACEDOC_RESIDENT": "0"})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: a finding at --fail-on, never given here
        raise SystemExit(f"failed: {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def repeat(case: str, tool: str, label: str, mb: float, cmd: Sequence[str], times: int, target: str = "") -> Row:
    return alternate(case, label, mb, [(tool, cmd, target)], times)[0]


def alternate(case: str, label: str, mb: float, tools: Sequence[tuple[str, Sequence[str], str]],
              times: int) -> list[Row]:
    """Each (tool, command, target) run ``times`` times, the tools in turn: A B C A B C …"""
    rows = [Row(case, tool, label, mb, [], 0.0, target) for tool, _, target in tools]
    for _ in range(times):
        for row, (_, cmd, _) in zip(rows, tools, strict=True):
            wall, rss, cpu = measure(cmd)
            row.walls.append(wall)
            row.cpus.append(cpu)
            row.rss_mb = max(row.rss_mb, rss)
    for row in rows:
        print(f"{case} {row.tool} {label}: " + ", ".join(f"{w:.2f} s/{c:.2f} CPU-s" for w, c in
                                                         zip(row.walls, row.cpus, strict=True))
              + f", peak {row.rss_mb:.0f} MB", file=sys.stderr)
    return rows


def json_mb(path: Path) -> float:
    """MB of trace JSON in a file or folder (decompressed size of gzipped files)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    total = 0
    for f in files:
        with f.open("rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        if gz:
            with gzip.open(f, "rb") as fh:
                total += sum(len(b) for b in iter(lambda: fh.read(1 << 24), b""))  # noqa: B023
        else:
            total += f.stat().st_size
    return total / 1e6


def hta_dir(path: Path, tmp: Path) -> Path:
    """A folder holding only these traces (HTA reads every trace of a folder)."""
    if path.is_dir():
        return path
    folder = tmp / f"hta-{path.name}"
    folder.mkdir()
    os.symlink(path.resolve(), folder / path.name)
    return folder


def torch_rows(case: str, paths: Sequence[Path], args: argparse.Namespace, tmp: Path) -> list[Row]:
    rows = []
    for path in paths:
        mb = json_mb(path)
        cold = [*TRACEDOC, str(path), "--no-cache", "--format", "json"]
        target = {"small": f"≤ {SMALL_TARGET_S} s", "large": f"≥ {LARGE_TARGET_MBPS:.0f} MB/s, RSS ≤ file",
                  "ranks": "≤ wall of one 200 MB rank"}[case]
        tools: list[tuple[str, Sequence[str], str]] = [("tracedoc --no-cache", cold, target)]
        if case == "large" and args.memory_limit:
            tools.append((f"tracedoc --no-cache --memory-limit {args.memory_limit}",
                          [*cold, "--memory-limit", args.memory_limit], target))
        if case == "small":
            cache = tmp / f"cache-{path.name}"
            warm = [*TRACEDOC, str(path), "--cache-dir", str(cache), "--format", "json"]
            measure(warm)  # fills the cache
            tools.append(("tracedoc, cached", warm, target))
        if path.is_file():
            tools.append(("DuckDB read_json", [sys.executable, "-c", READ_JSON_SCRIPT, str(path)], ""))
        if args.hta_python:
            tools.append(("HTA", [str(args.hta_python), "-c", HTA_SCRIPT, str(hta_dir(path, tmp))], ""))
        rows += alternate(case, path.name, mb, tools, args.repeat)
    return rows


def nsys_rows(export: Path, args: argparse.Namespace, tmp: Path) -> list[Row]:
    mb = export.stat().st_size / 1e6
    nsys = shutil.which("nsys") or "nsys"
    stats = [nsys, "stats", "--report", NSYS_REPORTS, "--format", "csv", "--force-overwrite", "true",
             "--output", str(tmp / "stats"), str(export)]
    analyze = [nsys, "analyze", "--format", "csv", "--output", str(tmp / "analyze"), "--force-overwrite", "true",
               str(export)]
    own = [*TRACEDOC, str(export), "--no-cache", "--format", "json"]
    if not shutil.which("nsys"):  # tracedoc alone, its speed per byte against the PyTorch rows
        print("nsys is not on PATH: tracedoc alone on the export", file=sys.stderr)
        return [repeat("nsys", "tracedoc --no-cache", export.name, mb, own, args.repeat)]
    rows = [repeat("nsys", "nsys stats", export.name, mb, stats, 1),
            repeat("nsys", "nsys analyze", export.name, mb, analyze, 1),
            repeat("nsys", "tracedoc --no-cache", export.name, mb, own, args.repeat,
                   f"≥ {NSYS_TARGET_RATIO:.0f}× faster than stats + analyze")]
    return rows


def snapshot_rows(snapshot: Path, args: argparse.Namespace) -> list[Row]:
    """An allocator snapshot (benchmarks/memory_snapshot.py --make), read and analysed: no peer reads one."""
    return [repeat("snapshot", "tracedoc --no-cache", snapshot.name, snapshot.stat().st_size / 1e6,
                   [*TRACEDOC, str(snapshot), "--no-cache", "--format", "json"], args.repeat,
                   f"≤ {SNAPSHOT_TARGET_S:.0f} s, RSS ≤ {SNAPSHOT_TARGET_MB:,} MB")]


def print_table(rows: list[Row]) -> None:
    print(f"\n{os.cpu_count()} cores; median wall and CPU of the runs, largest peak RSS; × tracedoc: the tool's "
          "median over tracedoc --no-cache's on the same input\n")
    print("| case | tool | input | MB | wall s | CPU s | MB/s | peak RSS MB | wall × tracedoc | CPU × tracedoc "
          "| target | met |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    single = next((r.wall for r in rows if r.case == "large" and r.tool.startswith("tracedoc")
                   and not r.input.endswith(".gz")), None)
    nsys_tools = sum(r.wall for r in rows if r.case == "nsys" and r.tool.startswith("nsys"))
    base = {(r.case, r.input): r for r in rows if r.tool == "tracedoc --no-cache"}
    for r in rows:
        met = ""
        if r.target and r.case == "small":
            met = "yes" if r.wall <= SMALL_TARGET_S else "no"
        elif r.target and r.case == "large":
            met = "yes" if r.mb / r.wall >= LARGE_TARGET_MBPS and r.rss_mb <= r.mb else "no"
        elif r.target and r.case == "ranks" and single is not None:
            met = f"{'yes' if r.wall <= single else 'no'} ({r.wall / single:.2f}× of one rank)"
        elif r.target and r.case == "snapshot":
            met = "yes" if r.wall <= SNAPSHOT_TARGET_S and r.rss_mb <= SNAPSHOT_TARGET_MB else "no"
        elif r.target and r.case == "nsys" and nsys_tools:
            met = f"{'yes' if nsys_tools / r.wall >= NSYS_TARGET_RATIO else 'no'} ({nsys_tools / r.wall:.1f}×)"
        ref = base.get((r.case, r.input))
        ratios = f"{r.wall / ref.wall:.2f} | {r.cpu / ref.cpu:.2f}" if ref else " | "
        print(f"| {r.case} | {r.tool} | {r.input} | {r.mb:.1f} | {r.wall:.2f} | {r.cpu:.2f} | {r.mb / r.wall:.0f} | "
              f"{r.rss_mb:.0f} | {ratios} | {r.target} | {met} |")


# --- making the inputs --------------------------------------------------------------------------------------------

def make_inputs(out: Path) -> None:
    """out/large.json (a 200 MB tiling of decode-eager) and its .gz, out/ranks/ (8 ranks of 25 MB: each rank of the
    two-rank ddp-straggler sample tiled to 25 MB, four copies of each with distributedInfo's rank set to 0..7)."""
    out.mkdir(parents=True, exist_ok=True)
    tile = [sys.executable, str(ROOT / "benchmarks" / "tile_trace.py")]
    large = out / "large.json"
    subprocess.run([*tile, str(ROOT / "samples/decode-eager/trace.json.gz"), str(large), "--min-mb", "200"],
                   check=True)
    with large.open("rb") as src, gzip.open(out / "large.json.gz", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
    ranks = out / "ranks"
    ranks.mkdir(exist_ok=True)
    for source_rank in (0, 1):
        tiled = out / f"ddp-rank{source_rank}.json"
        subprocess.run([*tile, str(ROOT / f"samples/ddp-straggler/rank{source_rank}.trace.json.gz"), str(tiled),
                        "--min-mb", "25"], check=True)
        for copy in range(4):
            _with_rank(tiled, ranks / f"rank{2 * copy + source_rank}.trace.json", 2 * copy + source_rank, 8)
        tiled.unlink()


def _with_rank(src: Path, dst: Path, rank: int, world_size: int) -> None:
    """A copy of a trace whose header (before traceEvents) says another rank and world size."""
    with src.open("rb") as f:
        head = f.read(1 << 16)
        split = head.index(b'"traceEvents"')
        header = re.sub(rb'("distributedInfo":\s*\{[^}]*?"rank":\s*)\d+', rb"\g<1>" + str(rank).encode(),
                        head[:split], count=1)
        header = re.sub(rb'("world_size":\s*)\d+', rb"\g<1>" + str(world_size).encode(), header, count=1)
        with dst.open("wb") as out:
            out.write(header + head[split:])
            shutil.copyfileobj(f, out, 1 << 22)


# --- Nsight Systems ingestion by reader ---------------------------------------------------------------------------

_TILED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")


def tile_export(src: Path, dst: Path, times: int) -> None:
    """Copy ``src`` to ``dst`` with the event tables repeated ``times`` times, each copy after the last in time and
    with its own correlation ids (so that a kernel still matches the one launch that issued it). The copies double
    each round: a large export takes a few SQL statements per table."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    span = max(con.execute(f'SELECT max("end") - min(start) + 1 FROM {t}').fetchone()[0] or 1
               for t in _TILED if t in tables)
    for table in _TILED:
        if table not in tables:
            continue
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        rows = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
        corr = con.execute(f"SELECT max(correlationId) + 1 FROM {table}").fetchone()[0] if "correlationId" in cols \
            else 0
        have = 1
        while have < times:
            add = min(have, times - have)
            shifted = ", ".join(f'"{c}" + {have * span}' if c in ("start", "end")
                                else f'"{c}" + {have * (corr or 0)}' if c == "correlationId"
                                else "NULL" if c == "eventId" else f'"{c}"' for c in cols)
            con.execute(f"INSERT INTO {table} SELECT {shifted} FROM {table} WHERE rowid <= {add * rows} "
                        "ORDER BY rowid")
            have += add
    con.commit()
    con.close()


def nsys_readers(exports: Sequence[Path], times: int) -> None:
    """Rows/s of loading each export into a new store, with each SQLite reader there is."""
    sys.path.insert(0, str(ROOT))
    from tracedoc.ingest.nsys import nsys, sqlite_arrow
    from tracedoc.store import Store

    readers = ["adbc", "sqlite3"] if sqlite_arrow._adbc_module() is not None else ["sqlite3"]
    with tempfile.TemporaryDirectory() as tmp:
        for export in exports:
            path = export
            if times > 1:
                path = Path(tmp) / f"tiled-{export.name}"
                tile_export(export, path, times)
            for reader in readers:
                saved = sqlite_arrow._adbc_module
                if reader == "sqlite3":
                    sqlite_arrow._adbc_module = lambda: None
                try:
                    with Store.create(None) as store:
                        start = time.perf_counter()
                        rows = nsys.load(store, 0, path, Path(tmp)).event_count
                        seconds = time.perf_counter() - start
                finally:
                    sqlite_arrow._adbc_module = saved
                print(f"{export.name} ×{times} ({path.stat().st_size / 1e6:.0f} MB) {reader:8s} {rows:>10,d} rows "
                      f"{seconds:7.2f} s {rows / seconds / 1e6:6.2f} M rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", nargs="*", type=Path, default=[], help="traces of 1 MB or less (files or folders)")
    parser.add_argument("--large", nargs="*", type=Path, default=[], help="large traces (.json or .json.gz)")
    parser.add_argument("--ranks", type=Path, help="a folder of per-rank traces")
    parser.add_argument("--nsys", type=Path,
                        help="an Nsight Systems SQLite export (against nsys where it is on PATH, else tracedoc alone)")
    parser.add_argument("--snapshot", type=Path, help="an allocator snapshot (benchmarks/memory_snapshot.py --make)")
    parser.add_argument("--nsys-readers", nargs="*", type=Path, default=[], help="exports to ingest by reader")
    parser.add_argument("--tile", type=int, default=1, help="with --nsys-readers: repeat the event rows N times")
    parser.add_argument("--hta-python", type=Path, help="python of a virtual environment with HTA")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-limit", metavar="SIZE", help="time each large trace also under this memory cap")
    parser.add_argument("--make", type=Path, metavar="DIR", help="write the large and multi-rank inputs into DIR")
    args = parser.parse_args()
    if args.make:
        make_inputs(args.make)
    if args.nsys_readers:
        nsys_readers(args.nsys_readers, args.tile)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="tracedoc-speed-") as tmp:
        rows += torch_rows("small", args.small, args, Path(tmp))
        rows += torch_rows("large", args.large, args, Path(tmp))
        if args.ranks:
            rows += torch_rows("ranks", [args.ranks], args, Path(tmp))
        if args.nsys:
            rows += nsys_rows(args.nsys, args, Path(tmp))
        if args.snapshot:
            rows += snapshot_rows(args.snapshot, args)
    if rows:
        print_table(rows)


if __name__ == "__main__":
    main()
