"""`tracedoc diff` of long windows: the bootstrap of the median's change costs the same whatever the number of
steps, and says the same as drawing every resample step by step.

The inputs are edited copies of the gallery's saved reports of real samples (reports/decode-eager.json and
reports/decode-cudagraph.json), their attributed steps repeated to 20,000 steps a side.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT
from tracedoc.cli import cli
from tracedoc.diff import stats

REPORTS = ROOT / "reports"
_ORDER = ("tracedoc", "schema", "inputs", "summary", "findings", "attribution", "what_if", "metrics")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def long_report(tmp_path: Path, name: str, steps: int) -> Path:
    """reports/<name>.json with its attributed steps repeated to ``steps`` steps, each repeat's times scaled by up
    to 6 % so that the steps differ; written in the order `tracedoc analyze --format json` writes."""
    doc = json.loads((REPORTS / f"{name}.json").read_text())
    rows = [r for r in doc["attribution"] if r["step"] is not None]
    known = sorted({r["step"] for r in rows})
    attribution: list[dict[str, Any]] = [r for r in doc["attribution"] if r["step"] is None]
    for step in range(steps):
        scale = 1.0 + (step % 7) / 100.0
        attribution += [{**r, "step": step, "ms": r["ms"] * scale} for r in rows if r["step"] == known[step % 4]]
    doc["attribution"] = attribution
    path = tmp_path / f"{name}-{steps}.json"
    path.write_text(json.dumps({key: doc[key] for key in _ORDER if key in doc}))
    return path


def test_a_diff_of_20000_steps_a_side_is_quick(tmp_path: Path) -> None:
    """Two saved reports of 20,000 steps each: the bootstrap drew 4,000 resamples of 20,000 steps per side and
    scope (96 s); now a second or so of CPU, with the same verdict and interval as the step-by-step draws."""
    before, after = long_report(tmp_path, "decode-eager", 20_000), long_report(tmp_path, "decode-cudagraph", 20_000)
    started = _cpu_seconds()
    result = CliRunner().invoke(cli, ["diff", str(before), str(after), "--format", "json"])
    assert _cpu_seconds() - started < 15
    assert result.exit_code == 0, result.output
    job = json.loads(result.stdout)["steps"]["job"]
    assert job["before"]["n"] == job["after"]["n"] == 20_000
    change = job["change"]
    assert change["direction"] == "faster" and change["significant"]
    assert change["ci_pct"][0] <= change["pct"] <= change["ci_pct"][1]
    assert round(change["pct"], 1) == -92.2


def _step_by_step(before: list[float], after: list[float], monkeypatch: pytest.MonkeyPatch) -> stats.Change:
    """The interval as drawn resample by resample, whatever the number of steps."""
    with monkeypatch.context() as patched:
        patched.setattr(stats, "DRAWN_STEPS", len(before) + len(after))
        return stats.compare(before, after)


def test_medians_drawn_from_their_distribution_give_the_step_by_step_interval(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Step times of the samples' steps (decode-eager before, decode-cudagraph after), jittered into 150 and 151
    steps a side (an odd and an even count): the interval from the order statistics' distribution agrees with the
    step-by-step draws to a few hundredths of a millisecond."""
    rng = random.Random(7)
    eager, graphs = [51.0, 53.3, 54.1, 52.6], [4.0, 4.2, 4.1, 3.9]
    for n_before, n_after in ((150, 151), (151, 150)):
        before = [rng.choice(eager) * rng.uniform(0.97, 1.03) for _ in range(n_before)]
        after = [rng.choice(graphs) * rng.uniform(0.97, 1.03) for _ in range(n_after)]
        drawn = stats.compare(before, after)
        exact = _step_by_step(before, after, monkeypatch)
        assert drawn.median_ms == exact.median_ms and drawn.significant == exact.significant
        for got, want in zip(drawn.ci_ms, exact.ci_ms):
            assert abs(got - want) < 0.05 * statistics.pstdev(before), (drawn.ci_ms, exact.ci_ms)
        assert drawn == stats.compare(before, after)  # seeded: the same interval every time


def test_short_windows_keep_the_step_by_step_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to DRAWN_STEPS steps the resamples are drawn step by step, as the bundled diffs were computed."""
    before, after = [10.0, 10.2, 9.9, 10.1, 10.0], [9.0, 9.1, 8.9, 9.2, 9.0]
    assert stats.compare(before, after) == _step_by_step(before, after, monkeypatch)
