"""The diff gallery: ``tracedoc diff`` of each bundled problem sample against its fixed twin (Markdown and JSON
in ``reports/diffs/``), so a reader sees what a diff says on real pairs; written by ``python -m tracedoc.gallery``
(``--diffs-only`` for these alone)."""

from __future__ import annotations

from pathlib import Path

from tracedoc import strict_json
from tracedoc.diff.markdown import render_markdown
from tracedoc.diff.model import build_diff
from tracedoc.diff.sections import signed_pct
from tracedoc.diff.side import Side, load_side
from tracedoc.measures import MS
from tracedoc.units import cell_format

# Problem sample → its fixed twin (recorded alike on one GPU), and what changed between them.
DIFF_PAIRS = (
    ("decode-eager", "decode-cudagraph", "launches replayed from a CUDA graph"),
    ("decode-eager", "decode-compile", "torch.compile with CUDA graphs (mode='reduce-overhead')"),
    ("input-slow", "input-fast", "DataLoader workers, pinned memory, no per-step sync"),
    ("ddp-no-overlap", "ddp-overlap", "gradients all-reduced in buckets during backward"),
    ("fsdp-no-prefetch", "fsdp-prefetch", "all-gathers prefetched ahead of their layer"),
    ("moe-hot-expert", "moe-balanced", "tokens routed evenly over the experts"),
    ("ddp-straggler", "ddp-overlap", "the slow rank's extra fp32 work removed"),
    ("host-stall-item", "host-stall-fixed", "no per-step .item() and bookkeeping after it"),
    ("host-stall-sleep", "host-stall-fixed", "no un-instrumented host time between steps"),
    ("memory-leak", "memory-fixed", "no reference kept to each step's output"),
    ("nsys-memory-leak", "nsys-memory-fixed", "the same fix, seen in CUDA's memory events under Nsight Systems"),
    ("ncu-h100-transpose-naive", "ncu-h100-transpose-tiled", "the transpose staged through a shared-memory tile"),
    ("ncu-h100-gemm-naive", "ncu-h100-gemm-tiled", "GEMM tiles in shared memory, a register block per thread"),
    ("ncu-h100-gemm-tiled", "ncu-h100-gemm-wmma", "the same tiling on tensor cores (WMMA)"),
    ("ncu-h100-gemm-wmma", "ncu-h100-gemm-cublas", "cuBLAS (wgmma and TMA)"),
)


def diff_name(before: str, after: str) -> str:
    return f"{before}--{after}"


def write_diff_gallery(samples: Path, out: Path) -> list[str]:
    """Write each pair's diff (``<before>--<after>.md`` and ``.json``) and an index into ``out``; returns the
    lines printed for each."""
    out.mkdir(parents=True, exist_ok=True)
    cache: dict[str, Side] = {}

    def side(name: str) -> Side:
        if name not in cache:
            cache[name] = load_side(samples / name)
            cache[name].label = f"samples/{name}"  # portable: the same on every checkout
        return cache[name]

    index = ["# tracedoc diff gallery", "",
             "`tracedoc diff` of each problem sample against its fixed twin (regenerate with "
             "`python -m tracedoc.gallery --diffs-only`).", "",
             "| before → after | what changed | verdict | job step (median), or kernel time | resolved | diff |",
             "|---|---|---|---|---|---|"]
    printed = []
    for before, after, change in DIFF_PAIRS:
        diff = build_diff(side(before), side(after))
        name = diff_name(before, after)
        (out / f"{name}.md").write_text(render_markdown(diff))
        data = diff.to_dict()
        data.pop("tracedoc")  # the version would make every release a diff
        (out / f"{name}.json").write_text(strict_json.dumps(data, indent=1, sort_keys=True) + "\n")
        job, kernel_time = diff.job, diff.kernel_time()
        if job.before and job.after and job.change:
            ms = cell_format(MS, 1)
            step = f"{ms(job.before.median_ms)} → {ms(job.after.median_ms)} ms ({signed_pct(job.change.pct)})"
        elif kernel_time is not None:
            step = (f"kernels {cell_format(MS, 3)(kernel_time[0])} → {cell_format(MS, 3)(kernel_time[1])} ms "
                    f"({signed_pct(100.0 * (kernel_time[1] / kernel_time[0] - 1.0))})")
        else:
            step = "—"
        resolved = ", ".join(sorted({f"`{c.finding.rule}`" for c in diff.by_status("resolved")})) or "none"
        index.append(f"| {before} → {after} | {change} | {diff.verdict} | {step} | {resolved} | "
                     f"[md]({name}.md) · [json]({name}.json) |")
        printed.append(f"{name}: {diff.verdict}, {step}")
    (out / "README.md").write_text("\n".join(index) + "\n")
    return printed
