"""One diagnosis: every GPU's time attributed once, savings drawn from it, what-if projections, and predictions
checked against the fixed twin of each problem sample."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli

sys.path.insert(0, str(ROOT / "benchmarks"))
import predicted_vs_measured  # noqa: E402


def _by_cause(report, rank: int) -> dict[str, float]:  # noqa: ANN001
    out: dict[str, float] = {}
    for row in report.attribution:
        if row["rank"] == rank:
            out[row["cause"]] = out.get(row["cause"], 0.0) + row["ms"]
    return out


def test_a_slow_loader_and_a_sync_are_counted_once_and_the_sync_is_next() -> None:
    report = analyze([SAMPLES / "input-slow"])
    by_rule = {f.rule: f for f in report.findings}
    host, sync = by_rule["gpu-idle-host-bound"], by_rule["host-sync"]
    causes = _by_cause(report, 0)
    assert host.impact_ms <= causes["data_loading"] + causes.get("phase", 0) + causes.get("host_work", 0) \
        + causes.get("uninstrumented_host", 0) + 0.01
    # the syncs' idle, and half the time of the pageable copies most of them wait for (one diagnosis: pin the memory)
    copies_ms = next(e.value for e in by_rule["pageable-memcpy"].evidence if e.name == "time in pageable copies")
    assert sync.impact_ms == pytest.approx(causes["host_sync"] + copies_ms / 2, abs=0.01)
    assert by_rule["pageable-memcpy"].part_of == 2
    assert host.severity == "critical" and sync.severity == "warning"  # not both critical on the same idle
    assert "DataLoader worker" in host.fix and "data loading" in host.message
    projection = report.what_if_for(1)
    assert projection["rule"] == "gpu-idle-host-bound" and projection["next"] == "host-sync (#2)"
    assert projection["next_share_pct"] > 20  # small now, the bottleneck once the loader is fixed


def test_syncs_hidden_behind_a_slow_host_are_named_as_latent() -> None:
    """moe-hot-expert's rank 0 makes 16 blocking syncs a step ('aten::copy_' of the split sizes) that cost 0.2 ms
    of GPU idle today, because its host is the bottleneck: fixing the host-bound finding exposes them. input-slow's
    sync is a finding of its own and is named as next instead."""
    moe = analyze([SAMPLES / "moe-hot-expert"])
    number = next(n for n, f in enumerate(moe.findings, 1) if f.rule == "gpu-idle-host-bound")
    assert not any(f.rule == "host-sync" for f in moe.findings)
    latent = moe.what_if_for(number)["latent"]
    assert latent.startswith("16.3 blocking syncs a step (mostly 'aten::copy_') cost 2")
    loader = analyze([SAMPLES / "input-slow"]).what_if_for(1)
    assert loader["next"] == "host-sync (#2)" and loader["latent"] is None


def test_an_informational_finding_is_never_the_next_bottleneck() -> None:
    """host-stall-sleep: with the un-instrumented host time gone the GPU computes 99 % of the step; it said
    'next: low-gpu-utilization (#2), 0.8 %', a finding with no fix of its own."""
    projection = analyze([SAMPLES / "host-stall-sleep"]).what_if_for(1)
    assert projection["next"] == "GPU computing" and projection["next_share_pct"] > 90


def test_the_projected_step_keeps_its_gpu_work() -> None:
    """nsys-torch-h100: two of its five steps hold a 0.5 s checkpoint. The what-if took the window's 95.7 % saving
    off the median step as a share of it, 95.3 ms → 4.1 ms, less than the 9.3–10.9 ms the GPU computes in every
    step; each step now loses the host time it holds."""
    report = analyze([SAMPLES / "nsys-torch-h100"])
    per_step: dict[int, float] = {}
    for row in report.attribution:
        if row["step"] is not None and row["cause"] == "gpu_compute":
            per_step[row["step"]] = per_step.get(row["step"], 0.0) + row["ms"]
    projection = report.what_if_for(1)
    assert projection["rule"] == "gpu-idle-host-bound"
    assert projection["projected_step_ms"] >= max(per_step.values()) > 9.0
    assert projection["gain_pct"] == pytest.approx(100 * (1 - projection["projected_step_ms"] / projection["step_ms"]),
                                                   abs=0.01)


def test_a_long_gap_inside_host_bound_idle_is_part_of_it() -> None:
    report = analyze([SAMPLES / "nsys-torch-h100"])
    gaps = next(f for f in report.findings if f.rule == "gpu-gaps")
    owner = report.findings[gaps.part_of - 1]
    assert owner.rule == "gpu-idle-host-bound" and gaps.impact_ms == 0
    assert "'checkpoint'" in owner.fix and "DataLoader" not in owner.fix  # the phase that holds most of the idle


def test_uninstrumented_host_time_is_called_so() -> None:
    report = analyze([SAMPLES / "host-stall-sleep"])
    host = next(f for f in report.findings if f.rule == "gpu-idle-host-bound")
    assert "no profiled range covers" in host.message and "record_function" in host.fix
    assert _by_cause(report, 0)["uninstrumented_host"] > 0.9 * host.impact_ms


def test_python_stacks_name_the_host_code_in_the_gap() -> None:
    """TraceLens's TimeSformer trace was recorded with with_stack=True (tests/data): the host spends the GPU's idle
    in the image processor's Python, which the stacks name; the advice was to add record_function or with_stack."""
    report = analyze([ROOT / "tests" / "data" / "tracelens-timesformer-stacks"])
    host = next(f for f in report.findings if f.rule == "gpu-idle-host-bound")
    assert "profiled host work (mostly 'transformers/image_transforms.py(390): normalize')" in " ".join(
        host.message.split())
    assert "record_function" not in host.fix and "with_stack" not in host.fix
    assert "'transformers/image_transforms.py(390): normalize'" in host.fix


def test_waiting_for_a_peer_is_not_busy_work_and_not_charged_to_the_waiting_rank() -> None:
    straggler = analyze([SAMPLES / "ddp-straggler"])
    assert straggler.summary["waiting_for_rank"] == 1 and straggler.summary["waiting_pct"] > 5
    assert straggler.summary["computing_pct"] + straggler.summary["communication_pct"] == pytest.approx(
        straggler.summary["gpu_busy_pct"], abs=0.01)
    moe = analyze([SAMPLES / "moe-hot-expert"])
    assert moe.findings[0].rule == "expert-imbalance" and moe.findings[0].scope.rank == 1
    waits = [r for r in moe.attribution if r["rank"] == 0 and r["cause"] == "wait_for_peer"]
    assert any(r["detail"] == "rank 1" for r in waits)
    assert not any(f.rule == "low-comm-overlap" and f.impact_ms > sum(r["ms"] for r in moe.attribution
                   if r["rank"] == f.scope.rank and r["cause"] == "comm_transfer") for f in moe.findings)


def test_what_if_on_the_command_line() -> None:
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "host-stall-item"), "--what-if", "host-sync"])
    assert result.exit_code == 0, result.output
    # the projection alone, not the report again
    assert " ".join(result.stdout.split()) == ("host-sync (#1): If fixed: step 17.6 ms → 13.0 ms (−26.1%) on rank 0; "
                                               "next: GPU computing, 98.4% of the projected step.")
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "host-stall-item"), "--what-if", "no-such-rule"])
    assert result.exit_code == 2 and "no such rule" in result.stderr


@pytest.mark.parametrize("pair", predicted_vs_measured.PAIRS, ids=lambda p: f"{p[0]}->{p[1]}")
def test_predicted_gain_matches_the_fixed_twin(pair: tuple[str, str, str, tuple[str, ...]],
                                               tmp_path: Path) -> None:
    """The savings of the findings a change addresses predict the gain its fixed twin measured, within 5 points."""
    problem, fixed, _, addressed = pair
    problem_report = analyze([SAMPLES / problem], cache_dir=tmp_path)
    before, steps_ms = predicted_vs_measured.step_times(problem_report)
    after, _ = predicted_vs_measured.step_times(analyze([SAMPLES / fixed], cache_dir=tmp_path))
    measured = 100.0 * (1 - after / before)
    predicted, _, _ = predicted_vs_measured.predicted_gain(problem_report, steps_ms, addressed)
    assert abs(predicted - measured) <= 5.0, f"predicted {predicted:.1f} %, measured {measured:.1f} %"
