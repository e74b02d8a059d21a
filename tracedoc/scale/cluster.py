"""The Dask side: a local cluster of processes or an existing scheduler, and the map over the ranks with per-rank
failures, progress and a clean stop on Ctrl-C. The only module that imports Dask."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracedoc.errors import InputError, TracedocError, first_line
from tracedoc.scale.spec import ClusterSpec

try:
    from distributed import Client, LocalCluster, wait
    from distributed.client import FIRST_COMPLETED
except ImportError:  # pragma: no cover - depends on the installation
    raise InputError("distributed runs need Dask: pip install 'tracedoc[dask]'") from None

Progress = Callable[[str], None]
_CONNECT_TIMEOUT = "10s"
_POLL_S = 1.0


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
        # The workers' own logs (a task's traceback among them) go to this terminal: only with --debug, since what
        # failed is said in one line per rank (the report's missing ranks).
        logs = logging.ERROR if spec.worker_logs else logging.CRITICAL
        with (LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           scheduler_kwargs={"dashboard_address": ":0"}, silence_logs=logs) as cluster,
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


def map_batches(client: Client, func: Callable[..., Any], batches: Sequence[tuple[Any, ...]],
                args: Callable[[tuple[Any, ...]], tuple[Any, ...]], label: Callable[[tuple[Any, ...]], str],
                stage: str, progress: Progress | None = None) -> tuple[list[tuple[tuple[Any, ...], Any]],
                                                                     list[tuple[Any, RankFailure]]]:
    """``func(batch, *args(batch))`` for every batch of ranks on the cluster, at most as many at once as the
    cluster has threads (so the ones in flight are the ones running). A batch that fails runs again one rank at a
    time, so that one bad rank does not sink the others. Returns each batch that gave a result with its result,
    and each rank that gave none with the RankFailure that says why. ``label`` names a batch in progress messages
    (ranks done of the total, the slowest batch still running)."""
    queue = list(batches)[::-1]
    results: list[tuple[tuple[Any, ...], Any]] = []
    failures: list[tuple[Any, RankFailure]] = []
    running: dict[Any, tuple[tuple[Any, ...], float]] = {}
    done, total = 0, sum(len(b) for b in batches)
    try:
        while queue or running:
            capacity = max(1, sum(client.nthreads().values()))
            while queue and len(running) < capacity:
                batch = queue.pop()
                future = client.submit(_failing_as_a_value, func, batch, *args(batch), pure=False,
                                       key=f"tracedoc-{stage}-{len(batch)}-{time.time_ns()}")
                running[future] = (batch, time.monotonic())
            try:
                finished, _ = wait(list(running), timeout=_POLL_S, return_when=FIRST_COMPLETED)
            except TimeoutError:
                finished = set()
            for future in finished:
                batch, _ = running.pop(future)
                outcome = _outcome(future)
                future.release()
                if not isinstance(outcome, RankFailure):
                    results.append((batch, outcome))
                    done += len(batch)
                elif len(batch) > 1:
                    queue += [(item,) for item in batch[::-1]]
                else:
                    failures.append((batch[0], outcome))
                    done += 1
            if progress:
                progress(_progress_text(stage, done, total, running, label))
    except BaseException:
        client.cancel(list(running), force=True)
        raise
    return results, failures


def _failing_as_a_value(func: Callable[..., Any], *args: Any) -> Any:
    """``func(*args)`` on a worker, an input it cannot read (a TracedocError) given back as the RankFailure that
    says why rather than raised: Dask logs a task that raises as an error of its own ('Compute Failed'), which an
    external cluster's worker would then log for every bad rank. Its traceback is logged at the error level,
    which a local cluster shows with --debug only."""
    try:
        return func(*args)
    except TracedocError as exc:
        # in the worker's log, as Dask logs a task that raises: under its own logger, so that the local cluster's
        # silence (all but --debug) holds for it too
        logging.getLogger("distributed.tracedoc").error("a rank could not be read: %s", first_line(exc),
                                                        exc_info=True)
        return RankFailure(first_line(exc))


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


def _progress_text(stage: str, done: int, total: int, running: dict[Any, tuple[tuple[Any, ...], float]],
                   label: Callable[[tuple[Any, ...]], str]) -> str:
    """'reading ranks: 12 of 256 done, 4 running; slowest: rank7.json.gz (41 s)'."""
    text = f"{stage} ranks: {done} of {total} done"
    if running:
        batch, start = min(running.values(), key=lambda v: v[1])
        ranks = sum(len(b) for b, _ in running.values())
        text += f", {ranks} running; slowest: {label(batch)} ({time.monotonic() - start:.0f} s)"
    return text
