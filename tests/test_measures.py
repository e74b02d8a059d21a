"""Units and polarity are declared with the report's columns (tracedoc.measures, tracedoc.report_tables), and what
reads the report reads them: which way a change goes, and what a saved report's number must be."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from tracedoc.measures import MS, PCT, higher, lower
from tracedoc.report_tables import METRICS, summary_measure
from tracedoc.saved import check_report


def test_a_change_is_an_improvement_by_the_declared_polarity() -> None:
    assert lower(MS).improved(-3.5) is True and lower(MS).improved(2.0) is False
    assert higher(PCT).improved(4.0) is True and higher(PCT).improved(-1.0) is False
    assert MS.improved(-3.5) is None and lower(MS).improved(0.0) is None


def test_the_times_a_diff_judges_are_declared_lower_is_better() -> None:
    """The diff's faster/slower reads these declarations: a step's time, a kernel's time; the headline's GPU busy
    share is higher is better."""
    assert METRICS["step_times"].measure("step_ms") == lower(MS)
    assert METRICS["top_kernels"].measure("total_ms") == lower(MS)
    assert summary_measure("gpu_busy_pct") == higher(PCT)


@pytest.mark.parametrize(("table", "column"), [("gpu_idle", "kernel_wait_ms"), ("gpu_health", "temperature_c")])
def test_a_saved_report_holds_a_number_where_a_measure_is_declared(table: str, column: str) -> None:
    """A copy of reports/ddp-straggler.json with a gpu_idle row's measure, or that row given as a GPU health row
    with a temperature, edited to text: refused, naming the field. A temperature's name ends in no unit a name
    rule knew (``_c``): its declaration says it is a number."""
    doc = json.loads((ROOT / "reports" / "ddp-straggler.json").read_text())
    row = dict(doc["metrics"]["gpu_idle"][0])
    row[column] = "12"
    doc["metrics"][table] = [row]
    with pytest.raises(ValueError, match=rf"metrics\.{table}\[0\]\.{column} should be a number"):
        check_report(doc)
