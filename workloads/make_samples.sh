#!/usr/bin/env bash
# Run every workload variant on this machine's GPU(s) and write one folder of traces per case.
#
#   bash workloads/make_samples.sh OUT_DIR [single|gemm|ddp|fsdp|all]
#
# single: decode_loop (eager, cudagraph, compile), input_bound (slow, fast) and host_stall (item, sleep, fixed) on
# one GPU;
# gemm: the GEMM ladder timed, then under Nsight Compute (ncu on PATH) with the report exported as CSV;
# ddp: ddp_step (overlap, no_overlap, straggler), moe_alltoall (balanced, hot_expert) and fsdp_step (prefetch,
# no_prefetch) on two GPUs; fsdp: fsdp_step alone.
# RUN_TIMEOUT (seconds, default 600) bounds each run.
# Copy OUT_DIR/<case>/ into samples/<case>/ afterwards; the log holds the figures SOURCE.md quotes.
set -uo pipefail

out=${1:?usage: make_samples.sh OUT_DIR [single|gemm|ddp|fsdp|all]}
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
    for v in item sleep fixed; do
        run "host-stall-$v" python3 "$here/host_stall/run.py" --variant "$v" --out "$out/host-stall-$v"
    done
fi

if [[ $which == gemm || $which == all ]]; then
    run gemm-ladder python3 "$here/gemm_ladder/run.py" --profiler none --out "$out/gemm-ladder"
    # timings first without ncu (its launch interception starves short kernels), then the profiled launches alone
    run gemm-ladder-ncu-timing python3 "$here/gemm_ladder/run.py" --profiler none --phase time --min-ms 100 \
        --out "$out/gemm-ladder-ncu"
    run gemm-ladder-ncu ncu --set full --profile-from-start off --force-overwrite -o "$out/gemm-ladder-ncu/kernels" \
        python3 "$here/gemm_ladder/run.py" --profiler ncu --phase record --out "$out/gemm-ladder-ncu"
    ncu --import "$out/gemm-ladder-ncu/kernels.ncu-rep" --csv --page raw --print-units base \
        > "$out/gemm-ladder-ncu/kernels.raw.base-units.csv"
fi

if [[ $which == ddp || $which == fsdp || $which == all ]]; then
    nvidia-smi topo -m
    for v in prefetch no_prefetch; do
        run "fsdp-${v//_/-}" torchrun --standalone --nproc_per_node=2 "$here/fsdp_step/run.py" \
            --variant "$v" --out "$out/fsdp-${v//_/-}"
    done
fi

if [[ $which == ddp || $which == all ]]; then
    for v in overlap no_overlap straggler; do
        run "ddp-${v//_/-}" torchrun --standalone --nproc_per_node=2 "$here/ddp_step/run.py" \
            --variant "$v" --out "$out/ddp-${v//_/-}"
    done
    for v in balanced hot_expert; do
        run "moe-${v//_/-}" torchrun --standalone --nproc_per_node=2 "$here/moe_alltoall/run.py" \
            --variant "$v" --out "$out/moe-${v//_/-}"
    done
fi
