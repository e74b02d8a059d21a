"""Stragglers and expert imbalance across ranks, checked against independent readings of the raw traces."""

from __future__ import annotations

import gzip
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.api import open_store
from tracedoc.ingest import discover
from tracedoc.render.ranks import MAX_RANKS
from tracedoc.render.text import TextRenderer
from tracedoc.report import Report

PLANTED_MATMULS = 32  # workloads/ddp_step/run.py --straggler-matmuls, the straggler's extra kernels per step
EXTRA_WORK_MS = 6.82  # what the straggler's extra products take alone (samples/ddp-straggler/SOURCE.md)
BALANCING_SAVES_MS = 24.93 - 14.47  # 4-rank MoE step, hot expert vs balanced router (moe-hot-expert-4rank/SOURCE.md)


def events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def ns(us: float) -> int:
    return int(round(us * 1000))


def comm_kernels(path: Path) -> list[tuple[int, int]]:
    """(start, end) in ns of the NCCL kernels, in order."""
    return sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events(path)
                  if e.get("cat") == "kernel" and "nccl" in e["name"].lower())


def brute_force_match(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> tuple[int, int]:
    """The shift s pairing a[k] with b[k + s] whose end differences spread least, and the clock offset (median)."""
    best = None
    for s in range(-len(b) + 1, len(a)):
        diffs = [b[k + s][1] - a[k][1] for k in range(len(a)) if 0 <= k + s < len(b)]
        if len(diffs) < min(len(a), len(b)) // 2:
            continue
        mid = statistics.median(diffs)
        spread = statistics.median(abs(d - mid) for d in diffs)
        if best is None or spread < best[0]:
            best = (spread, s, int(mid))
    assert best is not None
    return best[1], best[2]


def raw_waits(sample: str) -> tuple[dict[int, int], dict[int, float]]:
    """Each rank's shift against rank 0 and its total wait inside the collectives (ms), from the raw JSON."""
    kernels = [comm_kernels(p) for p in sorted((SAMPLES / sample).glob("rank*.trace.json.gz"))]
    matches = {r: brute_force_match(kernels[0], kernels[r]) for r in range(1, len(kernels))}
    shifts = {0: 0, **{r: shift for r, (shift, _) in matches.items()}}
    offsets = {0: 0, **{r: offset for r, (_, offset) in matches.items()}}
    waits = dict.fromkeys(shifts, 0.0)
    for k in range(len(kernels[0])):
        at = {r: k + shifts[r] for r in shifts}
        if not all(0 <= at[r] < len(kernels[r]) for r in at):
            continue
        starts = {r: kernels[r][at[r]][0] - offsets[r] for r in at}
        last = max(starts.values())
        for r in at:
            start, end = kernels[r][at[r]]
            waits[r] += min(last - starts[r], end - start) / 1e6
    return shifts, waits


def store_for(sample: str, tmp_path: Path):
    store, _ = open_store(discover([SAMPLES / sample]), tmp_path / "cache")
    return store


@pytest.mark.parametrize("sample", ["ddp-no-overlap", "ddp-straggler", "moe-hot-expert", "moe-hot-expert-4rank"])
def test_collectives_line_up_as_a_brute_force_search_does(sample: str, tmp_path: Path) -> None:
    """The ranks' collectives are matched with the right shift, and each rank's wait inside them agrees."""
    shifts, waits = raw_waits(sample)
    with store_for(sample, tmp_path) as store:
        store.include("ranks.collectives")
        align = {r["rank"]: r for r in store.query("SELECT * FROM ranks_alignment_quality")}
        got = {r["rank"]: r["wait_ms"] for r in store.query(
            "SELECT rank, sum(wait_ns) / 1e6 AS wait_ms FROM ranks_collectives GROUP BY rank")}
    assert sorted(got) == sorted(shifts)
    for rank in shifts:
        if rank:
            assert -align[rank]["shift"] == shifts[rank]
            assert align[rank]["keys"] == align[rank]["keys_agreeing"] > 0
            assert align[rank]["name_mismatches"] == 0
        assert got[rank] == pytest.approx(waits[rank], abs=0.05)


def test_the_window_offset_is_found(tmp_path: Path) -> None:
    """ddp-no-overlap: rank 0's window holds 21 collectives that rank 1's does not (still queued from before)."""
    with store_for("ddp-no-overlap", tmp_path) as store:
        store.include("ranks.collectives")
        assert store.scalar("SELECT shift FROM ranks_alignment WHERE rank = 1") == 21


def launched_per_step(path: Path) -> dict[int, tuple[float, int]]:
    """Per ProfilerStep: (ms of compute kernels launched in it, their count), the slow obvious way."""
    evs = events(path)
    steps = {int(e["name"].split("#")[1]): (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in evs
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in evs
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out: dict[int, tuple[float, int]] = defaultdict(lambda: (0.0, 0))
    for e in evs:
        if e.get("cat") != "kernel" or "nccl" in e["name"].lower():
            continue
        t = launch.get(e["args"].get("correlation"))
        for step, (a, b) in steps.items():
            if t is not None and a <= t < b:
                ms, n = out[step]
                out[step] = (ms + ns(e["dur"]) / 1e6, n + 1)
    return dict(out)


def test_rank_steps_match_the_raw_trace() -> None:
    """The heatmap's compute time and kernel count per rank and step, against the raw JSON."""
    rows = analyze([SAMPLES / "ddp-straggler"]).metrics["rank_steps"]
    assert {(r["rank"], r["step"]) for r in rows} == {(r, s) for r in (0, 1) for s in (3, 4, 5)}
    for rank in (0, 1):
        raw = launched_per_step(SAMPLES / "ddp-straggler" / f"rank{rank}.trace.json.gz")
        for r in (r for r in rows if r["rank"] == rank):
            assert r["compute_ms"] == pytest.approx(raw[r["step"]][0], abs=0.002)
            assert r["kernels"] == raw[r["step"]][1]
    late = {r["rank"]: sum(x["arrival_lateness_ms"] for x in rows if x["rank"] == r["rank"]) for r in rows}
    assert late[1] > 50 and late[0] < 0.1  # rank 1 comes last; rank 0 never does by more than noise


def test_straggler_is_found_with_its_planted_cause() -> None:
    report = analyze([SAMPLES / "ddp-straggler"])
    found = [f for f in report.findings if f.rule == "straggler-rank"]
    assert [f.scope.rank for f in found] == [1]
    f = found[0]
    evidence = {e.name: e.value for e in f.evidence}
    assert evidence["compute kernels per step"] - evidence["peers' compute kernels per step"] == PLANTED_MATMULS
    assert "more GPU work" in f.message
    per_step = f.impact_ms / 3
    assert 0.5 * EXTRA_WORK_MS < per_step < 1.1 * EXTRA_WORK_MS  # the saving is the extra work, not more
    # Balancing takes the straggler's extra compute off the job's critical path: at least what the others wait.
    excess = evidence["compute per step"] - evidence["peers' compute per step"]
    assert per_step == pytest.approx(excess, abs=0.01)
    others_wait = sum(r["others_wait_ms"] for r in report.metrics["rank_steps"] if r["rank"] == 1)
    assert f.impact_ms >= others_wait


def test_straggler_cause_names_the_input_shapes_that_differ(tmp_path: Path) -> None:
    """A DDP step whose rank 1 gets twice the batch, recorded with record_shapes=True (tests/data): the cuBLAS kernel
    that makes the difference runs as often and on as many thread blocks on both ranks, so only the shapes of the
    operator behind it say why it takes longer."""
    report = analyze([ROOT / "tests" / "data" / "ddp-larger-batch-shapes"], cache_dir=tmp_path)
    (found,) = [f for f in report.findings if f.rule == "straggler-rank"]
    assert found.scope.rank == 1 and "Likely cause: larger inputs" in found.message
    assert ("its operator aten::mm takes inputs of shape [[9216,16384],[16384,3072]] here, [[9216,8192],[8192,3072]] "
            "on its peers") in " ".join(found.message.split())


def test_a_hidden_wait_costs_nothing() -> None:
    """ddp-overlap: rank 0 waits ~8 ms in all-reduces, but behind its own backward; only the exposed part counts."""
    rows = analyze([SAMPLES / "ddp-overlap"]).metrics["rank_steps"]
    wait = sum(r["comm_wait_ms"] for r in rows if r["rank"] == 0)
    exposed = sum(r["exposed_wait_ms"] for r in rows if r["rank"] == 0)
    assert wait > 5
    assert exposed < 0.15 * wait


def shifted_copy(src: Path, dst: Path, by_us: float) -> None:
    """The trace with every timestamp moved by ``by_us``: the same run as recorded on another host's clock."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if isinstance(e.get("ts"), int | float):
            e["ts"] += by_us
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_ranks_on_different_clocks_line_up(tmp_path: Path) -> None:
    """Rank 1 recorded one hour ahead: its collectives still line up by their ends, and the verdict holds."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank0.trace.json.gz").write_bytes((SAMPLES / "ddp-straggler" / "rank0.trace.json.gz").read_bytes())
    shifted_copy(SAMPLES / "ddp-straggler" / "rank1.trace.json.gz", ranks / "rank1.trace.json.gz", 3600e6)
    before = [f for f in analyze([SAMPLES / "ddp-straggler"]).findings if f.rule == "straggler-rank"]
    after = [f for f in analyze([ranks]).findings if f.rule == "straggler-rank"]
    assert [f.scope.rank for f in after] == [1]
    assert after[0].impact_ms == pytest.approx(before[0].impact_ms, abs=0.01)


def param_comms(path: Path) -> list[dict]:
    return [e["args"] for e in sorted(events(path), key=lambda e: e.get("ts", 0))
            if e.get("name") == "record_param_comms"]


def test_collective_calls_keep_their_sizes(tmp_path: Path) -> None:
    raw = {r: param_comms(SAMPLES / "moe-hot-expert" / f"rank{r}.trace.json.gz") for r in (0, 1)}
    with store_for("moe-hot-expert", tmp_path) as store:
        for rank, calls in raw.items():
            got = store.query("SELECT collective, pg_name, in_nelems, out_nelems, in_splits, out_splits "
                              "FROM collective_calls WHERE rank = ? ORDER BY ts_ns", [rank])
            assert [(c["collective"], c["pg_name"], c["in_nelems"], c["out_nelems"], c["in_splits"],
                     c["out_splits"]) for c in got] == \
                [(a["Collective name"], a["Process Group Name"], a["In msg nelems"], a["Out msg nelems"],
                  a["In split size"], a["Out split size"]) for a in calls]


def hot_ratio_from_raw(sample: str) -> dict[int, float]:
    """Per rank: median received/mean over the all-to-alls in which it received the most (≥ 1.1x the mean)."""
    raw = [param_comms(path) for path in sorted((SAMPLES / sample).glob("rank*.trace.json.gz"))]
    assert len({len(calls) for calls in raw}) == 1  # every window opens at the same host step
    ratios: dict[int, list[float]] = defaultdict(list)
    for calls in zip(*raw):
        recv = [c["Out msg nelems"] for c in calls]
        mean = sum(recv) / len(recv)
        hot = max(range(len(recv)), key=lambda r: recv[r])
        if recv[hot] / mean >= 1.1:
            ratios[hot].append(recv[hot] / mean)
    return {r: statistics.median(v) for r, v in ratios.items()}


def test_expert_imbalance_names_the_hot_rank() -> None:
    raw = hot_ratio_from_raw("moe-hot-expert")
    assert list(raw) == [1]
    assert raw[1] == pytest.approx(24340 / 16384, abs=0.02)  # the workload's own count (SOURCE.md)
    report = analyze([SAMPLES / "moe-hot-expert"])
    found = [f for f in report.findings if f.rule == "expert-imbalance"]
    assert [f.scope.rank for f in found] == [1]
    evidence = {e.name: e.value for e in found[0].evidence}
    assert evidence["received against the mean rank"] == pytest.approx(raw[1], abs=0.001)
    # an even split would save part of the wait, never more than all of it
    cost = sum(r["others_wait_ms"] for r in report.metrics["rank_steps"] if r["rank"] == 1)
    assert 0 < found[0].impact_ms <= cost + 1e-6


def test_expert_imbalance_on_four_ranks_names_rank_2() -> None:
    """Four ranks, rank 2's expert hot: tracedoc's estimate of what an even split saves matches the balanced run."""
    raw = hot_ratio_from_raw("moe-hot-expert-4rank")
    assert list(raw) == [2]
    assert raw[2] == pytest.approx(46509 / 16384, abs=0.03)  # the workload's own count (SOURCE.md)
    report = analyze([SAMPLES / "moe-hot-expert-4rank"])
    [found] = [f for f in report.findings if f.rule == "expert-imbalance"]
    assert found.scope.rank == 2
    assert not [f for f in report.findings if f.rule == "straggler-rank"]
    evidence = {e.name: e.value for e in found.evidence}
    assert evidence["received against the mean rank"] == pytest.approx(raw[2], abs=0.001)
    assert evidence["skewed all-to-alls it received the most in"] == evidence["skewed all-to-alls"] == 12
    # per step, about what the balanced router measured without the profiler: 24.93 - 14.47 ms (SOURCE.md)
    assert 0.8 * BALANCING_SAVES_MS < found.impact_ms / 3 < 1.2 * BALANCING_SAVES_MS
    rank2 = [r for r in report.metrics["rank_steps"] if r["rank"] == 2]
    others = [r for r in report.metrics["rank_steps"] if r["rank"] != 2]
    assert min(r["compute_ms"] for r in rank2) > 4 * max(r["compute_ms"] for r in others)


def test_balanced_experts_are_not_skewed() -> None:
    assert hot_ratio_from_raw("moe-balanced") == {}


def test_text_report_shows_the_rank_table() -> None:
    text = TextRenderer(width=110).render(analyze([SAMPLES / "ddp-straggler"]))
    table = text[text.index("Ranks × steps"):]
    rank1 = next(line for line in table.splitlines() if line.strip().startswith("1 "))
    assert [float(x) for x in rank1.split()[-3:]] == pytest.approx([20.94, 20.23, 18.86], abs=0.01)
    assert "Ranks × steps" not in TextRenderer().render(analyze([SAMPLES / "decode-eager"]))


def test_text_report_summarises_many_ranks() -> None:
    """With more ranks than fit, the latest ones are listed and the rest counted (real rows, ranks relabelled)."""
    report = analyze([SAMPLES / "ddp-straggler"])
    rows = report.metrics["rank_steps"]
    many = [{**r, "rank": r["rank"] + 2 * i} for i in range(6) for r in rows]  # ranks 0..11, odd ones late
    text = TextRenderer(width=110).render(Report(inputs=report.inputs, summary=report.summary, findings=[],
                                                 metrics={"rank_steps": many}))
    listed = [int(line.split()[0]) for line in text[text.index("Ranks × steps"):].splitlines()
              if line.strip()[:1].isdigit()]
    assert len(listed) == MAX_RANKS and {1, 3, 5, 7, 9, 11} <= set(listed)
    assert "4 more ranks" in text
