"""`--format perfetto`: the input's timeline with tracedoc's findings and time attribution as tracks of their own, for
ui.perfetto.dev, Perfetto's trace_processor and chrome://tracing.

Format: the Chrome JSON trace event format (an array of events), which Perfetto opens by its content. It needs no
library: DuckDB writes each event's JSON from the store (the module export.perfetto makes them), a batch at a
time, and Python only joins the lines into the file (the analysis connection may not touch files: Store.lock).
(Perfetto's own protobuf TrackEvent format is richer, but would need the protobuf runtime and an object per event
in Python.) Its one constraint, that slices on one thread nest, holds by
construction: GPU work per stream and host activity per thread as the profilers recorded it, attribution segments
that never overlap, and one thread per finding.

Processes and threads (``pid``/``tid`` are tracedoc's numbers, not the traced program's, so that ranks recorded on
different hosts never collide): per input with a timeline, ``rank R · host`` (one thread per host thread: its
operators, runtime/driver calls, annotation and NVTX ranges, nested as recorded), ``rank R · GPU D`` (one thread
per stream: kernels, copies and memsets; beside it the stream's synchronization records, which span the work they
wait for, and work overlapping the stream's earlier work) and ``rank R · tracedoc`` (its profiler steps, the time
attribution of each GPU, one slice per stretch of one cause, and one thread per finding about the rank, over the
time range the finding is about); findings about the whole job go to ``tracedoc · all ranks``. A flow (an arrow
in Perfetto) goes from each runtime or driver call to the GPU work it launched, matched on the correlation id.
Times are µs after the earliest event (ns kept as three decimals).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracedoc import strict_json
from tracedoc.errors import InputError
from tracedoc.report import Report
from tracedoc.store import Store
from tracedoc.words.findings import finding_span, scope_text

NAME = "perfetto"
EXTENSION = ".perfetto.json"
TITLE = "Perfetto trace"
_BATCH_ROWS = 100_000  # events' JSON lines joined and written at a time

# The process of the findings about the whole job (a source's pids start at 1000: export.perfetto), and the tid of
# finding n in its process: FINDING_TID + n.
ALL_RANKS_PID = 1
FINDING_TID = 100_000


def write(store: Store, report: Report, path: Path) -> None:
    """Write the Perfetto trace of ``store`` and its ``report`` to ``path``; InputError when the store holds no
    timeline (an Nsight Compute report, flight-recorder dumps, GPU health records)."""
    if report.summary.get("basis") != "timeline":
        formats = ", ".join(sorted({i.format for i in report.inputs})) or "none"
        raise InputError(f"no timeline to write: a Perfetto trace needs PyTorch or Nsight Systems traces (the inputs "
                         f"are {formats})")
    store.include("export.perfetto")
    store.con.execute("DELETE FROM export_perfetto_findings")  # another report's, written before on this store
    rows = finding_events(store, report)
    if rows:
        store.con.executemany("INSERT INTO export_perfetto_findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    from tracedoc.store.engine import with_python_objects  # here: a report read back from the cache needs no DuckDB

    with_python_objects()
    reader = store.con.sql("SELECT to_json(e)::VARCHAR FROM export_perfetto_events e").to_arrow_reader(
        _BATCH_ROWS)
    with path.open("w", encoding="utf-8") as f:
        separator = "[\n\t"
        for batch in reader:
            if batch.num_rows:
                f.write(separator + ",\n\t".join(batch.column(0).to_pylist()))
                separator = ",\n\t"
        f.write("\n]\n" if separator != "[\n\t" else "[\n]\n")


def finding_events(store: Store, report: Report) -> list[tuple[Any, ...]]:
    """Each finding as a slice on a thread of its own, over the time it is about (finding_span)."""
    zero = store.scalar("SELECT zero_ns FROM export_perfetto_zero")
    if zero is None:
        return []
    sources = {r["rank"]: (r["source_id"], r["pid"]) for r in store.query(
        "SELECT source_id, rank, export_perfetto_pid(source_id, export_perfetto_tracedoc()) AS pid "
        "FROM export_perfetto_sources")}
    window_rows = store.query("SELECT * FROM trace_windows")
    windows = {r["source_id"]: (r["start_ns"], r["end_ns"]) for r in window_rows}
    origins = {r["source_id"]: r["capture_start_ns"] for r in window_rows}
    steps = {(r["source_id"], r["step"]): (r["ts_ns"], r["ts_ns"] + r["dur_ns"])
             for r in store.query("SELECT source_id, step, ts_ns, dur_ns FROM trace_steps")}
    rows: list[tuple[Any, ...]] = []
    named: set[int] = set()
    for number, finding in enumerate(report.findings, 1):
        source, pid = sources.get(finding.scope.rank, (None, ALL_RANKS_PID))
        own_steps = {step: span for (s, step), span in steps.items() if s == source}
        span = finding_span(finding, windows.get(source), own_steps, 1e6, origins.get(source)) \
            if source is not None else None
        if span is None:  # the whole job (or a rank without a timeline): every window
            if not windows:
                continue
            span, pid = (min(w[0] for w in windows.values()), max(w[1] for w in windows.values())), ALL_RANKS_PID
        if pid == ALL_RANKS_PID and pid not in named:
            named.add(pid)
            rows.append(("process_name", "__metadata", "M", 0.0, 0.0, pid, 0,
                         strict_json.dumps({"name": "tracedoc · all ranks"})))
        tid = FINDING_TID + number
        rows.append(("thread_name", "__metadata", "M", 0.0, 0.0, pid, tid,
                     strict_json.dumps({"name": f"finding #{number} · {finding.rule}"})))
        args = {"rule": finding.rule, "severity": finding.severity, "where": scope_text(finding.scope.to_dict()),
                "impact_ms": finding.impact_ms, "impact_pct": finding.impact_pct, "message": finding.message,
                "fix": finding.fix, "part_of": finding.part_of}
        rows.append((f"#{number} {finding.title}", f"finding,{finding.severity}", "X", (round(span[0]) - zero) / 1000.0,
                     (span[1] - span[0]) / 1000.0, pid, tid, strict_json.dumps(args)))
    return rows
