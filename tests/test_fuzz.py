"""``tracedoc analyze`` keeps its contract on a few hundred corrupted copies of the samples (tests/fuzz.py).

The contract: exit 0 or 2, never a traceback, within 60 s and 2 GB, one line on stderr with exit 2, no raw
control characters from a trace in the text and Markdown reports. A fixed seed, so a failure names a mutant that
``python benchmarks/fuzz.py --repro ID`` reproduces. Takes a few minutes on two cores; deselect it with
``-m "not fuzz"``; ``TRACEDOC_FUZZ_MUTANTS`` changes the number of mutants.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fuzz import FORMATS, base_content, failure_report, plan, run_batch, summary_table
from tracedoc.formats import FORMATS as DECLARED
from tracedoc.ingest import discover

SEED = 20250101
MUTANTS = int(os.environ.get("TRACEDOC_FUZZ_MUTANTS", "200"))
JOBS = 2

fuzz = pytest.mark.fuzz  # registered in pyproject.toml; deselect with -m "not fuzz"


def test_plan_covers_every_format_and_is_stable() -> None:
    """The CI batch reaches every input format, and the same seed always names the same mutants."""
    ids = plan(MUTANTS, SEED)
    assert {i.fmt for i in ids} == set(FORMATS)
    assert ids == plan(MUTANTS, SEED)


def test_every_declared_format_is_fuzzed_from_seeds_it_reads(tmp_path: Path) -> None:
    """The fuzzer's formats follow tracedoc's declared ones, in their order, and each base's target, unmutated,
    is read as the format its spec names."""
    assert list(dict.fromkeys(spec.reads for spec in FORMATS.values())) == [f.name for f in DECLARED]
    for name, spec in FORMATS.items():
        for base in spec.bases:
            target = tmp_path / name / base.name / base.target
            target.parent.mkdir(parents=True)
            target.write_bytes(base_content(base)[base.target])
            assert [item.format for item in discover([target])] == [spec.reads], f"{name}: {base.name}"


@fuzz
def test_fuzz_analyze_keeps_its_contract(tmp_path: Path) -> None:
    """No mutant of any format makes tracedoc crash, hang, bloat, or print more than one line of error."""
    outcomes = run_batch(plan(MUTANTS, SEED), jobs=JOBS, keep=tmp_path / "failures")
    if any(o.failed or o.status == "harness-error" for o in outcomes):
        pytest.fail(f"{summary_table(outcomes)}\n\n{failure_report(outcomes)}\n\nkept in {tmp_path}/failures",
                    pytrace=False)
