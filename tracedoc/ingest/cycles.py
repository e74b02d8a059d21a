"""Several traces of one process, one per cycle of the PyTorch profiler's schedule: the last is judged.

A schedule that repeats (``schedule(wait=1, warmup=1, active=3, repeat=2)``, or ``repeat`` left at 0 in a longer
loop) hands each cycle to ``on_trace_ready``, and ``tensorboard_trace_handler`` (or a handler naming files by
``prof.step_num``) writes a trace per cycle into one folder. Those traces are one rank recorded at several times,
not several ranks. The reader of a format that can tell which process wrote a file and when
(``TellsItsRecording``) says so from the file's first bytes; files of one process (its pid, the rank it names, and
the rank its file name gives) that started at different times are cycles: the one that started last is judged,
past the run's warm-up, and the earlier ones are set aside, listed in the report (``summary['set_aside']``).
Naming one file judges that one. Files that started at the same moment (copies of one trace) are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracedoc.ingest import InputFile


def latest_cycles(files: Sequence[InputFile], rank_in_name: Callable[[InputFile], int | None]) -> list[InputFile]:
    """``files`` without the earlier cycles of any process, each kept file carrying the paths it stands for
    (``InputFile.earlier``), in the order given. ``rank_in_name``: the rank a file's name gives, a part of what
    tells processes apart (two hosts may run processes of the same pid)."""
    groups: dict[tuple[Any, ...], list[tuple[float, int]]] = {}
    for index, item in enumerate(files):
        if item.recording is not None:
            key = (item.format, item.recording.pid, item.recording.rank, rank_in_name(item))
            groups.setdefault(key, []).append((item.recording.start_us, index))
    earlier: dict[int, tuple[Path, ...]] = {}
    dropped: set[int] = set()
    for starts in groups.values():
        if len(starts) < 2 or len({start for start, _ in starts}) < len(starts):
            continue
        *before, (_, last) = sorted(starts)
        earlier[last] = tuple(files[i].path for _, i in before)
        dropped.update(i for _, i in before)
    if not earlier:
        return list(files)
    return [replace(item, earlier=earlier[i]) if i in earlier else item
            for i, item in enumerate(files) if i not in dropped]


def set_aside_rows(inputs: Sequence[InputFile]) -> list[dict[str, Any]]:
    """The report's ``summary['set_aside']``: each earlier cycle set aside, with the trace judged in its place and
    the process both came from."""
    return [{"path": str(path), "judged": str(item.path), "pid": item.recording.pid if item.recording else None}
            for item in inputs for path in item.earlier]
