#!/usr/bin/env bash
# Run every workload variant on this machine's GPU(s) and write one folder of traces per case.
#
#   bash workloads/make_samples.sh OUT_DIR [single|gemm|ddp|fsdp|nsys-ranks|hangs|efficiency|memory|nsys-alloc|all]
#
# single: decode_loop (eager, cudagraph, compile), input_bound (slow, fast) and host_stall (item, sleep, fixed) on
# one GPU;
# gemm: the GEMM ladder timed, then under Nsight Compute (ncu on PATH) with the report exported as CSV;
# ddp: ddp_step (overlap, no_overlap, straggler), moe_alltoall (balanced, hot_expert) and fsdp_step (prefetch,
# no_prefetch) on two GPUs; fsdp: fsdp_step alone;
# nsys-ranks (needs nsys on PATH; not part of all): the DDP run with a larger batch on the last rank and the two
# FSDP variants, each recorded twice on two GPUs: with the PyTorch profiler, and under Nsight Systems the way
# NVIDIA and PyTorch document it (torchrun --no-python nsys profile -t cuda,nvtx,osrt -o rank%q{RANK} ..., the
# whole process, every step an NVTX range train_step), one report per rank exported to SQLite; the DDP run also
# as one report of the whole job (nsys profile torchrun ...). The exports are redacted (redact_export.py);
# hangs (not part of all): a two-rank hang whose culprit's GPU is still busy when it issues the collective, its
# flight-recorder dumps written the default way (no TORCH_NCCL_ENABLE_TIMING) and with timing.
# efficiency (not part of all): gpt_step (base, checkpoint, gpt2, gemm), the decode loop (eager and cudagraph),
# conv_step, launch_loop and llama_step (compile, autocast), recorded with record_shapes=True, each with counts.json
# or truth.json (FlopCounterMode's FLOPs per step, CUDA-event step times without the profiler): the ground truth of
# tracedoc's MFU and MBU, and of its estimate of the unprofiled step.
# memory (not part of all): memory_leak (leak, fixed, oom, fragment) with the profiler's allocator events and the
# allocator snapshot; the leak (48 MiB a step) and the oom under a memory fraction with the history recorded the
# default way (_record_memory_history() with no arguments: C++ frames in every stack), the snapshot alone; with nsys
# on PATH also leak and fixed under Nsight Systems with --cuda-memory-usage=true (--profiler nvtx, 20 steps),
# exported to SQLite and redacted.
# nsys-alloc (needs nsys and cupy; not part of all): cupy_alloc (nopool, pool), timed once without nsys, then the
# whole process under nsys profile -t cuda,nvtx,osrt, exported to SQLite and redacted; likewise the eager
# launch_loop (--profiler nvtx: every step an NVTX range), the host-bound PyTorch loop of nsys-torch-eager.
# RUN_TIMEOUT (seconds, default 600) bounds each run.
# Copy OUT_DIR/<case>/ into samples/<case>/ afterwards; the log holds the figures SOURCE.md quotes.
set -uo pipefail

out=${1:?usage: make_samples.sh OUT_DIR [single|gemm|ddp|fsdp|nsys-ranks|hangs|efficiency|memory|nsys-alloc|all]}
which=${2:-all}
case $which in single|gemm|ddp|fsdp|nsys-ranks|hangs|efficiency|memory|nsys-alloc|all) ;;
    *) echo "unknown set: $which" >&2; exit 2 ;;
esac
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
    for v in leak fixed oom fragment; do
        run "memory-$v" python3 "$here/memory_leak/run.py" --variant "$v" --out "$out/memory-$v"
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

if [[ $which == nsys-ranks ]]; then
    command -v nsys >/dev/null || { echo "nsys-ranks needs nsys on PATH" >&2; exit 2; }
    nsys --version
    export_all() {  # every report of a folder to SQLite, in parallel, then redacted
        local r
        for r in "$1"/*.nsys-rep; do
            nsys export --type sqlite --force-overwrite true --output "${r%.nsys-rep}.sqlite" "$r" >/dev/null &
        done
        wait
        python3 "$here/redact_export.py" "$1"/*.sqlite
    }
    per_rank() {  # CASE WORKLOAD VARIANT: one whole-process report per rank
        local dir="$out/$1"
        mkdir -p "$dir"
        (cd "$dir" && run "$1" torchrun --standalone --nproc_per_node=2 --no-python \
            nsys profile -t cuda,nvtx,osrt -o 'rank%q{RANK}' --force-overwrite true \
            python3 "$here/$2/run.py" --variant "$3" --profiler nvtx --out .)
        export_all "$dir"
    }
    run ddp-larger-batch torchrun --standalone --nproc_per_node=2 "$here/ddp_step/run.py" \
        --variant larger_batch --out "$out/ddp-larger-batch"
    per_rank nsys-ddp-larger-batch-ranks ddp_step larger_batch
    mkdir -p "$out/nsys-ddp-larger-batch-job"
    (cd "$out/nsys-ddp-larger-batch-job" && run nsys-ddp-larger-batch-job \
        nsys profile -t cuda,nvtx,osrt -o job --force-overwrite true \
        torchrun --standalone --nproc_per_node=2 "$here/ddp_step/run.py" --variant larger_batch --profiler nvtx \
        --out .)
    export_all "$out/nsys-ddp-larger-batch-job"
    for v in prefetch no_prefetch; do
        run "fsdp-${v//_/-}" torchrun --standalone --nproc_per_node=2 "$here/fsdp_step/run.py" \
            --variant "$v" --out "$out/fsdp-${v//_/-}"
        per_rank "nsys-fsdp-${v//_/-}-ranks" fsdp_step "$v"
    done
fi

if [[ $which == memory ]]; then
    for v in leak fixed oom fragment; do
        run "memory-$v" python3 "$here/memory_leak/run.py" --variant "$v" --out "$out/memory-$v"
    done
    run snapshot-leak-default python3 "$here/memory_leak/run.py" --variant leak --history default --snapshot-only \
        --batch 3072 --out "$out/snapshot-leak-default"
    run snapshot-oom-cap python3 "$here/memory_leak/run.py" --variant oom --history default --snapshot-only \
        --batch 3072 --out "$out/snapshot-oom-cap"
    if command -v nsys >/dev/null; then
        for v in leak fixed; do
            mkdir -p "$out/nsys-memory-$v"
            run "nsys-memory-$v" nsys profile -t cuda,nvtx,osrt --cuda-memory-usage=true --force-overwrite true \
                -o "$out/nsys-memory-$v/sample" python3 "$here/memory_leak/run.py" --variant "$v" --profiler nvtx \
                --steps 20 --out "$out/nsys-memory-$v"
            nsys export --type sqlite --force-overwrite true --output "$out/nsys-memory-$v/sample.sqlite" \
                "$out/nsys-memory-$v/sample.nsys-rep" >/dev/null
            python3 "$here/redact_export.py" "$out/nsys-memory-$v/sample.sqlite"
        done
    fi
fi

if [[ $which == efficiency ]]; then
    for v in base checkpoint gpt2 gemm; do
        run "gpt-step-$v" python3 "$here/gpt_step/run.py" --variant "$v" --out "$out/gpt-step-$v"
    done
    for v in eager cudagraph; do
        run "decode-$v-shapes" python3 "$here/decode_loop/run.py" --variant "$v" --record-shapes --steps 3 \
            --counts "$out/decode-$v-shapes/counts.json" --out "$out/decode-$v-shapes"
    done
    run conv-step python3 "$here/conv_step/run.py" --variant bf16 --record-shapes --out "$out/conv-step"
    # as PyTorch's tutorial records: a trace per cycle of a repeating schedule
    run conv-step-cycles python3 "$here/conv_step/run.py" --variant bf16 --record-shapes --cycles 3 \
        --out "$out/conv-step-cycles"
    run launch-loop python3 "$here/launch_loop/run.py" --variant eager --record-shapes --out "$out/launch-loop"
    run compile-step python3 "$here/llama_step/run.py" --variant compile --record-shapes --out "$out/compile-step"
    run autocast-step python3 "$here/llama_step/run.py" --variant autocast --record-shapes --out "$out/autocast-step"
    # the GPU sets the pace unprofiled; Triton GEMM templates; a compute-bound autocast step
    run conv-step-gpu python3 "$here/conv_step/run.py" --variant bf16 --record-shapes --batch 96 --out "$out/conv-step-gpu"
    run compile-autotune python3 "$here/llama_step/run.py" --variant compile --compile-mode max-autotune-no-cudagraphs \
        --record-shapes --out "$out/compile-autotune"
    run autocast-gemm python3 "$here/llama_step/run.py" --variant autocast --record-shapes --layers 4 --d-model 4096 \
        --heads 32 --ffn 11008 --batch 4 --out "$out/autocast-gemm"
fi

if [[ $which == nsys-alloc ]]; then
    command -v nsys >/dev/null || { echo "nsys-alloc needs nsys on PATH" >&2; exit 2; }
    nsys --version
    for v in nopool pool; do
        dir="$out/nsys-cupy-$v"
        run "nsys-cupy-$v-truth" python3 "$here/cupy_alloc/run.py" --variant "$v" --profiler none --steps 0 \
            --out "$dir/truth"
        run "nsys-cupy-$v" nsys profile -t cuda,nvtx,osrt --force-overwrite true -o "$dir/sample" \
            python3 "$here/cupy_alloc/run.py" --variant "$v" --bench-steps 5 --out "$dir/under-nsys"
        nsys export --type sqlite --force-overwrite true --output "$dir/sample.sqlite" "$dir/sample.nsys-rep" >/dev/null
        python3 "$here/redact_export.py" "$dir/sample.sqlite"
    done
    # an eager PyTorch loop whose host sets the pace: its step without nsys, then under it
    dir="$out/nsys-torch-eager"
    run nsys-torch-eager-truth python3 "$here/launch_loop/run.py" --variant eager --profiler none --steps 0 \
        --out "$dir/truth"
    run nsys-torch-eager nsys profile -t cuda,nvtx,osrt --force-overwrite true -o "$dir/sample" \
        python3 "$here/launch_loop/run.py" --variant eager --profiler nvtx --bench-steps 10 --steps 3 \
        --out "$dir/under-nsys"
    nsys export --type sqlite --force-overwrite true --output "$dir/sample.sqlite" "$dir/sample.nsys-rep" >/dev/null
    python3 "$here/redact_export.py" "$dir/sample.sqlite"
fi

if [[ $which == hangs ]]; then
    for timing in unset 1; do
        dir="$out/hang-2rank-gpu-busy$([[ $timing == unset ]] && echo -notiming)"
        mkdir -p "$dir"
        echo "== $dir: TORCH_NCCL_ENABLE_TIMING=$timing"
        ( [[ $timing == unset ]] && unset TORCH_NCCL_ENABLE_TIMING || export TORCH_NCCL_ENABLE_TIMING=$timing
          export TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=3000 \
              TORCH_FR_DUMP_TEMP_FILE="$dir/trace_rank_"
          timeout 120 torchrun --standalone --nproc_per_node=2 "$here/hang/run.py" --scenario gpu_busy --culprit 1 \
              --timeout 10 --sleep 60 )
        ls -la "$dir"
    done
fi
