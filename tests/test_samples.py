"""Every sample: tracedoc's findings must include what expected.yaml says must fire, and nothing it rules out."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import sample_dirs
from tracedoc import analyze


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


def test_corpus_is_not_empty() -> None:
    assert len(sample_dirs()) >= 4
