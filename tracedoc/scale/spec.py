"""Where a distributed run's per-rank work runs, and in how many batches (no Dask here: the CLI imports it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClusterSpec:
    """Where the per-rank work runs: ``workers`` local processes, or the Dask scheduler at ``scheduler`` (an
    address) or named in ``scheduler_file`` (what `dask scheduler --scheduler-file` writes).

    ``batches_per_thread``: the ranks go to the workers in about this many batches per worker thread, each
    analysed in one DuckDB connection. Fewer batches plan the analysis modules fewer times; more balance the load
    and keep a failed batch's retry (one rank at a time) small. ``worker_logs``: local workers' own error logs (a
    failed task's traceback) shown, as --debug asks."""

    workers: int | None = None
    scheduler: str | None = None
    scheduler_file: Path | None = None
    batches_per_thread: int = 4
    worker_logs: bool = False
