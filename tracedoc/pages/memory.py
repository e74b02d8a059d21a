"""Memory page: per GPU, the allocator's memory at each step's end (allocated and reserved), what is live at the
peak by allocation site, and the sites whose tensors stay alive step after step (report.memory and the metrics
memory_steps, memory_peak_sites, memory_growth_sites). Bytes are shown in MiB."""

from __future__ import annotations

from tracedoc.pages import empty
from tracedoc.pages.charts import Section
from tracedoc.pages.fragments import Column, number, table_html
from tracedoc.report import Report
from tracedoc.words.memory import NOTE, memory_lines

TITLE = "Memory"
ROUTE = "memory"
_MIB = 1 << 20


def _mib(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    return [{**r, **{k: None if r.get(k) is None else r[k] / _MIB for k in keys}} for r in rows]


def sections(report: Report) -> list[Section]:
    if not report.memory:
        return [Section("GPU memory", empty=empty.sentence(ROUTE, report))]
    summary = [{"device": heading, "facts": " · ".join(lines)} for heading, lines in memory_lines(report)]
    out = [Section("GPU memory", note=NOTE, items=[table_html(summary, [Column("device", "GPU"),
                                                                        Column("facts", "what the memory did")])])]
    steps = _mib(report.metrics.get("memory_steps") or [],
                 ("allocated_end_bytes", "reserved_end_bytes", "allocated_max_bytes"))
    if steps:
        out.append(Section("Memory at each step's end", note="MiB; warm-up steps are not judged", items=[table_html(
            steps, [Column("rank", "rank"), Column("device", "GPU"), Column("step", "step"),
                    Column("warmup", "warm-up"),
                    Column("allocated_end_bytes", "allocated MiB", number(1), numeric=True),
                    Column("reserved_end_bytes", "reserved MiB", number(1), numeric=True),
                    Column("allocated_max_bytes", "peak in step MiB", number(1), numeric=True)])]))
    sites = _mib(report.metrics.get("memory_peak_sites") or [], ("bytes",))
    if sites:
        out.append(Section("Live at the peak, by allocation site", note="MiB", items=[table_html(
            sites, [Column("rank", "rank"), Column("device", "GPU"), Column("site", "site"),
                    Column("allocations", "allocations", number(), numeric=True),
                    Column("bytes", "MiB", number(1), numeric=True)])]))
    growth = _mib(report.metrics.get("memory_growth_sites") or [], ("held_bytes", "bytes_per_step"))
    if growth:
        out.append(Section("Held after every step, by allocation site", note="MiB; tensors of steady steps never freed",
                           items=[table_html(growth, [
                               Column("rank", "rank"), Column("device", "GPU"), Column("site", "site"),
                               Column("op", "operator"), Column("allocations", "allocations", number(), numeric=True),
                               Column("bytes_per_step", "MiB per step", number(1), numeric=True)])]))
    return out
