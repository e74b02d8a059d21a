"""Memory page: per GPU, allocated and reserved memory over time with the steps on the same axis, what is live at
the peak by allocation site (a chart and a table), the allocator's memory at each step's end, and the sites whose
tensors stay alive step after step (report.memory and the metrics memory_curve, memory_steps, memory_peak_sites,
memory_growth_sites). Bytes are shown in MiB."""

from __future__ import annotations

from typing import Any

from bokeh.models import ColumnDataSource, HoverTool, Range1d

from tracedoc.formats import HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.pages import empty
from tracedoc.pages.charts import CATEGORY_COLORS, Section, hbar_chart, short, style
from tracedoc.pages.fragments import Column, measured, table_html
from tracedoc.report import Report
from tracedoc.report_tables import MEMORY, METRICS
from tracedoc.units import fmt_bytes, fmt_ms
from tracedoc.words.memory import NOTE, memory_lines

TITLE = "Memory"
ROUTE = "memory"

MEMORY_HOW = ("record the trace with torch.profiler.profile(profile_memory=True, with_stack=True) or nsys profile "
              "--cuda-memory-usage=true, or give an allocator snapshot from torch.cuda.memory._dump_snapshot()")
# kind of input (tracedoc.pages.empty.input_kind) → why this page has nothing to show
EMPTY: dict[str, str] = {
    TIMELINE: f"No GPU memory data in these traces: {MEMORY_HOW}.",
    KERNEL_PROFILE: f"An Nsight Compute profile holds no allocator data: {MEMORY_HOW}.",
    HANG_DUMPS: f"NCCL flight-recorder dumps hold no allocator data: {MEMORY_HOW}.",
    HEALTH: f"GPU telemetry samples the memory in use but not who allocated it: {MEMORY_HOW}.",
    empty.OTHER: f"No GPU memory data in these inputs: {MEMORY_HOW}.",
}

_MIB = 1 << 20
# what the tables' columns measure
_STEPS, _SITES = METRICS["memory_steps"].measure, METRICS["memory_peak_sites"].measure
_GROWTH, _DEVICE = METRICS["memory_growth_sites"].measure, MEMORY[0].measure
ALLOCATED_COLOR, RESERVED_COLOR = "#4c72b0", "#dd8452"
STEP_SHADES = ("#eef1f6", "#f8f9fb")
BEFORE_TRACE = "(allocated before the trace)"
GROWING_COLOR, OTHER_COLOR = "#c44e52", "#4c72b0"
# GPUs drawn (one chart each); the tables hold every GPU.
MAX_CHARTS = 8
MAX_STEP_LABELS = 20  # step numbers drawn above the bands; more steps are labelled every k-th


def _gpu_key(row: dict[str, Any]) -> tuple[Any, Any]:
    return row.get("rank"), row.get("device")


def _gpu_label(key: tuple[Any, Any]) -> str:
    rank, device = key
    return f"rank {rank}, GPU {device}" if rank is not None else f"GPU {device}"


def _staircase(points: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """The allocator's totals as a step plot: each level holds until the next event."""
    xs: list[float] = []
    ys: list[float] = []
    for i, p in enumerate(points):
        if i:
            xs.append(p["t_ms"])
            ys.append(ys[-1])
        xs.append(p["t_ms"])
        ys.append((p[key] or 0) / _MIB)
    return xs, ys


def timeline_chart(points: list[dict[str, Any]], steps: list[dict[str, Any]], entry: dict[str, Any] | None,
                   ooms: list[dict[str, Any]] | None = None) -> Any:
    """Allocated and reserved MiB over ms, each step a shaded band labelled with its number (every k-th of many
    steps), the peak marked, and each failed request (``ooms``) a cross at the allocated memory it failed on; the
    legend below the plot."""
    from bokeh.plotting import figure

    xs, allocated = _staircase(points, "allocated_bytes")
    _, reserved = _staircase(points, "reserved_bytes")
    top = max(allocated + reserved, default=1.0) * 1.12 or 1.0
    ends = [s["end_ms"] for s in steps if s.get("end_ms") is not None]
    right = max([*xs, *ends], default=1.0)
    right *= 1.02  # room for the peak's marker at the end
    fig = figure(height=340, sizing_mode="stretch_width", tools="xpan,xwheel_zoom,reset", toolbar_location="right",
                 x_range=Range1d(0, right, bounds=(0, right)), y_range=Range1d(0, top))
    if steps:
        every = -(-len(steps) // MAX_STEP_LABELS)  # every step labelled up to MAX_STEP_LABELS, else every k-th
        bands = ColumnDataSource({
            "left": [s["start_ms"] for s in steps], "right": [s["end_ms"] for s in steps],
            "mid": [(s["start_ms"] + s["end_ms"]) / 2 for s in steps], "top": [top] * len(steps),
            "label": [str(s["step"]) for s in steps],
            "shown": [str(s["step"]) if i % every == 0 else "" for i, s in enumerate(steps)],
            "fill": [STEP_SHADES[i % 2] for i in range(len(steps))],
            "warmup": ["warm-up" if s.get("warmup") else "steady" for s in steps],
            "end_mib": [(s.get("allocated_end_bytes") or 0) / _MIB for s in steps]})
        rects = fig.quad(left="left", right="right", bottom=0, top="top", fill_color="fill", line_color="#d5dae3",
                         line_width=0.5, source=bands)
        fig.text(x="mid", y="top", text="shown", source=bands, text_align="center", text_baseline="top",
                 text_font_size="8pt", text_color=CATEGORY_COLORS["step"], y_offset=4)
        fig.add_tools(HoverTool(renderers=[rects], tooltips=[("step", "@label (@warmup)"),
                                                             ("allocated at its end", "@end_mib{0,0.0} MiB")]))
    source = ColumnDataSource({"t": xs, "allocated": allocated, "reserved": reserved})
    if (entry or {}).get("basis") == "cuda":  # CUDA's memory events: one total, what the process took from CUDA
        line = fig.line("t", "allocated", source=source, color=RESERVED_COLOR, line_width=2,
                        legend_label="taken from CUDA")
        tooltips = [("ms", "@t{0,0.000}"), ("taken from CUDA", "@allocated{0,0.0} MiB")]
    else:
        fig.line("t", "reserved", source=source, color=RESERVED_COLOR, line_width=2, legend_label="reserved")
        line = fig.line("t", "allocated", source=source, color=ALLOCATED_COLOR, line_width=2, legend_label="allocated")
        tooltips = [("ms", "@t{0,0.000}"), ("allocated", "@allocated{0,0.0} MiB"), ("reserved", "@reserved{0,0.0} MiB")]
    fig.add_tools(HoverTool(renderers=[line], mode="vline", tooltips=tooltips))
    if allocated:
        i = max(range(len(allocated)), key=lambda j: (allocated[j], -j))
        at = (entry or {}).get("peak_at") or {}
        fig.scatter([xs[i]], [allocated[i]], size=10, color=GROWING_COLOR, marker="diamond",
                    legend_label=f"peak {fmt_bytes(allocated[i] * _MIB)} at {fmt_ms(xs[i])}"
                                 + (f" (step {at['step']})" if at.get("step") is not None else ""))
    for o in ooms or []:
        fig.scatter([o["t_ms"]], [(o.get("allocated_bytes") or 0) / _MIB], size=14, color=GROWING_COLOR, marker="x",
                    line_width=3, legend_label=f"out of memory: {fmt_bytes(o.get('requested_bytes') or 0)} "
                                               f"requested at {fmt_ms(o['t_ms'])}")
    style(fig, "ms from the first allocator event or step")
    fig.yaxis.axis_label = "MiB"
    fig.ygrid.visible = True
    legend = fig.legend[0]  # below the plot, never over the curve
    fig.center.remove(legend)
    fig.add_layout(legend, "below")
    legend.orientation = "horizontal"
    return fig


def peak_sites_chart(sites: list[dict[str, Any]], growing: set[tuple[Any, Any, str]], several: bool,
                     x_label: str = "MiB live at the peak") -> Any:
    """MiB live at the peak by site, largest first; red: a site that also holds memory step after step, grey: what
    was allocated before the trace."""
    rows = sorted(sites, key=lambda r: (_gpu_key(r) != _gpu_key(sites[0]), -(r.get("bytes") or 0)))
    factors = [(_gpu_label(_gpu_key(r)), short(r["site"], 60)) if several else short(r["site"], 60) for r in rows]
    colors = [CATEGORY_COLORS["step"] if r["site"] == BEFORE_TRACE else
              GROWING_COLOR if (*_gpu_key(r), r["site"]) in growing else OTHER_COLOR for r in rows]
    return hbar_chart(factors, [(r.get("bytes") or 0) / _MIB for r in rows], colors, x_label,
                      [("site", "@site"), ("MiB", "@value{0,0.0}"), ("allocations", "@allocations")],
                      extra={"site": [str(r["site"]) for r in rows],
                             "allocations": ["—" if r.get("allocations") is None else str(r["allocations"])
                                             for r in rows]})


def _chart_sections(report: Report) -> list[Section]:
    curve = report.metrics.get("memory_curve") or []
    ooms = [o for o in report.metrics.get("memory_oom_points") or [] if o.get("t_ms") is not None]
    steps = report.metrics.get("memory_steps") or []
    entries = {_gpu_key(m): m for m in report.memory}
    gpus = list(dict.fromkeys(_gpu_key(r) for r in curve))
    out = []
    if gpus:
        charts = [timeline_chart([r for r in curve if _gpu_key(r) == g],
                                 [s for s in steps if _gpu_key(s) == g and s.get("start_ms") is not None],
                                 entries.get(g), [o for o in ooms if _gpu_key(o) == g][:20])
                  for g in gpus[:MAX_CHARTS]]
        note = ("MiB over time, from the allocator events of the trace or a snapshot's history: allocated (live "
                "tensors) and reserved (held by the caching allocator), each step a shaded band with its number, the "
                "peak marked, and a failed request a cross")
        if any(m.get("basis") == "cuda" for m in report.memory):
            note += ("; from Nsight Systems' CUDA memory events the one line is what the process took from CUDA "
                     "(a caching allocator's reserve, not its tensors)")
        if len(gpus) > 1:
            note += "; one chart per GPU, in the order " + ", ".join(_gpu_label(g) for g in gpus[:MAX_CHARTS])
        out.append(Section("Memory over time", note=note, items=charts))
    sites = [r for r in report.metrics.get("memory_peak_sites") or [] if r.get("site") is not None]
    if sites:
        growing = {(*_gpu_key(r), r["site"]) for r in report.metrics.get("memory_growth_sites") or []}
        out.append(Section("Live at the peak, by allocation site",
                           note="MiB live when the most was allocated; red: a site that also holds memory step after "
                                "step, grey: allocated before the trace (parameters, optimizer state)",
                           items=[peak_sites_chart(sites, growing, len({_gpu_key(r) for r in sites}) > 1)]))
    # a snapshot given without its trace: what was live when it was dumped (its top sites)
    dumped = [{"rank": m.get("rank"), "device": m.get("device"), **s} for m in report.memory
              if m.get("peak_bytes") is None for s in m.get("top_sites") or [] if s.get("site") is not None]
    if dumped:
        out.append(Section("Live in the snapshot, by allocation site",
                           note="MiB live when the snapshot was dumped, by the allocating line (the largest sites)",
                           items=[peak_sites_chart(dumped, set(), len({_gpu_key(r) for r in dumped}) > 1,
                                                   "MiB live in the snapshot")]))
    return out


def has_data(report: Report) -> bool:
    """Whether the report holds allocator data."""
    return bool(report.memory)


def sections(report: Report) -> list[Section]:
    if not has_data(report):
        return [Section("GPU memory", empty=empty.worded(EMPTY, report))]
    summary = [{"device": heading, "facts": " · ".join(lines)} for heading, lines in memory_lines(report)]
    out = [Section("GPU memory", note=NOTE, items=[table_html(summary, [Column("device", "GPU"),
                                                                        Column("facts", "what the memory did")])])]
    out += _chart_sections(report)
    steps = report.metrics.get("memory_steps") or []
    if steps:
        out.append(Section("Memory at each step's end", note="warm-up steps are not judged", items=[table_html(
            steps, [Column("rank", "rank"), Column("device", "GPU"), Column("step", "step"),
                    Column("warmup", "warm-up"),
                    measured("allocated_end_bytes", "allocated MiB", _STEPS("allocated_end_bytes")),
                    measured("reserved_end_bytes", "reserved MiB", _STEPS("reserved_end_bytes")),
                    measured("allocated_max_bytes", "peak in step MiB", _STEPS("allocated_max_bytes"))])]))
    roles = [{"rank": m.get("rank"), "device": m.get("device"), **r} for m in report.memory
             for r in m.get("by_role") or []]
    if roles:
        out.append(Section("At the peak, by role", note="live when the most was allocated, by what the memory is "
                           "for, read from each allocation's stack and the operators and ranges around it",
                           items=[table_html(roles, [
                               Column("rank", "rank"), Column("device", "GPU"), Column("role", "role"),
                               measured("allocations", "allocations", _DEVICE("allocations")),
                               measured("bytes", "MiB", _DEVICE("bytes"))])]))
    sites = report.metrics.get("memory_peak_sites") or []
    if sites:
        out.append(Section("Live at the peak, by allocation site (table)", items=[table_html(
            sites, [Column("rank", "rank"), Column("device", "GPU"), Column("site", "site"),
                    measured("allocations", "allocations", _SITES("allocations")),
                    measured("bytes", "MiB", _SITES("bytes"))])]))
    growth = report.metrics.get("memory_growth_sites") or []
    if growth:
        out.append(Section("Held after every step, by allocation site", note="tensors of steady steps never freed",
                           items=[table_html(growth, [
                               Column("rank", "rank"), Column("device", "GPU"), Column("site", "site"),
                               Column("op", "operator"), measured("allocations", "allocations", _GROWTH("allocations")),
                               measured("bytes_per_step", "MiB per step", _GROWTH("bytes_per_step"))])]))
    return out
