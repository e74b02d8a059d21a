#!/usr/bin/env bash
# Run every workload variant on this machine's GPU(s) and write one folder of traces per case.
#
#   bash workloads/make_samples.sh OUT_DIR [single|ddp|all]
#
# single: decode_loop (eager, cudagraph, compile) and input_bound (slow, fast) on one GPU;
# ddp: ddp_step (overlap, no_overlap, straggler) and moe_alltoall (balanced, hot_expert) on two GPUs.
# RUN_TIMEOUT (seconds, default 600) bounds each run.
# Copy OUT_DIR/<case>/ into samples/<case>/ afterwards; the log holds the figures SOURCE.md quotes.
set -uo pipefail

out=${1:?usage: make_samples.sh OUT_DIR [single|ddp|all]}
which=${2:-all}
limit=${RUN_TIMEOUT:-600}
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$out"

run() {
    local case=$1
    shift
    echo "== $case: $*"
    timeout "$limit" "$@" || echo "== $case FAILED (exit $?)"
}

nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
date -u +%Y-%m-%dT%H:%M:%SZ

if [[ $which == single || $which == all ]]; then
    for v in eager cudagraph; do
        run "decode-$v" python3 "$here/decode_loop/run.py" --variant "$v" --out "$out/decode-$v"
    done
    for v in slow fast; do
        run "input-$v" python3 "$here/input_bound/run.py" --variant "$v" --out "$out/input-$v"
    done
    run decode-compile python3 "$here/decode_loop/run.py" --variant compile --out "$out/decode-compile"
fi

if [[ $which == ddp || $which == all ]]; then
    nvidia-smi topo -m
    for v in overlap no_overlap straggler; do
        run "ddp-${v//_/-}" torchrun --standalone --nproc_per_node=2 "$here/ddp_step/run.py" \
            --variant "$v" --out "$out/ddp-${v//_/-}"
    done
    for v in balanced hot_expert; do
        run "moe-${v//_/-}" torchrun --standalone --nproc_per_node=2 "$here/moe_alltoall/run.py" \
            --variant "$v" --out "$out/moe-${v//_/-}"
    done
fi
