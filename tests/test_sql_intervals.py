"""The interval macros (analyses/intervals/: merge, gaps, intersect) on inline VALUES rows: hand-made sets that
hold the edge cases (touching, nested, empty and reversed intervals, several lanes), then random sets checked
against the same answer computed point by point in Python."""

from __future__ import annotations

import random

import pytest

from tracedoc.store import Store

Interval = tuple[str, int, int]


@pytest.fixture(scope="module")
def store() -> Store:
    s = Store.create(None)
    for module in ("intervals.merge", "intervals.gaps", "intervals.intersect"):
        s.include(module)
    yield s
    s.close()


def _table(store: Store, name: str, rows: list[Interval]) -> None:
    values = ", ".join(f"('{k}', {s}, {e})" for k, s, e in rows) or "('none', 0, 0)"
    store.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM (VALUES {values}) t(k, s, e)")


def _rows(store: Store, sql: str) -> list[Interval]:
    return [(r["k"], r["s"], r["e"]) for r in store.query(f"SELECT k, s, e FROM {sql} ORDER BY k, s, e")]


def _covered(rows: list[Interval], lane: str) -> set[int]:
    """The unit time steps [t, t+1) a lane's intervals cover."""
    return {t for k, s, e in rows if k == lane for t in range(s, e)}


def _runs(points: set[int], lane: str) -> list[Interval]:
    """Points as maximal runs of consecutive steps."""
    out: list[Interval] = []
    for t in sorted(points):
        if out and out[-1][2] == t:
            out[-1] = (lane, out[-1][1], t + 1)
        else:
            out.append((lane, t, t + 1))
    return out


def test_merge_joins_overlapping_touching_and_nested_intervals_per_lane(store: Store) -> None:
    _table(store, "a", [("x", 0, 10), ("x", 5, 8), ("x", 10, 12), ("x", 20, 25), ("x", 30, 30), ("x", 40, 35),
                        ("y", 3, 4), ("y", 1, 2)])
    assert _rows(store, "intervals_merge('a')") == [("x", 0, 12), ("x", 20, 25), ("y", 1, 2), ("y", 3, 4)]


def test_gaps_lie_between_the_union_and_never_outside_it(store: Store) -> None:
    _table(store, "a", [("x", 0, 10), ("x", 5, 8), ("x", 10, 12), ("x", 20, 25), ("y", 3, 4), ("y", 1, 2)])
    assert _rows(store, "intervals_gaps('a')") == [("x", 12, 20), ("y", 2, 3)]


def test_intersect_covers_only_lanes_and_time_of_both(store: Store) -> None:
    _table(store, "a", [("x", 0, 10), ("x", 20, 30), ("z", 0, 5)])
    _table(store, "b", [("x", 5, 25), ("x", 6, 7), ("y", 0, 100)])
    pieces = _rows(store, "intervals_intersect('a', 'b')")
    assert {k for k, _, _ in pieces} == {"x"}
    assert _runs(_covered(pieces, "x"), "x") == [("x", 5, 10), ("x", 20, 25)]


@pytest.mark.parametrize("seed", range(20))
def test_random_sets_match_a_point_by_point_answer(store: Store, seed: int) -> None:
    rng = random.Random(seed)

    def random_set() -> list[Interval]:
        return [(rng.choice("pq"), s, s + rng.randint(-2, 15)) for s in (rng.randint(0, 80) for _ in range(12))]

    a, b = random_set(), random_set()
    _table(store, "a", a)
    _table(store, "b", b)
    merged = _rows(store, "intervals_merge('a')")
    gaps = _rows(store, "intervals_gaps('a')")
    pieces = _rows(store, "intervals_intersect('a', 'b')")
    for lane in "pq":
        want = _covered(a, lane)
        assert [r for r in merged if r[0] == lane] == _runs(want, lane)
        inside = set(range(min(want), max(want) + 1)) - want if want else set()
        assert [r for r in gaps if r[0] == lane] == _runs(inside, lane)
        assert _runs(_covered(pieces, lane), lane) == _runs(want & _covered(b, lane), lane)
