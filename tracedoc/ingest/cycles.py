"""Several traces of one process, one per cycle of the PyTorch profiler's schedule: the last is judged.

A schedule that repeats (``schedule(wait=1, warmup=1, active=3, repeat=2)``, or ``repeat`` left at 0 in a longer
loop) hands each cycle to ``on_trace_ready``, and ``tensorboard_trace_handler`` (or a handler naming files by
``prof.step_num``) writes a trace per cycle into one folder. Those traces are one rank recorded at several times,
not several ranks. The reader of a format that can tell which process wrote a file and when
(``TellsItsRecording``) says so from the file's first bytes. Files of one folder and one process (its pid, the rank
it names, and the rank and worker its file name gives: two hosts may run processes of the same pid) that started
at different times are cycles: the one that started last is judged, past the run's warm-up, and the earlier ones
are set aside, listed in the report (``summary['set_aside']``). Naming one file judges that one. Copies of the last
trace (files that started at the same moment) are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracedoc.ingest.names import rank_in_name, worker_in_name

if TYPE_CHECKING:
    from tracedoc.ingest import InputFile


def latest_cycles(files: Sequence[InputFile]) -> list[InputFile]:
    """``files`` without the earlier cycles of any process, in the order given; the first kept file of a process
    carries the paths it is judged in place of (``InputFile.earlier``, set on it: standard input's copy lives as
    long as its ``InputFile``)."""
    groups: dict[tuple[Any, ...], list[tuple[float, int]]] = {}
    for index, item in enumerate(files):
        if item.recording is not None:
            key = (item.format, item.path.absolute().parent, item.recording.pid, item.recording.rank,
                   rank_in_name(item.path), worker_in_name(item.path))
            groups.setdefault(key, []).append((item.recording.start_us, index))
    dropped: set[int] = set()
    for starts in groups.values():
        last_start = max(start for start, _ in starts)
        before = sorted((start, i) for start, i in starts if start < last_start)
        if before:
            judged = min(i for start, i in starts if start == last_start)
            files[judged].earlier = tuple(files[i].path for _, i in before)
            dropped.update(i for _, i in before)
    return [item for i, item in enumerate(files) if i not in dropped]


def set_aside_rows(inputs: Sequence[InputFile]) -> list[dict[str, Any]]:
    """The report's ``summary['set_aside']``: each earlier cycle set aside, with the trace judged in its place and
    the process both came from."""
    return [{"path": str(path), "judged": str(item.path), "pid": item.recording.pid if item.recording else None}
            for item in inputs for path in item.earlier]
