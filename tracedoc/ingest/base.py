"""What every format's reader hands back about a file it loaded (``load`` → LoadResult)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """One rank of a file that holds several (one Nsight Systems report of a whole job): its process and the rank
    the file names for it (MPI), else None."""

    pid: int
    rank: int | None
    event_count: int


@dataclass
class LoadResult:
    """What one loaded file told about itself: the rank it names (None: none), the job's size when it says so,
    how many events it held and the tool that wrote it. ``parts``: when the file holds several ranks, one Part
    each, in rank order, their rows written under consecutive source ids from the one the reader was given."""

    rank: int | None
    world_size: int | None
    event_count: int
    tool: str
    parts: tuple[Part, ...] = ()

    @property
    def sources(self) -> int:
        """How many source ids the file's rows took."""
        return max(1, len(self.parts))
