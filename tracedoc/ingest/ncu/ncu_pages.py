"""What Nsight Compute prints or exports besides a report and its raw page, recognised so that a user who gives
tracedoc one of them is told what to give instead, not that the file is no trace.

Two CSV pages share the raw page's reader (``ncu_csv``, which refuses them by their header): the details page
(``--csv --page details``) and the per-kernel summary (``--csv --print-summary per-kernel``). ncu's printed text is
claimed by no format and is named where no format reads a file (``tracedoc.ingest``): the details page as text
(``--page details``, and what ``ncu ./app`` prints by default), and the log of a run whose results went to a report
(``ncu -o REPORT ./app``). Imports nothing heavy: it runs where no reader does.
"""

from __future__ import annotations

import re

RAW_HINT = "export the raw page: ncu --import REPORT.ncu-rep --csv --page raw --print-units base > REPORT.csv"
_LOG_LINE = re.compile(r"^==(?:PROF|WARNING|ERROR)==")
_REPORT_WRITTEN = re.compile(r"^==PROF== Report: (?P<path>\S.{0,999}?)\s*$")
# The two lines that open each launch of the printed details page: "[pid] process@host", then the kernel with its
# launch, e.g. "  kernel(args) (96, 1, 1)x(128, 1, 1), Context 1, Stream 7, Device 0, CC 8.6"
_PROCESS_LINE = re.compile(r"^\[\d+\] \S.*@\S*$")
_KERNEL_LINE = re.compile(r"\)x\(.*, Context \d+, Stream \d+, Device \d+, CC \d+\.\d+$")
_LINES = 2000  # of the file's first bytes, the lines looked at


def csv_page(header: list[str]) -> str | None:
    """The name of the ncu CSV page whose header row is ``header``, where it is one tracedoc does not read (None: it
    may be the raw page)."""
    if "Metric Name" not in header:
        return None
    if "Invocations" in header:
        return "ncu's per-kernel summary (--print-summary per-kernel)"
    return "ncu's details page" if "Section Name" in header else None


def printed(head: bytes) -> str | None:
    """What ncu printed, where the file's first bytes ``head`` are its text: the sentence that tells the user what
    it is and what to give tracedoc instead; None where the text is not ncu's."""
    lines = head.decode("utf-8", errors="replace").splitlines()[:_LINES]
    logged, report = False, None
    for line, after in zip(lines, [*lines[1:], ""]):
        if _PROCESS_LINE.match(line) and _KERNEL_LINE.search(after.rstrip()):
            return (f"ncu's details page as printed text, which tracedoc does not read; profile into a report "
                    f"(ncu -o REPORT ...) and give tracedoc REPORT.ncu-rep, or {RAW_HINT}")
        if _LOG_LINE.match(line):
            logged = True
            if written := _REPORT_WRITTEN.match(line):
                report = written["path"]
    if not logged or not lines or not _LOG_LINE.match(lines[0]):
        return None
    if report is not None:
        return f"ncu's log of a profiled run, not its results; give tracedoc the report it wrote: {report}"
    return "ncu's log of a profiled run, not its results; profile into a report (ncu -o REPORT ...) and give " \
           "tracedoc REPORT.ncu-rep"
