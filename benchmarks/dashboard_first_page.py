"""How long the dashboard's first page takes once the trace is in the cache: `tracedoc serve` started, timed from
the terminal's ``tracedoc dashboard at …`` line (printed once the store is ready and the server starts) to the end
of the first ``GET /`` after the pages can be drawn (``the pages are ready`` on the terminal), then stopped.

Each run is a fresh process with a cache directory of its own, copied from ``--cache``: ``first`` serves without a
kept report (only the store is copied, so the server analyses it), ``again`` with the report kept by a serve run
before them (the store and its reports copied). Commands given with ``--tracedoc`` (as many as wanted, e.g. this tree's
and an older install's) run in turn, A B A B …, so that a machine whose speed drifts weighs on each alike. Printed
per run and as medians: the wall seconds and the server's CPU seconds (user + system, from /proc) over that span
and over the GET alone, and the first command's time as a ratio of each other's (A/B), pair by pair.

    python benchmarks/tile_trace.py samples/decode-eager/trace.json.gz /tmp/big.json --min-mb 100
    python benchmarks/dashboard_first_page.py /tmp/big.json --runs 5 --mode first \\
        --tracedoc "python -m tracedoc" --tracedoc "/path/to/other/venv/bin/tracedoc"

Run it from a directory outside the tree (``python -m tracedoc`` imports from the working directory) with an
absolute path to the trace. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

DASHBOARD_LINE = "tracedoc dashboard at"
READY_LINE = "the pages are ready"
FAILED_LINE = "could not load the input"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def fill_cache(tracedoc: list[str], trace: Path, cache: Path) -> None:
    """Ingest the trace into ``cache`` (unless there) and keep its report there, by one serve run to its first
    page."""
    cache.mkdir(parents=True, exist_ok=True)
    one_run(tracedoc, trace, cache, timeout=1200)


def copy_cache(source: Path, dest: Path, with_reports: bool) -> None:
    """The cache ``source`` copied to ``dest``: its stores, and its kept reports too when ``with_reports``."""
    dest.mkdir(parents=True)
    for path in source.iterdir():
        if path.suffix == ".duckdb" or (with_reports and path.is_file()):
            shutil.copy2(path, dest / path.name)
        elif with_reports and path.is_dir():
            shutil.copytree(path, dest / path.name)


def one_run(tracedoc: list[str], trace: Path, cache: Path, timeout: float) -> tuple[float, float, float, float]:
    """Serve ``trace`` from ``cache``; the wall and CPU seconds from the dashboard line to the end of the first
    GET / once the first page is ready, and the wall and CPU seconds of that GET alone."""
    port = free_port()
    command = [*tracedoc, "serve", str(trace), "--no-show", "--port", str(port), "--cache-dir", str(cache)]
    server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    marks: dict[str, tuple[float, float]] = {}
    seen = threading.Event()
    lines: list[str] = []

    def watch() -> None:
        assert server.stderr is not None
        for line in server.stderr:
            lines.append(line.rstrip())
            if DASHBOARD_LINE in line and "start" not in marks:
                marks["start"] = (time.perf_counter(), cpu_seconds(server.pid))
            if READY_LINE in line and "ready" not in marks:
                marks["ready"] = (time.perf_counter(), cpu_seconds(server.pid))
                seen.set()
            if FAILED_LINE in line:  # the server keeps running, its pages saying why: no wait for the timeout
                seen.set()
        seen.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        if not seen.wait(timeout) or "start" not in marks or "ready" not in marks or server.poll() is not None:
            raise SystemExit(f"{shlex.join(command)}: no ready line; it said:\n" + "\n".join(lines[-20:]))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout) as response:
            response.read()
        end = (time.perf_counter(), cpu_seconds(server.pid))
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    start, ready = marks["start"], marks["ready"]
    return end[0] - start[0], end[1] - start[1], end[0] - ready[0], end[1] - ready[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--tracedoc", action="append", help="a command that runs tracedoc (repeatable; default: "
                        "this interpreter's `python -m tracedoc`)")
    parser.add_argument("--mode", choices=("first", "again"), default="first",
                        help="first: no kept report (the server analyses); again: the report kept")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cache", type=Path, help="a cache holding the trace's store (filled when missing)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    commands = [shlex.split(c) for c in (args.tracedoc or [f"{sys.executable} -m tracedoc"])]
    trace = args.trace.resolve()
    work = Path(tempfile.mkdtemp(prefix="tracedoc-first-page-"))
    try:
        caches = []
        for n, command in enumerate(commands):
            cache = (args.cache / str(n)) if args.cache else work / f"cache{n}"
            if args.mode == "again" or not any(cache.glob("*.duckdb")):
                fill_cache(command, trace, cache)  # the store, and the report this version keeps
            caches.append(cache)
        times: list[list[tuple[float, float, float, float]]] = [[] for _ in commands]
        for run in range(args.runs):
            for n, command in enumerate(commands):
                dest = work / f"run{run}-{n}"
                copy_cache(caches[n], dest, with_reports=args.mode == "again")
                wall, cpu, get, get_cpu = one_run(command, trace, dest, args.timeout)
                shutil.rmtree(dest)
                times[n].append((wall, cpu, get, get_cpu))
                load = os.getloadavg()[0]
                print(f"run {run} command {n}: {wall:.2f} s wall, {cpu:.2f} s CPU, of which the GET {get:.2f} s wall "
                      f"{get_cpu:.2f} s CPU (load average {load:.1f})", flush=True)
        for n, command in enumerate(commands):
            walls, cpus = [t[0] for t in times[n]], [t[1] for t in times[n]]
            line = (f"{shlex.join(command)} ({args.mode}): wall {statistics.median(walls):.2f} s "
                    f"({min(walls):.2f}–{max(walls):.2f}), CPU {statistics.median(cpus):.2f} s "
                    f"({min(cpus):.2f}–{max(cpus):.2f})")
            if n:
                for what, i in (("wall", 0), ("CPU", 1)):
                    ratios = [a[i] / b[i] for a, b in zip(times[0], times[n], strict=True)]
                    line += (f"; command 0 / this, {what}: {statistics.median(ratios):.2f} "
                             f"({min(ratios):.2f}–{max(ratios):.2f})")
            print(line)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
