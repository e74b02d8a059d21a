"""One value per analysis run: `analyze`, `serve` and `diff` take the same options through one decorator, and the
value they make reaches what each command analyses (both sides of a diff, the pages) or is refused where it cannot
apply (a saved report, rendered as it is)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc.cli import cli
from tracedoc.diff import load_side
from tracedoc.errors import InputError
from tracedoc.limits import Limits
from tracedoc.options import AnalysisOptions, Peaks

REPORTS = ROOT / "reports"
RUN_OPTIONS = ["--rules", "--set", "--max-inflate", "--memory-limit", "--step-range", "--peak-tflops", "--peak-gbps",
               "--flops-per-step", "--bytes-per-step", "--step-time-ms"]


def options_in_help(command: str) -> list[str]:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0, result.output
    return re.findall(r"^  (--[a-z-]+)", result.output, flags=re.M)


@pytest.mark.parametrize("command", ["analyze", "serve", "diff"])
def test_the_commands_that_analyse_take_the_same_options(command: str) -> None:
    listed = options_in_help(command)
    assert [o for o in listed if o in RUN_OPTIONS] == RUN_OPTIONS
    assert ("--what-if" in listed) == (command == "analyze")  # only analyze prints a projection


def test_a_saved_side_of_a_diff_refuses_what_needs_its_traces() -> None:
    result = CliRunner().invoke(cli, ["diff", str(REPORTS / "decode-eager.json"), str(SAMPLES / "decode-eager"),
                                      "--step-range", "step"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "a saved report is rendered as it is" in result.stderr and "--step-range" in result.stderr


def test_the_step_range_reaches_both_sides_of_a_diff() -> None:
    """A step range no host range of decode-eager has: the side is analysed by it and refuses it (as analyze)."""
    result = CliRunner().invoke(cli, ["diff", str(SAMPLES / "decode-eager"), str(SAMPLES / "decode-eager"),
                                      "--no-cache", "--step-range", "no_such_range"])
    assert result.exit_code == 2, result.output
    assert "--step-range 'no_such_range': no host range of that name" in result.stderr


@pytest.mark.parametrize("sample, flags", [("hang-4rank-stuck", ["--step-time-ms", "10", "--peak-tflops", "100"]),
                                           ("ncu-h100-gemm-cublas", ["--flops-per-step", "1e12"])])
def test_efficiency_inputs_without_a_timeline_are_refused(sample: str, flags: list[str]) -> None:
    """Flight-recorder dumps and an Nsight Compute report measure no MFU or MBU: the step time and peaks given were
    dropped without a word (exit 0); they are refused as --step-range is where no host range has its name."""
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / sample), "--no-cache", *flags])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    given = ", ".join(sorted(f for f in flags if f.startswith("--")))
    assert f"{given}: MFU and MBU are measured on a GPU timeline" in result.stderr


def test_the_options_of_a_side_judge_it(tmp_path: Path) -> None:
    """decode-eager judged with launch-bound's threshold out of reach: its launch-bound finding goes, and the
    report says the threshold it was judged by."""
    plain = load_side(SAMPLES / "decode-eager", cache_dir=tmp_path)
    strict = load_side(SAMPLES / "decode-eager", AnalysisOptions(thresholds={"launch-bound": {"min_idle_pct": 100}}),
                       cache_dir=tmp_path)
    assert "launch-bound" in {f.rule for f in plain.report.findings}
    assert "launch-bound" not in {f.rule for f in strict.report.findings}
    assert strict.report.summary["thresholds"] == {"launch-bound": {"min_idle_pct": 100}}


def test_the_value_is_frozen_and_checks_what_it_is_given() -> None:
    options = AnalysisOptions(rules_dirs=[Path("rules")], limits=Limits(memory_bytes=1 << 30))  # type: ignore[arg-type]
    assert options.rules_dirs == (Path("rules"),)
    with pytest.raises(AttributeError):
        options.step_range = "step"  # type: ignore[misc]
    with pytest.raises(InputError, match="peak_tflops"):
        Peaks(peak_tflops=float("inf"))
    assert Peaks(flops_per_step=2).given() == {"flops_per_step": 2.0}


def test_serve_refuses_a_saved_report_with_options_that_need_its_traces() -> None:
    result = CliRunner().invoke(cli, ["serve", str(REPORTS / "decode-eager.json"), "--no-show", "--peak-tflops", "900"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert "a saved report is rendered as it is" in result.stderr and "peaks" in result.stderr
