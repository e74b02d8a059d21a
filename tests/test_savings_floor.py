"""Savings leave the GPU floor (efficiency.floor): on every sample the savings of one rank's findings add up to at
most its window less the GPU work no fix removes, a finding the floor cuts says so, and where a sample has a fixed
twin the eager decode's predicted gain stays near the gain that twin measured without the profiler."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, sample_dirs
from tracedoc.api import analyze, open_store
from tracedoc.ingest import discover
from tracedoc.judge.savings import FLOOR
from tracedoc.limits import Limits
from tracedoc.report import Report

SAMPLES = ROOT / "samples"
# The twins' truths are step times without the profiler; the savings are shares of the profiled step, whose
# host-paced idle the profiler lengthens (efficiency.observer) and the fix removes with it, so the profiled share a
# fix removes runs a few points above the unprofiled gain (decode-eager-shapes: 92.2 % against 84.6 %).
MARGIN_PTS = 10.0
EAGER_TWINS = [("decode-eager", "decode-cudagraph"), ("decode-eager-shapes", "decode-cudagraph-shapes")]


def windows_and_floors(path: Path) -> dict[int, tuple[float, float]]:
    """Per rank: its window's time and its GPU floor, ms (attribution.time, efficiency.floor)."""
    store, _ = open_store(discover([path]), None, limits=Limits.from_env())
    with store:
        store.include("efficiency.floor")
        rows = store.query(
            "SELECT w.rank, w.ms, coalesce(f.ms, 0) AS floor_ms FROM "
            "(SELECT rank, sum(ns) / 1e6 AS ms FROM attribution_by_cause GROUP BY rank) w "
            "LEFT JOIN (SELECT rank, sum(floor_ns) / 1e6 AS ms FROM efficiency_floor GROUP BY rank) f USING (rank)")
    return {r["rank"]: (r["ms"], r["floor_ms"]) for r in rows}


def claimed_by_rank(report: Report) -> dict[int, float]:
    """Per rank: the summed savings of the findings drawn from the attribution, ms."""
    out: dict[int, float] = {}
    for f in report.findings:
        if f.drawn_from and f.scope.rank is not None:
            out[f.scope.rank] = out.get(f.scope.rank, 0.0) + f.impact_ms
    return out


def unprofiled_ms(sample: str) -> float:
    truth = yaml.safe_load((SAMPLES / sample / "expected.yaml").read_text())["truth"]["step_ms_unprofiled"]
    return float(truth["median"] if isinstance(truth, dict) else truth)


@pytest.mark.parametrize("sample", sample_dirs(), ids=lambda p: p.name)
def test_savings_leave_the_gpu_floor(sample: Path) -> None:
    """Per rank, the findings' savings never reach past its window less its GPU floor."""
    claimed = claimed_by_rank(analyze([sample], use_cache=False))
    if not claimed:
        pytest.skip("no finding draws its saving from the attribution")
    limits = windows_and_floors(sample)
    for rank, ms in claimed.items():
        window_ms, floor_ms = limits[rank]
        assert ms <= window_ms - floor_ms + 1e-2, (rank, ms, window_ms, floor_ms)


def test_eager_decode_keeps_its_kernels_at_the_roofline() -> None:
    """decode-eager-shapes: its operators are modelled, so its floor is their roofline time (a share of its kernel
    time, above zero); the eager decode without shapes keeps all its kernel time, there being no peer to match."""
    floor = windows_and_floors(SAMPLES / "decode-eager-shapes")[0][1]
    assert floor > 0.0
    store, _ = open_store(discover([SAMPLES / "decode-eager"]), None, limits=Limits.from_env())
    with store:
        store.include("efficiency.floor")
        row = store.query("SELECT basis, floor_ns, kernels_ns FROM efficiency_floor")[0]
    assert row["basis"] == "peers" and row["floor_ns"] == row["kernels_ns"] > 0


def test_a_saving_the_floor_cuts_says_so(tmp_path: Path) -> None:
    """An edited copy of rules/low-mbu.yaml that claims its ranks' whole step from the kernels: on launch-loop it
    gets the kernel time less the floor, not its estimate, and its evidence names the floor it left."""
    rule = yaml.safe_load((ROOT / "rules" / "low-mbu.yaml").read_text())
    rule.update(id="whole-step-kernels", impact_ms="steps * step_ns / 1e6")
    (tmp_path / "whole-step-kernels.yaml").write_text(yaml.safe_dump(rule))
    report = analyze([SAMPLES / "launch-loop"], rules_dirs=[tmp_path], use_cache=False)
    whole = next(f for f in report.findings if f.rule == "whole-step-kernels")
    floor_ms = windows_and_floors(SAMPLES / "launch-loop")[0][1]
    kept = next(e.value for e in whole.evidence if e.name == FLOOR)
    assert kept == pytest.approx(floor_ms, abs=1e-3) and floor_ms > 0
    kernels_ms = sum(a["ms"] for a in report.attribution if a["cause"] == "gpu_compute" and a["detail"] == "kernels")
    assert whole.impact_ms == pytest.approx(kernels_ms - floor_ms, abs=1e-2)
    low_mbu = next(f for f in report.findings if f.rule == "low-mbu")  # the time went to the bigger claim
    assert low_mbu.impact_ms == 0.0 and low_mbu.part_of is not None


@pytest.mark.parametrize("eager, twin", EAGER_TWINS)
def test_eager_decode_gain_stays_near_its_cuda_graph_twin(eager: str, twin: str) -> None:
    """The eager decode's summed savings and launch-bound's what-if stay within MARGIN_PTS of the gain its
    CUDA-graph twin measured without the profiler, and the projected step keeps the GPU's own work."""
    measured_gain = 100.0 * (1.0 - unprofiled_ms(twin) / unprofiled_ms(eager))
    report = analyze([SAMPLES / eager], use_cache=False, what_if="launch-bound")
    summed = sum(f.impact_pct for f in report.findings if f.impact_bytes is None and f.scope.rank == 0)
    assert summed <= measured_gain + MARGIN_PTS, (summed, measured_gain)
    projection = next(w for w in report.what_if if w["rule"] == "launch-bound")
    assert projection["gain_pct"] <= measured_gain + MARGIN_PTS, (projection, measured_gain)
    floor_per_step = next(r for r in report.efficiency if r["step"] is None)["unprofiled"]["gpu_floor_ms"]
    assert projection["projected_step_ms"] >= floor_per_step


def test_launch_loop_kernels_keep_their_fixed_cost() -> None:
    """launch-loop: 1,894 kernels a step of about 1.2 µs, each far above its roofline (MBU 0.1 %). The roofline
    alone left 0.23 ms of the window's 9.03 ms of kernels as the floor, so low-mbu claimed 8.8 ms and the savings
    summed to 99.4 % of the rank. A kernel cannot run shorter than the shortest the GPU ran in the trace (0.70 µs):
    the floor keeps the launches × that, low-mbu claims only the kernels' time above it, and the savings leave the
    floor's share of the window."""
    sample = SAMPLES / "launch-loop"
    store, _ = open_store(discover([sample]), None, limits=Limits.from_env())
    with store:
        store.include("efficiency.floor")
        shortest_ns, launches = store.query(
            "SELECT min(dur_ns) AS ns, count(*) AS n FROM efficiency_launches "
            "WHERE kind = 'kernel' AND dur_ns > 0")[0].values()
    window_ms, floor_ms = windows_and_floors(sample)[0]
    assert floor_ms == pytest.approx(launches * shortest_ns / 1e6, rel=0.01)  # every kernel is in the 3 steps
    report = analyze([sample], use_cache=False)
    kernels_ms = sum(a["ms"] for a in report.attribution if a["cause"] == "gpu_compute" and a["detail"] == "kernels")
    low_mbu = next(f for f in report.findings if f.rule == "low-mbu")
    assert 0 < low_mbu.impact_ms <= kernels_ms - floor_ms + 1e-2
    summed = sum(f.impact_pct for f in report.findings if f.impact_bytes is None and f.scope.rank == 0)
    assert summed <= 100.0 * (1 - floor_ms / window_ms) + 0.01 and summed < 98.0
