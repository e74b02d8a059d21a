"""Rule files as data: a finding's span (where its rule places it on the timeline), written into the report and
read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.errors import InputError, RuleError
from tracedoc.judge import load_rules
from tracedoc.report import Report
from tracedoc.saved import read_report
from tracedoc.words.findings import finding_span

NSYS = SAMPLES / "nsys-torch-h100"


def _write_rule(folder: Path, data: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _gpu_gaps() -> dict[str, object]:
    data = yaml.safe_load((ROOT / "rules" / "gpu-gaps.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def nsys_report() -> Report:
    return analyze([NSYS])


def test_a_finding_lies_where_its_rule_says_whatever_its_evidence_is_called(nsys_report: Report,
                                                                            tmp_path: Path) -> None:
    """nsys-torch-h100's gpu-gaps finding: its span is the longest gap (652 ms, 1,634 ms into the trace). Its
    evidence reworded, it lies there still; its rule without a span, it falls back to its rank's window."""
    (gaps,) = [f for f in nsys_report.findings if f.rule == "gpu-gaps"]
    assert gaps.span is not None
    assert (gaps.span.start_ms, gaps.span.dur_ms) == pytest.approx((1633.704, 652.404))
    window = (100.0, 5000.0)
    assert finding_span(gaps, window, {}, 1.0, 0.0) == pytest.approx((1633.704, 1633.704 + 652.404))

    reworded = _gpu_gaps()
    reworded["evidence"] = [{**e, "name": f"the {e['name']}"} for e in reworded["evidence"]]
    _write_rule(tmp_path / "reworded", reworded)
    (again,) = [f for f in analyze([NSYS], rules_dirs=[tmp_path / "reworded"]).findings if f.rule == "gpu-gaps"]
    assert again.span == gaps.span and "longest gap starts after" not in {e.name for e in again.evidence}

    unplaced = {k: v for k, v in _gpu_gaps().items() if k != "span"}
    _write_rule(tmp_path / "unplaced", unplaced)
    (bare,) = [f for f in analyze([NSYS], rules_dirs=[tmp_path / "unplaced"]).findings if f.rule == "gpu-gaps"]
    assert bare.span is None and bare.evidence == gaps.evidence
    assert finding_span(bare, window, {}, 1.0, 0.0) == window


def test_the_span_is_part_of_the_json_report(nsys_report: Report, tmp_path: Path) -> None:
    """Only findings whose rules declare a span carry one; a saved report reads it back, and a span lacking an
    end is refused as bad input."""
    data = json.loads(nsys_report.to_json())
    spans = {f["rule"]: f.get("span") for f in data["findings"]}
    assert spans["gpu-gaps"] == {"start_ms": 1633.704, "dur_ms": 652.404}
    assert all(span is None for rule, span in spans.items() if rule != "gpu-gaps")
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(data))
    assert [f.span for f in read_report(saved).findings] == [f.span for f in nsys_report.findings]
    gaps = next(f for f in data["findings"] if f["rule"] == "gpu-gaps")
    gaps["span"] = {"start_ms": 1.0}
    saved.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"findings\[\d+\]\.span\.dur_ms"):
        read_report(saved)


@pytest.mark.parametrize("span", [{"start_ms": "ts_ns / 1e6"}, "ts_ns", {"start_ms": "a", "dur_ms": ""},
                                  {"start_ms": "a", "dur_ms": "b", "end_ms": "c"}])
def test_a_malformed_span_is_refused(tmp_path: Path, span: object) -> None:
    _write_rule(tmp_path, {**_gpu_gaps(), "span": span})
    with pytest.raises(RuleError, match=r"gpu-gaps\.yaml: span needs start_ms and dur_ms"):
        load_rules([tmp_path])
