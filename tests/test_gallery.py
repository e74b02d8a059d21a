"""The committed report gallery says what tracedoc says today: a changed diagnosis must be a reviewed diff."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, sample_dirs
from tracedoc.gallery import gallery_report


def verdicts(report: dict) -> list[tuple]:
    """What a reader of the gallery relies on: each finding's rule, severity and scope."""
    return sorted((f["rule"], f["severity"], json.dumps(f["scope"], sort_keys=True)) for f in report["findings"])


@pytest.mark.slow  # every sample analysed again; a quick local run deselects it with -m 'not slow'
@pytest.mark.parametrize("sample", sample_dirs(), ids=lambda p: p.name)
def test_gallery_is_current(sample) -> None:
    committed = ROOT / "reports" / f"{sample.name}.json"
    assert committed.exists(), f"run `python -m tracedoc.gallery` to add {sample.name} to reports/"
    fresh = gallery_report(sample).to_dict()
    assert verdicts(json.loads(committed.read_text())) == verdicts(fresh), \
        f"{sample.name}: the diagnosis changed; review it and run `python -m tracedoc.gallery`"
