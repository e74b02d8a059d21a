"""The Dask side: a local cluster of processes or an existing scheduler, and the map over the ranks with per-rank
failures, progress and a clean stop on Ctrl-C. The only module that imports Dask."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracedoc.errors import InputError, TracedocError, first_line

try:
    from distributed import Client, LocalCluster, wait
    from distributed.client import FIRST_COMPLETED
except ImportError:  # pragma: no cover - depends on the installation
    raise InputError("distributed runs need Dask: pip install 'tracedoc[dask]'") from None

Progress = Callable[[str], None]
_CONNECT_TIMEOUT = "10s"
_POLL_S = 1.0


@dataclass(frozen=True)
class ClusterSpec:
    """Where the per-rank work runs: ``workers`` local processes, or the scheduler at ``scheduler`` (an address)
    or named in ``scheduler_file`` (the file `dask scheduler --scheduler-file` writes)."""

    workers: int | None = None
    scheduler: str | None = None
    scheduler_file: Path | None = None


@dataclass
class RankFailure:
    """Why a rank's task gave no result: its input could not be read, or its worker died."""

    reason: str


@contextlib.contextmanager
def connect(spec: ClusterSpec) -> Iterator[Client]:
    """A client on the cluster ``spec`` names; a local cluster is shut down when the block ends, also on Ctrl-C."""
    if spec.workers is not None:
        if spec.workers < 1:
            raise InputError(f"--workers {spec.workers}: give at least 1")
        # No dashboard; the scheduler's HTTP routes on a free port (the default 8787 may be taken).
        with (LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           scheduler_kwargs={"dashboard_address": ":0"}, silence_logs=logging.ERROR) as cluster,
              Client(cluster) as client):
            yield client
        return
    if spec.scheduler_file is not None and not spec.scheduler_file.is_file():
        raise InputError(f"--dask-scheduler-file {spec.scheduler_file}: no such file")
    where = spec.scheduler or str(spec.scheduler_file)
    try:
        client = Client(address=spec.scheduler,
                        scheduler_file=str(spec.scheduler_file) if spec.scheduler_file else None,
                        timeout=_CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {where}: {first_line(exc)}") from None
    with client:
        yield client


def map_ranks(client: Client, func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], labels: Sequence[str],
              stage: str, progress: Progress | None = None) -> list[Any]:
    """``func(*call)`` for every call on the cluster, at most as many at once as the cluster has threads (so the
    ones in flight are the ones running); a result per call, or a RankFailure saying why there is none.
    ``labels`` name the calls in progress messages (the slowest still running)."""
    results: list[Any] = [None] * len(calls)
    pending = list(range(len(calls)))[::-1]
    running: dict[Any, tuple[int, float]] = {}
    done = 0
    try:
        while pending or running:
            capacity = max(1, sum(client.nthreads().values()))
            while pending and len(running) < capacity:
                i = pending.pop()
                future = client.submit(func, *calls[i], pure=False, key=f"tracedoc-{stage}-{i}-{time.time_ns()}")
                running[future] = (i, time.monotonic())
            try:
                finished, _ = wait(list(running), timeout=_POLL_S, return_when=FIRST_COMPLETED)
            except TimeoutError:
                finished = set()
            for future in finished:
                i, _ = running.pop(future)
                results[i] = _outcome(future)
                future.release()
                done += 1
            if progress:
                progress(_progress_text(stage, done, len(calls), running, labels))
    except BaseException:
        client.cancel(list(running), force=True)
        raise
    return results


def _outcome(future: Any) -> Any:
    """The future's result, or the RankFailure that says in one line why it has none."""
    if future.status == "finished":
        return future.result()
    exc = future.exception()
    if isinstance(exc, TracedocError):
        return RankFailure(first_line(exc))
    if type(exc).__name__ == "KilledWorker":
        return RankFailure("its worker died while analysing it (out of memory, or killed)")
    if future.status == "cancelled":
        return RankFailure("its task was cancelled")
    return RankFailure(f"internal error on its worker: {type(exc).__name__}: {first_line(exc)}")


def _progress_text(stage: str, done: int, total: int, running: dict[Any, tuple[int, float]],
                   labels: Sequence[str]) -> str:
    """'reading ranks: 12 of 256 done, 4 running; slowest: rank7.json.gz (41 s)'."""
    text = f"{stage} ranks: {done} of {total} done"
    if running:
        i, start = min(running.values(), key=lambda v: v[1])
        text += f", {len(running)} running; slowest: {labels[i]} ({time.monotonic() - start:.0f} s)"
    return text
