"""Units and polarity are declared with the report's columns (tracedoc.measures, tracedoc.report_tables), and what
reads the report reads them: which way a change goes, and what a saved report's number must be."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tracedoc.measures import BYTES, COUNT, FLOP, MS, PCT, TFLOPS, UNITS, US, higher, lower
from tracedoc.pages.fragments import Column
from tracedoc.pages.kernels import top_columns
from tracedoc.report_tables import METRICS, summary_measure
from tracedoc.saved import check_report
from tracedoc.units import (
    UNIT_FORMATS,
    cell_format,
    fmt_measure,
    fmt_range,
    fmt_signed,
    table_cell,
    table_header,
    unit_symbol,
)


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


# What shows a report's numbers: the renderers, the pages, the diff, the notebook view, the wording and the report's
# own tables. tracedoc.units writes each unit; none of these picks a unit for a number by itself.
PRESENTERS = ("tracedoc/render", "tracedoc/pages", "tracedoc/diff", "tracedoc/words", "tracedoc/notebook.py",
              "tracedoc/efficiency/render.py", "tracedoc/efficiency/__init__.py", "tracedoc/report_tables.py")
# A unit decided by a column's name: a suffix test, a name's tail cut off and compared, a pattern ending in a unit.
NAME_SUFFIX = re.compile(r"""\.endswith\(\s*\(?\s*f?["']_|\[-\d+:\]\s*[=!]=|["']_(ms|us|ns|pct|bytes|gbps|mhz|w|c"""
                         r"""|tflops|flops)["']\s*(\)|\bin\b)|_(ms|pct|bytes)\$""")
# A number written with a unit spelled beside its format ('{x:.1f}%', '{x:,.2f} ms'); a CSS width ('%;') is no unit.
UNIT_BY_HAND = re.compile(r":,?\.\d+[fg]\}\s?(%(?!;)|ms\b|µs|us\b|s\b|GB|GiB|MiB|MB|KiB|kB|TFLOP|GFLOP|MHz|°C)")


def presenter_files() -> list[Path]:
    return sorted(p for entry in PRESENTERS for p in ((ROOT / entry).rglob("*.py") if (ROOT / entry).is_dir()
                                                       else [ROOT / entry]))


def test_every_declared_unit_is_written_one_way() -> None:
    """Each unit a column may declare has its one way to be written, with its unit and in a table under a header
    that names it; a time or a size picks its own scale, the others go bare under their header."""
    assert set(UNIT_FORMATS) == UNITS
    assert fmt_measure(1234.6, MS) == "1,235 ms" and fmt_measure(0.35, MS) == "350.0 µs"
    assert fmt_measure(4.9, US) == "4.9 µs" and fmt_measure(33554432, BYTES) == "32.0 MiB"
    assert fmt_measure(37.26, PCT) == "37.3%" and fmt_measure(1204.0, COUNT) == "1,204"
    assert fmt_measure(2.408e13, FLOP) == "24.08 TFLOP" and fmt_measure(989.4, TFLOPS) == "989.4 TFLOP/s"
    assert cell_format(BYTES)(33554432) == "32.0" and unit_symbol(BYTES) == "MiB"
    assert cell_format(MS, 3)(1.23456) == "1.235" and cell_format(COUNT)(1204) == "1,204"
    assert cell_format(MS)(None) == ""
    assert table_header("SM", PCT) == "SM %" and table_header("time", MS) == "time"
    assert table_cell(81.25, PCT) == "81.2" and table_cell(1.5, MS) == "1.5 ms"
    assert fmt_range(64.08, 65.48, MS) == "64.1–65.5 ms" and fmt_range(0.85, 1.2, MS) == "850.0 µs–1.2 ms"
    assert fmt_range(37.2, 38.0, PCT) == "37.2–38.0%"
    assert fmt_signed(-33554432, BYTES) == "−32.0 MiB" and fmt_signed(1e-4, MS) == "±0"


@pytest.mark.parametrize("path", presenter_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_presenter_decides_a_unit_by_itself(path: Path) -> None:
    """No renderer, page, diff or wording module tells a unit from a column's name, nor writes a number with a unit
    spelled beside its format: it reads the declared measure and writes it through tracedoc.units."""
    lines = path.read_text().splitlines()
    assert [f"{i}: {line.strip()}" for i, line in enumerate(lines, 1) if NAME_SUFFIX.search(line)] == []
    assert [f"{i}: {line.strip()}" for i, line in enumerate(lines, 1) if UNIT_BY_HAND.search(line)] == []


def test_the_checks_find_what_they_forbid() -> None:
    assert NAME_SUFFIX.search('if key.endswith("_ms"):') and NAME_SUFFIX.search("if column[-3:] == '_ms':")
    assert NAME_SUFFIX.search('unit = "%" if "_pct" in key else ""')
    assert UNIT_BY_HAND.search('f"{share:.1f}%"') and UNIT_BY_HAND.search('f"{step:,.2f} ms step"')
    assert not UNIT_BY_HAND.search('style=f"width:{w:.3f}%;"')


def _page_columns() -> list[tuple[str, Column]]:
    """Every table column the pages and the notebook view declare, made by their module or by their functions."""
    shown = []
    names = [f"tracedoc.pages.{p.stem}" for p in (ROOT / "tracedoc/pages").glob("*.py")] + ["tracedoc.notebook"]
    for module in map(importlib.import_module, names):
        for name, value in vars(module).items():
            if isinstance(value, list) and value and all(isinstance(c, Column) for c in value):
                shown += [(f"{module.__name__}.{name}", c) for c in value]
    shown += [("tracedoc.pages.kernels.top_columns", c) for c in top_columns({})]
    return shown


def test_every_number_column_shown_has_a_declared_unit() -> None:
    """A page's column of numbers is made from its declared measure (``fragments.measured``): written in that unit,
    which its header names; none picks a number's format itself (a column of text right-aligned, an evidence
    value already written with its unit, takes no format)."""
    columns = _page_columns()
    assert len(columns) > 40
    numbers = [(where, c) for where, c in columns if c.numeric]
    assert all(c.measure is not None and c.measure.unit in UNITS for _, c in numbers), \
        [f"{where}.{c.key}" for where, c in numbers if c.measure is None]
    assert all(unit_symbol(c.measure) in c.header for _, c in numbers  # type: ignore[arg-type]
               if c.measure is not None and c.measure.unit in ("ms", "us", "bytes", "gb_per_s", "tflop_per_s")), \
        [f"{where}.{c.key}: {c.header}" for where, c in numbers]


def test_no_page_writes_a_number_of_its_own() -> None:
    """Every ``Column(...)`` of the pages and the notebook view that is numeric passes no format: a number goes
    through ``measured`` (its declared unit), text arrives written."""
    offenders = []
    for path in [*(ROOT / "tracedoc/pages").glob("*.py"), ROOT / "tracedoc/notebook.py"]:
        tree = ast.parse(path.read_text())
        made_by_measured = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "measured"
                            for n in ast.walk(f)}
        for node in ast.walk(tree):
            if id(node) in made_by_measured or not isinstance(node, ast.Call) or \
                    getattr(node.func, "id", "") != "Column":
                continue
            if any(k.arg == "numeric" for k in node.keywords) and (len(node.args) > 2 or any(
                    k.arg == "fmt" for k in node.keywords)):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
