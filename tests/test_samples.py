"""Every sample: tracedoc's findings must include what expected.yaml says must fire, and nothing it rules out."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tests.conftest import SAMPLES, sample_dirs
from tracedoc import analyze
from tracedoc.causes import window_rows
from tracedoc.judge.template import UNKNOWN
from tracedoc.report import Report

_UNKNOWN_VALUE = re.compile(rf"\bn/a\b|\b{UNKNOWN}\b")


@pytest.mark.parametrize("sample", sample_dirs(), ids=lambda p: p.name)
def test_sample_diagnosis(sample: Path) -> None:
    expected = yaml.safe_load((sample / "expected.yaml").read_text())
    report = analyze([sample])
    fired = {f.rule for f in report.findings}
    missing = set(expected.get("must_fire") or []) - fired
    wrong = set(expected.get("must_not_fire") or []) & fired
    assert not missing, f"{sample.name}: expected {sorted(missing)} to fire; fired {sorted(fired)}"
    assert not wrong, f"{sample.name}: {sorted(wrong)} must not fire; fired {sorted(fired)}"
    for want in expected.get("expect") or []:
        scope = want.get("scope") or {}
        matches = [f for f in report.findings if f.rule == want["rule"]
                   and all(f.scope.to_dict().get(k) == v for k, v in scope.items())]
        assert matches, f"{sample.name}: no {want['rule']} finding with scope {scope}; got " + \
            str([(f.rule, f.scope.to_dict()) for f in report.findings])
        _assert_amounts(sample.name, want, matches)
    for f in report.findings:  # sentences adapt to what the trace knows: no value is ever shown as unknown
        for text in (f.message, f.fix):
            assert not _UNKNOWN_VALUE.search(text), f"{sample.name}: {f.rule} says {text!r}"
    _assert_time_attributed_once(sample.name, report)


def _assert_amounts(name: str, want: dict, matches: list) -> None:
    """The truth a sample was built with (expected.yaml's ``truth``, referred to by an ``expect`` entry): the
    finding's ``impact_bytes`` and its numeric evidence within ``within_pct`` of the planted amount, and its textual
    evidence (a source line, ``run.py:48 (forward)``) ending with the planted one."""
    if "impact_bytes" not in want and "evidence" not in want:
        return
    tolerance = float(want.get("within_pct", 0)) / 100.0

    def close(value: object, truth: float) -> bool:
        return isinstance(value, int | float) and abs(value - truth) <= tolerance * abs(truth)

    def agrees(f) -> list[str]:
        wrong = []
        if "impact_bytes" in want and not close(f.impact_bytes, want["impact_bytes"]):
            wrong.append(f"impact_bytes {f.impact_bytes} (planted {want['impact_bytes']})")
        evidence = {e.name: e.value for e in f.evidence}
        for key, truth in (want.get("evidence") or {}).items():
            value = evidence.get(key)
            ok = value is not None and (str(value).endswith(truth) if isinstance(truth, str) else close(value, truth))
            if not ok:
                wrong.append(f"{key!r} = {value!r} (planted {truth!r})")
        return wrong

    verdicts = [agrees(f) for f in matches]
    assert any(not v for v in verdicts), f"{name}: {want['rule']} does not report what was planted: {verdicts}"


def _assert_time_attributed_once(name: str, report: Report) -> None:
    """Every GPU's window is attributed once (what lies outside it, start-up and warm-up, apart), and the savings
    of one rank's findings never add up to more than that rank's time (its GPU window; for kernel profiles, the
    profiled kernel time)."""
    windows = {(r["rank"], r["device"]): r["wall_ms"] for r in report.metrics.get("gpu_idle") or []}
    attributed: dict[tuple[int, int], float] = defaultdict(float)
    for row in window_rows(report.attribution):
        attributed[(row["rank"], row["device"])] += row["ms"]
    assert set(attributed) == set(windows), name
    for key, ms in attributed.items():
        assert ms == pytest.approx(windows[key], abs=0.01), f"{name}: rank, GPU {key} attributed {ms} of {windows[key]}"
    saved: dict[int | None, float] = defaultdict(float)
    for f in report.findings:
        assert f.impact_ms >= 0, f"{name}: {f.rule} saves {f.impact_ms}"
        saved[f.scope.rank] += f.impact_ms
    for rank, ms in saved.items():
        rank_windows = [w for (r, _), w in windows.items() if r == rank]
        limit = max(rank_windows) if rank_windows else report.summary.get("wall_ms") or 0.0
        if not limit:  # no time basis (a hang's dumps): its findings price the wait, not a share of a window
            continue
        assert ms <= limit + 0.01, f"{name}: the findings of rank {rank} save {ms} ms of its {limit} ms"


def test_corpus_is_not_empty() -> None:
    assert len(sample_dirs()) >= 4


def test_sentences_adapt_to_an_export_without_host_ranges(tmp_path: Path) -> None:
    """An edited copy of samples/nsys-torch-h100/sample.sqlite with its NVTX_EVENTS and OSRT_API rows deleted (an
    export captured with --trace=cuda only): the findings drop what they cannot name instead of saying n/a."""
    path = tmp_path / "cuda-only.sqlite"
    shutil.copyfile(SAMPLES / "nsys-torch-h100" / "sample.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM NVTX_EVENTS")
        con.execute("DELETE FROM OSRT_API")
    report = analyze([path], use_cache=False)
    messages = {f.rule: f.message for f in report.findings}
    assert {"gpu-idle-host-bound", "gpu-gaps"} <= messages.keys()
    assert "Meanwhile the host" not in messages["gpu-idle-host-bound"]
    assert "while the host was in" not in messages["gpu-gaps"]
    assert messages["gpu-gaps"].endswith("into the trace.")
    for text in messages.values():
        assert not _UNKNOWN_VALUE.search(text), text
