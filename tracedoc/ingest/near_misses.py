"""What the profilers tracedoc reads write besides the files it reads, named so that a user who gives tracedoc one
of them is told what it is and what to give instead, where "not a trace format" would leave them guessing (the
profiler is one tracedoc names as read).

Consulted where no format claims a file or a directory holds none (``tracedoc.ingest``): Nsight Compute's details
page and per-kernel summary as CSV, its printed text (the details page, which ``ncu ./app`` prints by default, and
the log of a run profiled into a report); Nsight Systems' exports other than SQLite (JSON and text, a folder of
Parquet or Arrow tables) and what ``nsys stats`` and ``nsys analyze`` print or write as CSV; the PyTorch profiler's
table of ``key_averages()`` and its memory timeline (``export_memory_timeline``). In a directory these
files are passed over as any file no format reads is. Only the first bytes the formats are sniffed by are read, by
patterns whose work is linear in them, and nothing heavy is imported.
"""

from __future__ import annotations

import re
from itertools import islice
from pathlib import Path

RAW_HINT = "export the raw page: ncu --import REPORT.ncu-rep --csv --page raw --print-units base > REPORT.csv"
_NCU_REPORT = "profile into a report (ncu -o REPORT ...) and give tracedoc REPORT.ncu-rep"
_NSYS_HINT = "give tracedoc the .nsys-rep or its SQLite export (nsys export --type sqlite REPORT.nsys-rep)"
_LINES = 2000  # of the first bytes, the lines looked at
_FIRST_LINES = 5  # of those, the first ones (not blank) where a summary's heading is looked for

# ncu: its log lines, the one naming the report written, the header of a CSV page, and the two lines that open each
# launch of the printed details page: "[pid] process@host", then the kernel with its launch, e.g.
# "  kernel(args) (96, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 8.6"
_NCU_LOG = re.compile(r"==(?:PROF|WARNING|ERROR)==")
_NCU_REPORT_WRITTEN = re.compile(r"==PROF== Report: (?P<path>\S.{0,999}\.ncu-rep)$")
NCU_HEADER_START = '"ID","Process ID","Process Name","Host Name"'  # ncu's raw and details pages as CSV
_NCU_CSV_HEADER = (NCU_HEADER_START, '"Process ID","Process Name","Host Name"')  # and its per-kernel summary
_NCU_PROCESS = re.compile(r"\[\d+\] \S")
_NCU_LAUNCH = re.compile(r", Context \d+, Stream \d+, Device \d+, CC \d+\.\d+$")  # after "(grid)x(block)"

# nsys: its exports open with the table of strings, whose first strings are fixed; a JSON export's events follow,
# one object a line ('{"Type":49,"DiagnosticEvent":{...'); the first columns of the tables of nsys stats and
# nsys analyze, and the line each prints before a table
_NSYS_STRINGS = ('"[Unknown]"', '"[kernel.kallsyms]"')
_NSYS_JSON_EVENT = re.compile(r'\{"Type":\d+,"\w+Event":\{')
_NSYS_TABLE_HEADER = re.compile(r"(?:Time \(%\),Total Time \(ns\)|Start \(ns\),Duration \(ns\)|"
                                r"Duration \(ns\),Start \(ns\)|Row#,(?:In-Use \(%\),)?Duration \(ns\)),")
_NSYS_PROCESSING = re.compile(r"Processing \[[^\]\n]{1,4096}\] with \[[^\]\n]{0,4096}\b(?:reports|rules)/\w+\.py\]")
_NSYS_EXPORT_TABLE = "META_DATA_EXPORT"  # in every export as tables: the exporting product and its schema's version

# PyTorch's profiler: the table key_averages() prints (a rule of dashes, then its header), and the memory timeline
# (export_memory_timeline) as JSON (its times, microseconds since the epoch, then the bytes of each category at each)
# or as a page holding its plot
_TORCH_TABLE_RULE = re.compile(r"-{10,}(?:  -+)+\s*$")
_TORCH_TABLE_HEADER = re.compile(r"\s*Name\s+Self CPU %\s+Self CPU\b")
_TORCH_MEMORY_JSON = re.compile(r"\[\[\d{15,17}, \d{15,17}[,\]]")
_TORCH_MEMORY_PAGE = "<title>GPU Memory Timeline HTML</title>"
_TORCH_HINT = ("give tracedoc the trace (prof.export_chrome_trace('trace.json'), or "
               "torch.profiler.tensorboard_trace_handler)")


def named(head: bytes) -> str | None:
    """What a file no format reads is, from its first bytes (unpacked), with what to give tracedoc instead: a
    sentence that follows "this is"; None where it is none of the above."""
    lines = head.decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()[:_LINES]
    if not lines:
        return None
    first = lines[0]
    if first.startswith('{"data":[' + ",".join(_NSYS_STRINGS)) or (
            first.startswith('{"data":["') and len(lines) > 1 and _NSYS_JSON_EVENT.match(lines[1])):
        return f"Nsight Systems' export as JSON (nsys export --type json), which tracedoc does not read; {_NSYS_HINT}"
    if lines[:2] == [f"data: {s}" for s in _NSYS_STRINGS]:
        return f"Nsight Systems' export as text (nsys export --type text), which tracedoc does not read; {_NSYS_HINT}"
    heading = islice((line for line in lines if line.strip()), _FIRST_LINES)
    if _NSYS_TABLE_HEADER.match(first) or any(_NSYS_PROCESSING.match(line) for line in heading):
        return f"a summary printed by nsys stats or nsys analyze, which tracedoc does not read; {_NSYS_HINT}"
    if len(lines) > 1 and _TORCH_TABLE_RULE.match(first) and _TORCH_TABLE_HEADER.match(lines[1]):
        return f"the table of the PyTorch profiler's key_averages(), which tracedoc does not read; {_TORCH_HINT}"
    if _TORCH_MEMORY_JSON.match(first) or any(_TORCH_MEMORY_PAGE in line for line in lines[:_FIRST_LINES]):
        return ("the PyTorch profiler's memory timeline (export_memory_timeline), which tracedoc does not read; give "
                "tracedoc the trace recorded with profile_memory=True, or an allocator snapshot "
                "(torch.cuda.memory._dump_snapshot)")
    return _ncu_csv_page(lines) or _ncu_printed(lines)


def named_directory(path: Path) -> str | None:
    """What a directory in which no format reads a file is (a sentence that follows "this is"); None where it is
    none of the above."""
    for suffix, kind in ((".parquet", "parquetdir"), (".arrow", "arrowdir")):
        if (path / f"{_NSYS_EXPORT_TABLE}{suffix}").is_file():
            return (f"Nsight Systems' export as a folder of tables (nsys export --type {kind}), which tracedoc does "
                    f"not read; {_NSYS_HINT}")
    return None


def _ncu_csv_page(lines: list[str]) -> str | None:
    """ncu's details page or per-kernel summary as CSV (the raw page is read: ``ncu_csv``), after what ncu and the
    profiled program print before it when it profiles live."""
    header = next((line for line in lines if line.startswith(_NCU_CSV_HEADER)), None)
    if header is None or '"Kernel Name"' not in header or '"Metric Name"' not in header:
        return None
    if '"Invocations"' in header:
        return f"ncu's per-kernel summary (--print-summary per-kernel), which tracedoc does not read; {RAW_HINT}"
    if '"Section Name"' in header:
        return f"ncu's details page, which tracedoc does not read; {RAW_HINT}"
    return None


def _ncu_printed(lines: list[str]) -> str | None:
    """ncu's printed details page, or its log of a run profiled into a report (naming the report where it says)."""
    report = None
    for line, after in zip(lines, [*lines[1:], ""]):
        if _NCU_PROCESS.match(line) and "@" in line and ")x(" in after and _NCU_LAUNCH.search(after.rstrip()):
            return f"ncu's details page as printed text, which tracedoc does not read; {_NCU_REPORT}, or {RAW_HINT}"
        if line.startswith("==PROF== Report: ") and (written := _NCU_REPORT_WRITTEN.match(line.rstrip())):
            report = written["path"]
    if not _NCU_LOG.match(lines[0]):
        return None
    if report is not None:
        return f"ncu's log of a profiled run, not its results; give tracedoc the report it wrote: '{report}'"
    return f"ncu's log of a profiled run, not its results; {_NCU_REPORT}"
