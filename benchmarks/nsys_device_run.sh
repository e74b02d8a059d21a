#!/usr/bin/env bash
# On a GPU machine with nsys: make the nsys-torch-h100 sample, and time tracedoc against nsys on a large report.
#
#   bash benchmarks/nsys_device_run.sh OUT_DIR [sample|bench|all]
#
# sample: profiles samples/nsys-torch-h100/workload.py (nsys profile -t cuda,nvtx,osrt), exports SQLite, runs
#   `nsys stats` (cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum) and `nsys analyze` on it, runs tracedoc on
#   the .nsys-rep, and packs these into OUT_DIR/sample.tar.xz;
# bench: runs tests/test_nsys.py (its .nsys-rep test needs nsys), profiles 520k tiny kernels (≥ 1M kernel + API
#   rows) and times nsys export (sqlite, parquetdir), nsys stats + nsys analyze, and tracedoc analyze (on the export
#   and on the report). Timings ("TIME <ms>: <command>") go to OUT_DIR/log.txt.
# Needs tracedoc's wheels in $WHEELS (default .whl/: duckdb, isal, adbc-driver-sqlite, adbc-driver-manager) there.
set -uo pipefail
out=${1:?usage: nsys_device_run.sh OUT_DIR [sample|bench|all]}
what=${2:-all}
w=/tmp/nsys-work
mkdir -p "$w" "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
t() { local s; s=$(date +%s%N); "$@"; echo "TIME $(( ($(date +%s%N) - s) / 1000000 )) ms: $*"; }

nsys --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${WHEELS:-.whl}"/*.whl
export PYTHONPATH=/tmp/site
ln -sfn ../rules tracedoc/builtin_rules  # the package layout an install makes, in this throwaway copy of the tree

if [[ $what == sample || $what == all ]]; then
s=$w/sample
t timeout 150 nsys profile -t cuda,nvtx,osrt -o "$s" --force-overwrite true python3 samples/nsys-torch-h100/workload.py
head -c 32 "$s.nsys-rep" | od -A d -t x1 -c | head -6
t nsys export --type sqlite --force-overwrite true --output "$s.sqlite" "$s.nsys-rep"
t nsys stats --report cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum --format csv --force-overwrite true \
    --output "$w/stats" "$s.sqlite"
t nsys analyze "$s.sqlite" > "$w/analyze.txt" 2>&1
nsys analyze --format csv --output "$w/analyze" --force-overwrite true "$s.sqlite" >/dev/null 2>&1
cat "$w/analyze.txt" | head -80
t python3 -m tracedoc analyze "$s.nsys-rep" --no-cache --format json --out "$w/tracedoc-rep.json"
(cd "$w" && ls -la && tar -cJf "$out/sample.tar.xz" sample.nsys-rep sample.sqlite stats_*.csv analyze*.csv \
    analyze.txt tracedoc-rep.json)
fi

[[ $what == bench || $what == all ]] || exit 0
python3 -m pytest tests/test_nsys.py -q -p no:cacheprovider 2>&1 | tail -5
b=$w/big
t timeout 200 nsys profile -t cuda,nvtx -o "$b" --force-overwrite true \
    python3 samples/nsys-torch-h100/workload.py --tiny-kernels 520000
t nsys export --type sqlite --force-overwrite true --output "$b.sqlite" "$b.nsys-rep"
t nsys export --type parquetdir --force-overwrite true --output "$b.pq" "$b.nsys-rep"
ls -la "$b.sqlite"; du -sh "$b.pq"
ls "$b.pq" | head -30
t nsys stats --report cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum --format csv --force-overwrite true \
    --output "$w/bigstats" "$b.sqlite"
t nsys analyze --format csv --output "$w/biganalyze" --force-overwrite true "$b.sqlite"
t python3 -m tracedoc analyze "$b.sqlite" --no-cache --format json --out "$w/big-tracedoc.json"
t python3 -m tracedoc analyze "$b.nsys-rep" --no-cache --format json --out "$w/big-rep-tracedoc.json"
t python3 benchmarks/speed.py --nsys-readers "$b.sqlite"
python3 - "$b.pq" <<'PY'
import sys, time, duckdb
from pathlib import Path
root = Path(sys.argv[1])
con = duckdb.connect()
for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"):
    files = sorted(str(p) for p in root.rglob(f"{table}*"))
    if not files:
        print("parquetdir: no files for", table); continue
    start = time.perf_counter()
    n = con.execute(f"CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet({files})").fetchall()
    n = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
    print(f"parquetdir {table}: {n} rows in {time.perf_counter() - start:.3f} s ({files[0]})")
PY
python3 - "$w/big-tracedoc.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("tracedoc big:", r["inputs"], r["summary"], [(f["rule"], f["impact_ms"]) for f in r["findings"]])
PY
cp "$w/bigstats_cuda_gpu_kern_sum.csv" "$out/" 2>/dev/null
ls "$w"/biganalyze* && head -3 "$w"/biganalyze_*.csv
