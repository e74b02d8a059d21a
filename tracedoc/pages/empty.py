"""Which pages have data for a report, and, for those that have none, the sentence that says why in the words of
the inputs' format: an Nsight Compute profile has kernels but no timeline, flight-recorder dumps have collectives
but no kernels, a single-rank trace has nothing to compare across ranks. The pages show it as their empty state and
the dashboard's navigation greys out the page with it as the tooltip. Needs no Bokeh.
"""

from __future__ import annotations

from tracedoc.ingest.base import FORMATS, TIMELINE
from tracedoc.report import Report

TIMELINE_FORMATS = frozenset(f.name for f in FORMATS if f.kind == TIMELINE)
TELEMETRY_FORMATS = frozenset({"nvml", "telemetry"})

NCU_HOW = ("collect one with ncu --set full -o kernels python app.py and give kernels.ncu-rep to tracedoc, alone or "
           "beside the timeline of the same program")
DUMPS_HOW = ("PyTorch writes them when a collective times out, with TORCH_NCCL_DUMP_ON_TIMEOUT=1 and "
             "TORCH_FR_DUMP_TEMP_FILE set")
MEMORY_HOW = ("record the trace with torch.profiler.profile(profile_memory=True, with_stack=True), or give an "
              "allocator snapshot from torch.cuda.memory._dump_snapshot()")

# page route → input kind → the sentence (kinds: see input_kind)
EFFICIENCY_HOW = ("MFU and MBU are measured on PyTorch traces recorded with torch.profiler.profile("
                  "record_shapes=True), or from --flops-per-step / --bytes-per-step")

SENTENCES: dict[str, dict[str, str]] = {
    "timeline": {
        "ncu": "No timeline: an Nsight Compute profile replays each kernel on its own, so it holds no time line of "
               "the run. Its kernels are on the ncu page.",
        "flight_recorder": "No timeline: NCCL flight-recorder dumps hold each rank's last collectives, not their "
                           "timing on the GPU. They are on the Hang page.",
        "telemetry": "No timeline: GPU telemetry holds clocks, power and temperatures sampled over time, not the "
                     "run's events. What it shows is in the Overview's findings.",
        "other": "No timeline in these inputs.",
    },
    "kernels": {
        "timeline": "No GPU kernels in these traces: the profiler recorded the host only (a CPU-only run, or CUDA "
                    "activity not enabled in the profiler).",
        "ncu": "An Nsight Compute profile measures each kernel on its own: its kernels are on the ncu page, with "
               "their speed of light, warp stalls and roofline. This page charts the kernels of a timeline (PyTorch "
               "profiler traces, Nsight Systems reports).",
        "flight_recorder": "NCCL flight-recorder dumps hold the collectives each rank issued, not its GPU kernels: "
                           "see the Hang page. This page charts the kernels of a timeline (PyTorch profiler traces, "
                           "Nsight Systems reports).",
        "telemetry": "GPU telemetry holds clocks, power and temperatures, not kernels. This page charts the kernels "
                     "of a timeline (PyTorch profiler traces, Nsight Systems reports).",
        "other": "No GPU kernels in these inputs.",
    },
    "ranks": {
        "one_rank": "One rank only: this page sets ranks side by side step by step (who is slower, who waits). "
                    "Give tracedoc every rank's trace (a directory with one trace per rank) to see it.",
        "timeline": "No steps found to compare ranks by: it needs ProfilerStep#N annotations (torch.profiler's "
                    "schedule), NVTX step ranges or a CUDA profiler capture range.",
        "ncu": "An Nsight Compute profile holds single kernels, not the steps of ranks: this page needs a timeline "
               "of every rank (PyTorch profiler traces or Nsight Systems reports).",
        "flight_recorder": "NCCL flight-recorder dumps hold each rank's last collectives, not step times: what each "
                           "rank issued is on the Hang page.",
        "telemetry": "GPU telemetry holds no steps: this page needs a timeline of every rank (PyTorch profiler "
                     "traces or Nsight Systems reports).",
        "other": "No per-step data for several ranks in these inputs.",
    },
    "overlap": {
        "timeline": "No communication kernels (NCCL) in these traces, so nothing to overlap: a run on one GPU, or "
                    "one whose collectives the profiler did not record.",
        "ncu": "An Nsight Compute profile runs each kernel alone, so communication and compute cannot be set "
               "against each other: that needs a timeline (PyTorch profiler traces or Nsight Systems reports).",
        "flight_recorder": "NCCL flight-recorder dumps say which collectives ran, not when the GPU computed beside "
                           "them: overlap needs a timeline (PyTorch profiler traces or Nsight Systems reports).",
        "telemetry": "GPU telemetry holds no kernels, so nothing to overlap: that needs a timeline (PyTorch "
                     "profiler traces or Nsight Systems reports).",
        "other": "No communication kernels (NCCL) in these inputs, so nothing to overlap.",
    },
    "ncu": {
        "timeline": f"No Nsight Compute profile here: these traces time every kernel, but a kernel's speed of light, "
                    f"warp stalls and roofline come from Nsight Compute; {NCU_HOW}.",
        "flight_recorder": f"No Nsight Compute profile in these inputs (flight-recorder dumps): {NCU_HOW}.",
        "telemetry": f"No Nsight Compute profile in these inputs (GPU telemetry): {NCU_HOW}.",
        "other": f"No Nsight Compute profile in these inputs: {NCU_HOW}.",
    },
    "hang": {
        "timeline": f"No NCCL flight-recorder dumps in these inputs: this page is for a job that hung, from the "
                    f"dumps of its ranks ({DUMPS_HOW}). A trace that finished did not hang.",
        "ncu": f"No NCCL flight-recorder dumps in these inputs (an Nsight Compute profile): this page is for a job "
               f"that hung ({DUMPS_HOW}).",
        "telemetry": f"No NCCL flight-recorder dumps in these inputs (GPU telemetry): this page is for a job that "
                     f"hung ({DUMPS_HOW}).",
        "other": f"No NCCL flight-recorder dumps in these inputs ({DUMPS_HOW}).",
    },
    "efficiency": {
        "timeline": f"No efficiency figures for these traces: {EFFICIENCY_HOW}.",
        "ncu": "An Nsight Compute profile measures kernels, not steps: its Nsight Compute page gives each kernel's "
               "throughput against the chip's peak.",
        "flight_recorder": "NCCL flight-recorder dumps hold no timeline to measure efficiency on.",
        "telemetry": "GPU telemetry holds no operators to count FLOPs from.",
        "other": f"No efficiency figures for these inputs: {EFFICIENCY_HOW}.",
    },
    "memory": {
        "timeline": f"No GPU memory data in these traces: {MEMORY_HOW}.",
        "ncu": f"An Nsight Compute profile holds no allocator data: {MEMORY_HOW}.",
        "flight_recorder": f"NCCL flight-recorder dumps hold no allocator data: {MEMORY_HOW}.",
        "telemetry": f"GPU telemetry samples the memory in use but not who allocated it: {MEMORY_HOW}.",
        "other": f"No GPU memory data in these inputs: {MEMORY_HOW}.",
    },
}


def input_kind(report: Report) -> str:
    """What the inputs are, for the wording: 'timeline' (PyTorch traces, Nsight Systems reports), else 'ncu',
    'flight_recorder', 'telemetry' (NVML), or 'other'."""
    formats = {i.format for i in report.inputs}
    if formats & TIMELINE_FORMATS:
        return "timeline"
    for kind, found in (("ncu", "ncu" in formats), ("flight_recorder", "flight_recorder" in formats),
                        ("telemetry", bool(formats & TELEMETRY_FORMATS))):
        if found:
            return kind
    return "other"


def has_data(route: str, report: Report) -> bool:
    """Whether the page at ``route`` (not the overview, always drawn; not the timeline, which needs the store) has
    anything to show for the report."""
    metrics = report.metrics
    if route == "kernels":
        return bool(metrics.get("gpu_time_by_category") or metrics.get("top_kernels"))
    if route == "ranks":
        return bool(metrics.get("rank_steps"))
    if route == "overlap":
        return any((r.get("comm_ms") or 0) > 0 for r in metrics.get("comm_overlap") or [])
    if route == "ncu":
        return bool(metrics.get("ncu_kernels"))
    if route == "hang":
        return bool(metrics.get("collectives"))
    if route == "memory":
        return bool(report.memory)
    if route == "efficiency":
        return bool(report.operators) or any(r.get("note") is None for r in report.efficiency)
    return True


def sentence(route: str, report: Report) -> str:
    """Why the page at ``route`` has nothing to show for these inputs, in the words of their format."""
    if route == "efficiency" and (notes := [r["note"] for r in report.efficiency if r.get("note")]):
        return f"MFU and MBU unavailable: {notes[0]}."
    kind = input_kind(report)
    if route == "ranks" and kind == "timeline" and (report.summary.get("ranks") or 0) <= 1:
        kind = "one_rank"
    wording = SENTENCES[route]
    return wording.get(kind, wording["other"])


def why_empty(route: str, report: Report) -> str | None:
    """The page's empty-state sentence when it has no data, else None."""
    return None if has_data(route, report) else sentence(route, report)
