#!/usr/bin/env bash
# The 205 MB PyTorch trace on 2 cores and on all of a machine's cores: `tracedoc analyze --no-cache --format json`,
# RUNS runs each (the two in turn), printing the median wall and CPU time, MB/s and the peak RSS of each.
#
#   bash benchmarks/many_cores.sh OUT_DIR [CORES ...]      # CORES: the core counts to time (default: 2 and all)
#
# Meant for the GPU machine (16 cores, no internet, its own Python): tracedoc's dependencies come as wheels from
# $WHEELS (default .whl/, git-ignored), made beforehand on a machine with internet:
#   pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       --platform manylinux_2_28_x86_64 -d .whl duckdb pyarrow click rich pyyaml isal xxhash
# (pip adds what they need: markdown-it-py, mdurl, pygments; a PyTorch trace's analysis never imports polars; the
# second platform brings the DuckDB and pyarrow of the development machine, 2.0.1 and 26, where manylinux2014 alone
# gets 1.2.2 and 20). They are installed into a --target folder, before any PYTHONPATH already set;
# where every one of them already imports (a development machine), nothing is installed. tracedoc runs from
# this tree, its bytecode compiled first, as an install has it. The trace is `decode-eager` tiled to 205 MB
# (benchmarks/tile_trace.py, 850,152 events); OUT_DIR gets log.txt (everything printed) and the JSON reports.
# Each run is pinned with taskset to cores 0..N-1; DuckDB sizes its threads from the cores it may use.
set -euo pipefail
out=$(realpath -m "${1:?usage: many_cores.sh OUT_DIR [CORES ...]}")
shift
all=$(nproc)
if (( $# )); then cores=("$@"); else cores=(2 "$all"); fi
runs=${RUNS:-3}
work=${WORK:-/tmp/many-cores}
py=${PYTHON:-python3}
mkdir -p "$out" "$work"
exec > >(tee -a "$out/log.txt") 2>&1
cd "$(dirname "$0")/.."

if ! "$py" -c 'import duckdb, pyarrow, click, rich, yaml, isal, xxhash' 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$work/site" "${WHEELS:-.whl}"/*.whl
    export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The package layout an install makes (rules/ as tracedoc.builtin_rules), where the tree is not installed.
if ! "$py" -c 'import tracedoc.builtin_rules' 2>/dev/null; then
    ln -sfn ../rules tracedoc/builtin_rules
    trap 'rm -f tracedoc/builtin_rules' EXIT
fi
"$py" -m compileall -q tracedoc
trace=$work/large.json
[[ -s $trace ]] || "$py" benchmarks/tile_trace.py samples/decode-eager/trace.json.gz "$trace" --min-mb 200

echo "machine: $all cores, $("$py" -c 'import platform; print(platform.processor() or platform.machine())'),"\
     "python $("$py" -c 'import sys; print(sys.version.split()[0])'), duckdb $("$py" -c 'import duckdb; print(duckdb.__version__)'),"\
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$trace" "$out" "$runs" "${cores[@]}" <<'PY'
import os, statistics, subprocess, sys, time
from pathlib import Path

trace, out, runs, cores = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), [int(c) for c in sys.argv[4:]]
mb = trace.stat().st_size / 1e6
times: dict[int, list[tuple[float, float, float]]] = {n: [] for n in cores}
for r in range(runs):
    for n in cores:  # the core counts in turn, so that the machine's drift falls on each alike
        report = out / f"report-{n}-cores-{r + 1}.json"
        cmd = ["taskset", "-c", f"0-{n - 1}", sys.executable, "-m", "tracedoc", "analyze", str(trace), "--no-cache",
               "--format", "json", "--out", str(report)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(cmd)}: exit {os.waitstatus_to_exitcode(status)}")
        cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
        times[n].append((wall, cpu, rss))
        print(f"run {r + 1}, {n} cores: {wall:.2f} s wall, {cpu:.2f} s CPU, {rss:.0f} MiB peak", flush=True)
reports = {p.read_bytes() for p in out.glob("report-*-cores-*.json")}
print(f"\n{trace.name}: {mb:.0f} MB; median of {runs} runs; the JSON reports "
      f"{'all the same' if len(reports) == 1 else f'differ: {len(reports)} versions'}")
print("| cores | wall s | CPU s | MB/s (wall) | peak RSS MiB | wall × 2 cores' |")
print("|---|---|---|---|---|---|")
base = statistics.median(w for w, _, _ in times[cores[0]])
for n in cores:
    wall = statistics.median(w for w, _, _ in times[n])
    cpu = statistics.median(c for _, c, _ in times[n])
    rss = max(m for _, _, m in times[n])
    print(f"| {n} | {wall:.2f} | {cpu:.2f} | {mb / wall:.0f} | {rss:.0f} | {wall / base:.2f} |")
PY
