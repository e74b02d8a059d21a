"""Wall time, MB/s and peak RSS of `tracedoc analyze` (ingest + every analysis + rules) vs HTA loading the same file.

HTA (HolisticTraceAnalysis) runs from its own virtual environment, so the two never share a process:

    python -m venv .venv-hta && .venv-hta/bin/pip install HolisticTraceAnalysis==0.5.0
    python benchmarks/tile_trace.py samples/decode-eager/trace.json.gz bench-data/large.json --min-mb 220
    python benchmarks/bench_torch_ingest.py bench-data/large.json --hta-python .venv-hta/bin/python

Each tool runs --repeat times in a fresh process; the table shows the best wall time and its peak RSS.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HTA = ("import sys, logging; logging.disable(logging.WARNING);"
        "from hta.trace_analysis import TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])")


def measure(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd``; return (wall seconds, peak RSS in MB) of the child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def _json_bytes(path: Path) -> int:
    """The trace's size as JSON: the file size, or the decompressed size of a gzipped file."""
    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    if not gzipped:
        return path.stat().st_size
    with gzip.open(path, "rb") as f:
        return sum(len(block) for block in iter(lambda: f.read(1 << 24), b""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--hta-python", type=Path, help="python of a venv with HolisticTraceAnalysis")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    size_mb = _json_bytes(args.trace) / 1e6  # of the JSON itself, also for a .json.gz
    rows = []
    runs = [("tracedoc analyze (ingest + analyses + rules)",
             [sys.executable, "-m", "tracedoc", "analyze", str(args.trace), "--no-cache", "--format", "json"])]
    tmp = Path(tempfile.mkdtemp(prefix="bench-hta-"))
    if args.hta_python:
        shutil.copy(args.trace, tmp / args.trace.name)  # HTA reads every trace of a directory
        runs.append(("HTA 0.5 TraceAnalysis (load only)", [str(args.hta_python), "-c", _HTA, str(tmp)]))
    for label, cmd in runs:
        results = [measure(cmd) for _ in range(args.repeat)]
        wall, rss = min(results)
        rows.append((label, wall, size_mb / wall, rss))
        print(f"{label}: " + ", ".join(f"{w:.2f} s/{r:.0f} MB" for w, r in results), file=sys.stderr)
    shutil.rmtree(tmp)
    print(f"\ninput: {args.trace.name}, {size_mb:.0f} MB of JSON ({args.trace.stat().st_size / 1e6:.0f} MB on disk), "
          f"{os.cpu_count()} cores\n")
    print("| tool | wall s | MB/s of JSON | peak RSS MB | RSS / JSON size |")
    print("|---|---|---|---|---|")
    for label, wall, rate, rss in rows:
        print(f"| {label} | {wall:.2f} | {rate:.0f} | {rss:.0f} | {rss / size_mb:.2f} |")


if __name__ == "__main__":
    main()
