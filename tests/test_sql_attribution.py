"""The time attribution (analyses/attribution/time.sql, with sets.sql) on inline VALUES rows of what it reads:
hand-made GPU work, idle gaps, host ranges, a blocking sync and a wait inside a collective, each cause checked where
it lands, and random inputs whose slices still sum to each device's window.

The objects other modules make (gpu_work, gpu_idle_gaps, ranks_collectives, …) are given as tables with the
columns those modules give them (read from a store where they were made over no events), so that time.sql runs
on these rows alone.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tracedoc.limits import Limits
from tracedoc.scale.summary_store import SummaryStore, summary_connection
from tracedoc.store import Store

# What time.sql reads that other modules make, given here instead.
INPUTS = ("trace_windows", "trace_steps", "trace_steady_steps", "gpu_work", "gpu_busy_intervals", "gpu_idle_gaps",
          "host_sync_idle", "ranks_collectives", "trace_step_work")
OUTSIDE = ("startup", "warmup", "prologue", "teardown")
Rows = dict[str, list[dict[str, Any]]]


@functools.cache
def _columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """Each input's columns and types, as its own module makes it."""
    store = Store.create(None)
    try:
        store.include("attribution.time")
        return {name: tuple(store.con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {name})").fetchall())
                for name in INPUTS}
    finally:
        store.close()


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _insert(store: Store, table: str, rows: list[dict[str, Any]]) -> None:
    """The rows as one INSERT … VALUES per set of columns named (the others are NULL)."""
    by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        by_columns.setdefault(tuple(row), []).append(row)
    for names, same in by_columns.items():
        values = ", ".join("(" + ", ".join(_literal(row[n]) for n in names) + ")" for row in same)
        store.con.execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES {values}")


@pytest.fixture
def attributed() -> Iterator[Any]:
    """A function: the rows given (inputs by name, and cpu_activity) → a store with attribution.time run on them."""
    stores: list[Store] = []

    def run(rows: Rows) -> Store:
        store = SummaryStore(summary_connection(Limits()), provided=set(INPUTS))
        stores.append(store)
        for name, columns in _columns().items():
            store.con.execute(f"CREATE TEMP TABLE {name} ({', '.join(f'{c} {t}' for c, t in columns)})")
        for name, table_rows in rows.items():
            _insert(store, name, table_rows)
        store.include("attribution.time")
        return store

    yield run
    for store in stores:
        store.close()


def _lane(source: int, win: tuple[int, int], capture: tuple[int, int], first_step: int | None) -> Rows:
    return {"trace_windows": [{"source_id": source, "rank": source, "start_ns": win[0], "end_ns": win[1],
                               "kind": "steps" if first_step is not None else "whole_trace",
                               "capture_start_ns": capture[0], "capture_end_ns": capture[1],
                               "first_step_ns": first_step}]}


def _work(source: int, kind: str, category: str, s: int, e: int, step: int | None = None) -> Rows:
    row = {"source_id": source, "rank": source, "device": 0, "kind": kind, "category": category, "ts_ns": s,
           "end_ns": e, "dur_ns": e - s}
    launched = [{**row, "step": step}] if step is not None else []
    return {"gpu_work": [row], "trace_step_work": launched}


def _gap(source: int, s: int, e: int, cause: str, long_gap: bool, launched: bool = True) -> Rows:
    return {"gpu_idle_gaps": [{"source_id": source, "rank": source, "device": 0, "ts_ns": s, "end_ns": e,
                               "dur_ns": e - s, "launch_ts_ns": s if launched else None, "cause": cause,
                               "long_gap": long_gap}]}


def _host(source: int, kind: str, name: str, s: int, e: int) -> Rows:
    return {"cpu_activity": [{"source_id": source, "rank": source, "tid": 1, "kind": kind, "name": name,
                              "ts_ns": s, "dur_ns": e - s}]}


def _busy(source: int, spans: Sequence[tuple[int, int]]) -> Rows:
    return {"gpu_busy_intervals": [{"source_id": source, "rank": source, "device": 0, "ts_ns": s, "end_ns": e}
                                   for s, e in spans]}


def _merge(*parts: Rows) -> Rows:
    out: Rows = {}
    for part in parts:
        for name, rows in part.items():
            out.setdefault(name, []).extend(rows)
    return out


def _slices(store: Store, source: int) -> dict[tuple[Any, ...], int]:
    return {(r["step"], r["cause"], r["detail"]): r["ns"] for r in store.query(
        f"SELECT step, cause, detail, ns FROM attribution_slices WHERE source_id = {source}")}


def _sums(store: Store) -> list[tuple[int, ...]]:
    """Per source and device: the window's causes, the window, what lies outside it and the recorded time around
    the window."""
    return [tuple(r.values()) for r in store.query("""
        SELECT s.source_id, s.device,
               sum(s.ns) FILTER (WHERE s.cause NOT IN ('startup', 'warmup', 'prologue', 'teardown'))::BIGINT,
               any_value(w.end_ns - w.start_ns),
               coalesce(sum(s.ns) FILTER (WHERE s.cause IN ('startup', 'warmup', 'prologue', 'teardown')), 0)::BIGINT,
               any_value((w.capture_end_ns - w.capture_start_ns) - (w.end_ns - w.start_ns))
        FROM attribution_slices s JOIN trace_windows w USING (source_id)
        GROUP BY ALL ORDER BY ALL""")]


# Rank 0 records 0–12,000 ns; its window, two steps, is 1,000–11,000. Rank 1 is the rank it waits for in the
# collective (4,000–6,000).
TWO_RANKS: Rows = _merge(
    _lane(0, (1000, 11000), (0, 12000), 1000), _lane(1, (1000, 11000), (1000, 11000), 1000),
    {"trace_steps": [{"source_id": 0, "rank": 0, "step": 1, "ts_ns": 1000, "dur_ns": 5000, "warmup": False},
                     {"source_id": 0, "rank": 0, "step": 2, "ts_ns": 6000, "dur_ns": 5000, "warmup": False}]},
    {"trace_steady_steps": [{"source_id": 0, "rank": 0, "step": 1, "ts_ns": 1000, "dur_ns": 5000},
                            {"source_id": 0, "rank": 0, "step": 2, "ts_ns": 6000, "dur_ns": 5000}]},
    _work(0, "kernel", "compute", 1000, 2000, step=1), _work(0, "kernel", "compute", 2500, 3000, step=1),
    _work(0, "memcpy", "memcpy", 3000, 3500, step=1), _work(0, "kernel", "communication", 4000, 6000, step=1),
    _work(0, "kernel", "compute", 7000, 7500, step=2), _work(0, "kernel", "compute", 9000, 10000, step=2),
    _busy(0, [(1000, 2000), (2500, 3500), (4000, 6000), (7000, 7500), (9000, 10000)]),
    _gap(0, 2000, 2500, "launch", False), _gap(0, 3500, 4000, "kernel_wait", False),
    _gap(0, 6000, 7000, "host_wait", True), _gap(0, 7500, 9000, "other", False),
    _gap(0, 10000, 11000, "host_wait", True, launched=False),
    {"host_sync_idle": [{"source_id": 0, "rank": 0, "device": 0, "ts_ns": 6000, "end_ns": 7000, "dur_ns": 1000,
                         "cost_ns": 300}]},
    _host(0, "annotation", "checkpoint", 6300, 6600), _host(0, "op", "aten::copy_", 6600, 6800),
    _host(0, "op", "c10d::allreduce_", 10000, 10400),
    _host(0, "op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 10400, 10800),
    _host(0, "python", "train.py(12): main", 10800, 11000),
    _host(0, "runtime", "ncclCommInitRank", 100, 400),
    {"ranks_collectives": [
        {"source_id": 0, "rank": 0, "device": 0, "channel": "pg0", "instance": 1, "ts_ns": 4000, "end_ns": 6000,
         "wait_ns": 1200, "is_last": False},
        {"source_id": 1, "rank": 1, "device": 0, "channel": "pg0", "instance": 1, "ts_ns": 5200, "end_ns": 6000,
         "wait_ns": 0, "is_last": True}]},
    _work(1, "kernel", "communication", 5200, 6000), _busy(1, [(5200, 6000)]),
)


def test_each_cause_lands_where_it_should(attributed: Any) -> None:
    """Rank 0, piece by piece: kernels and a copy, a launch gap and a queued one, the wait for rank 1 inside the
    collective and the transfer after it; a long host gap charged first to the blocking sync, then to the
    annotation, the operator and what nothing covers; a wait on another stream; the idle tail to the collective
    call, the data loader and the user's Python frame; start-up named after NCCL's initialisation."""
    store = attributed(TWO_RANKS)
    assert _slices(store, 0) == {
        (1, "gpu_compute", "kernels"): 1000 + 500,
        (1, "gpu_compute", "copies"): 500,
        (1, "launch_overhead", "short launch gaps"): 500,
        (1, "launch_overhead", "queued work"): 500,
        (1, "wait_for_peer", "rank 1"): 1200,
        (1, "comm_transfer", "collectives"): 800,
        (2, "host_sync", "blocking syncs"): 300,
        (2, "phase", "checkpoint"): 300,
        (2, "host_work", "aten::copy_"): 200,
        (2, "uninstrumented_host", "no profiled host range"): 200,
        (2, "gpu_compute", "kernels"): 500 + 1000,
        (2, "dependency_wait", "another stream, an event or a peer"): 1500,
        (2, "wait_for_peer", "c10d::allreduce_"): 400,
        (2, "data_loading", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"): 400,
        (2, "host_work", "train.py(12): main"): 200,
        (None, "startup", "before the first step"): 700,
        (None, "startup", "NCCL initialisation"): 300,
        (None, "teardown", "after the last step"): 1000,
    }
    states = store.query("SELECT source_id, computing_ns, communicating_ns, waiting_ns, idle_ns, waited_for "
                         "FROM attribution_gpu_states ORDER BY source_id")
    assert [tuple(r.values()) for r in states] == [(0, 3500, 800, 1200, 4500, 1), (1, None, 800, None, 9200, None)]


def test_the_slices_sum_to_each_window_and_to_what_lies_around_it(attributed: Any) -> None:
    store = attributed(TWO_RANKS)
    assert _sums(store) == [(0, 0, 10000, 10000, 2000, 2000), (1, 0, 10000, 10000, 0, 0)]
    assert _slices(store, 1) == {(None, "launch_overhead", "short launch gaps"): 9200,
                                 (None, "comm_transfer", "collectives"): 800}


def test_the_first_cause_that_holds_wins(attributed: Any) -> None:
    """A kernel beside communication is compute, whatever the wait; a host gap under an operator inside an
    annotation is the annotation's (named after the innermost one), and a collective call outranks the loader."""
    rows = _merge(
        _lane(0, (0, 1000), (0, 1000), None),
        _work(0, "kernel", "communication", 0, 400), _work(0, "kernel", "compute", 100, 200), _busy(0, [(0, 400)]),
        {"ranks_collectives": [{"source_id": 0, "rank": 0, "device": 0, "channel": "pg0", "instance": 1,
                                "ts_ns": 0, "end_ns": 400, "wait_ns": 300, "is_last": False},
                               {"source_id": 1, "rank": 1, "device": 0, "channel": "pg0", "instance": 1,
                                "ts_ns": 300, "end_ns": 400, "wait_ns": 0, "is_last": True}]},
        _gap(0, 400, 1000, "host_wait", True, launched=False),
        _host(0, "annotation", "outer", 400, 800), _host(0, "annotation", "inner", 500, 600),
        _host(0, "op", "aten::mm", 450, 750),
        _host(0, "op", "nccl:all_reduce", 800, 1000), _host(0, "op", "load_batch", 800, 1000),
    )
    assert _slices(attributed(rows), 0) == {
        (None, "wait_for_peer", "rank 1"): 200,  # 0–100 and 200–300
        (None, "gpu_compute", "kernels"): 100,
        (None, "comm_transfer", "collectives"): 100,
        (None, "phase", "outer"): 300,
        (None, "phase", "inner"): 100,
        (None, "wait_for_peer", "nccl:all_reduce"): 200,
    }


def test_host_ranges_cut_only_where_they_decide_a_cause(attributed: Any) -> None:
    """A host range's class decides a cause or names it only inside a long host-wait gap: an operator under a kernel
    or inside a short launch gap leaves the segments there whole, and one that reaches into a host gap is kept whole
    (its start cuts the kernel it starts under). The slices are what every range cutting would give."""
    rows = _merge(
        _lane(0, (0, 1000), (0, 1000), None),
        _work(0, "kernel", "compute", 0, 300), _work(0, "kernel", "compute", 350, 600),
        _busy(0, [(0, 300), (350, 600)]),
        _gap(0, 300, 350, "launch", False), _gap(0, 600, 1000, "host_wait", True, launched=False),
        _host(0, "op", "aten::mm", 100, 200),  # under a kernel
        _host(0, "op", "aten::add", 310, 340),  # inside the short launch gap
        _host(0, "op", "aten::copy_", 500, 700),  # from under a kernel into the host gap
    )
    store = attributed(rows)
    segments = store.query("SELECT s, e FROM attribution_segment_masks ORDER BY s")
    assert [(r["s"], r["e"]) for r in segments] == [(0, 300), (300, 350), (350, 500), (500, 600), (600, 700),
                                                    (700, 1000)]
    assert _slices(store, 0) == {
        (None, "gpu_compute", "kernels"): 550,
        (None, "launch_overhead", "short launch gaps"): 50,
        (None, "host_work", "aten::copy_"): 100,
        (None, "uninstrumented_host", "no profiled host range"): 300,
    }


def test_a_short_range_inside_a_long_gap_names_it_and_one_after_the_gap_does_not_cut(attributed: Any) -> None:
    """On a long gap, cut in thousands of buckets: an operator of 50 ns inside it names its time, and one that starts
    just after the gap ended, under the next kernel, leaves that kernel's segment whole."""
    rows = _merge(
        _lane(0, (0, 10_000_000), (0, 10_000_000), None),
        _work(0, "kernel", "compute", 0, 1_000_000), _work(0, "kernel", "compute", 5_000_000, 10_000_000),
        _busy(0, [(0, 1_000_000), (5_000_000, 10_000_000)]),
        _gap(0, 1_000_000, 5_000_000, "host_wait", True),
        _host(0, "op", "aten::item", 2_000_000, 2_000_050), _host(0, "op", "aten::mm", 5_000_100, 5_000_200),
    )
    store = attributed(rows)
    segments = store.query("SELECT s, e FROM attribution_segment_masks ORDER BY s")
    assert [(r["s"], r["e"]) for r in segments] == [(0, 1_000_000), (1_000_000, 2_000_000), (2_000_000, 2_000_050),
                                                    (2_000_050, 5_000_000), (5_000_000, 10_000_000)]
    assert _slices(store, 0) == {
        (None, "gpu_compute", "kernels"): 6_000_000,
        (None, "host_work", "aten::item"): 50,
        (None, "uninstrumented_host", "no profiled host range"): 3_999_950,
    }


def _wait(source: int, instance: int, s: int, wait_ns: int, last: bool) -> Rows:
    return {"ranks_collectives": [{"source_id": source, "rank": source, "device": 0, "channel": "pg0",
                                   "instance": instance, "ts_ns": s, "end_ns": s + wait_ns, "wait_ns": wait_ns,
                                   "is_last": last}]}


def test_the_rank_waited_for_is_the_one_waited_for_longest_in_all(attributed: Any) -> None:
    """Rank 0 waits for rank 1 twice (150 ns each) and for rank 2 once (200 ns): rank 1, whose waits sum to more,
    is the one it waited for, however the waits' segments are cut."""
    rows = _merge(
        _lane(0, (0, 1000), (0, 1000), None),
        _work(0, "kernel", "communication", 0, 1000), _busy(0, [(0, 1000)]),
        _wait(0, 1, 0, 150, False), _wait(1, 1, 150, 0, True),
        _wait(0, 2, 200, 150, False), _wait(1, 2, 350, 0, True),
        _wait(0, 3, 400, 200, False), _wait(2, 3, 600, 0, True),
    )
    store = attributed(rows)
    states = store.query("SELECT waiting_ns, waited_for FROM attribution_gpu_states WHERE source_id = 0")
    assert [tuple(r.values()) for r in states] == [(500, 1)]
    assert _slices(store, 0) == {(None, "wait_for_peer", "rank 1"): 300, (None, "wait_for_peer", "rank 2"): 200,
                                 (None, "comm_transfer", "collectives"): 500}


@pytest.mark.parametrize("seed", range(8))
def test_random_inputs_still_sum_to_the_window(attributed: Any, seed: int) -> None:
    """Whatever the GPU work, gaps, syncs and host ranges (overlapping, out of the window, inconsistent with one
    another), every ns of each window is attributed once and the time around it once."""
    rng = random.Random(seed)
    parts: list[Rows] = []
    for source in (0, 1):
        start, end = rng.randint(100, 300), rng.randint(700, 900)
        parts.append(_lane(source, (start, end), (rng.randint(0, start), rng.randint(end, 1000)),
                           start if rng.random() < 0.5 else None))
        for _ in range(8):
            s = rng.randint(0, 950)
            e = s + rng.randint(1, 120)
            pick = rng.randrange(6)
            if pick == 0:
                parts.append(_work(source, "kernel", rng.choice(["compute", "communication"]), s, e))
            elif pick == 1:
                parts.append(_busy(source, [(s, e)]))
            elif pick == 2:
                parts.append(_gap(source, s, e, rng.choice(["host_wait", "kernel_wait", "other", "launch"]),
                                  rng.random() < 0.5, launched=rng.random() < 0.7))
            elif pick == 3:
                parts.append({"host_sync_idle": [{"source_id": source, "rank": source, "device": 0, "ts_ns": s,
                                                  "end_ns": e, "dur_ns": e - s, "cost_ns": rng.randint(0, e - s)}]})
            else:
                parts.append(_host(source, rng.choice(["op", "annotation", "python"]),
                                   rng.choice(["aten::mm", "data", "c10d::broadcast", "step", "x.py(1): f"]), s, e))
        parts.append(_busy(source, [(start, start + 1)]))  # a GPU lane in every window
    store = attributed(_merge(*parts))
    sums = _sums(store)
    assert len(sums) == 2
    for _, _, inside, window, outside, around in sums:
        assert inside == window and outside == around
