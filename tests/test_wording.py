"""What the reports say in words, checked on the samples' committed reports (reports/, regenerated from the
samples by tracedoc.gallery) and on the rule texts: counts with their nouns, one full stop to a sentence, and a
diff that says which finding holds the time of a finding that saves none of its own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SAMPLES
from tracedoc.api import analyze
from tracedoc.diff import build_diff, load_side
from tracedoc.diff.sections import findings_section
from tracedoc.saved import read_report
from tracedoc.words.findings import summary_text

REPORTS = ROOT / "reports"
# A count left to the reader ('input(s)'), two full stops ending a sentence (not an ellipsis or a '../' path).
_PLACEHOLDER_PLURAL = re.compile(r"\w\(s\)")
_DOUBLE_STOP = re.compile(r"(?<!\.)\.\.(?![./])")


@pytest.mark.parametrize(("report", "headline"), [
    ("ncu-a100-cutlass-csv", "1 input · 1 rank · "),
    ("hang-slow-rank", "2 inputs · 2 ranks"),
    ("moe-hot-expert-4rank", "4 inputs · 4 ranks · "),
    ("snapshot-leak-default", "1 input · GPU 0: "),
])
def test_headline_counts_inputs_and_ranks_in_words(report: str, headline: str) -> None:
    saved = read_report(REPORTS / f"{report}.json")
    text = summary_text(saved.summary, saved.input_count)
    assert text.startswith(headline), text


def test_diff_names_the_finding_that_holds_a_findings_time() -> None:
    """gemm-tiled → gemm-wmma (saved reports): no-tensor-cores on gemm_tiled saves nothing of its own, its time
    being below-cublas-ceiling's (#1) on that side; the row says so instead of '0.0 µs → —'."""
    sides = [load_side(REPORTS / f"ncu-h100-gemm-{name}.json") for name in ("tiled", "wmma")]
    before = sides[0].report.findings
    tensor_cores = next(f for f in before if f.rule == "no-tensor-cores")
    assert tensor_cores.part_of == 1 and tensor_cores.impact_ms == 0 and before[0].rule == "below-cublas-ceiling"
    rows = {(row[2], row[3]): row[4] for row in findings_section(build_diff(*sides)).rows}
    assert rows[("no-tensor-cores", "rank 0, kernel gemm_tiled")] == "part of #1 below-cublas-ceiling → —"
    assert [saving for (rule, _), saving in rows.items() if rule == "below-cublas-ceiling"] == ["3.5 ms → 802.0 µs"]
    assert not any("0.0 µs" in saving for saving in rows.values())


def _gallery_text() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in sorted(REPORTS.rglob("*.md"))]


def test_gallery_has_no_placeholder_plural_double_stop_or_zero_saving() -> None:
    """Every committed Markdown report and diff: no 'launch(es)' count, no '..' ending a sentence, and no finding
    whose saving reads '0.0 µs' (a finding that saves nothing says so or names the finding that holds its time)."""
    bad = []
    for path, text in _gallery_text():
        for line in text.splitlines():
            finding_row = line.startswith("| ") and re.search(r"\| (info|warning|critical) \|", line)
            if _PLACEHOLDER_PLURAL.search(line) or _DOUBLE_STOP.search(line.replace("...", "…")) or (
                    finding_row and re.search(r"\| (?:[^|]*[^|\d.,])?0\.0 µs[^|]*\|$", line)):
                bad.append(f"{path.relative_to(ROOT)}: {line[:160]}")
    assert not bad, "\n".join(bad)


def test_rule_texts_have_no_placeholder_plural_or_double_stop() -> None:
    bad = []
    for path in sorted((ROOT / "rules").glob("*.yaml")):
        rule = yaml.safe_load(path.read_text()) or {}
        for key in ("title", "message", "fix"):
            text = str(rule.get(key) or "")
            if _PLACEHOLDER_PLURAL.search(text) or _DOUBLE_STOP.search(text.replace("...", "…")):
                bad.append(f"{path.name} {key}: {text[:160]}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(("left_out", "note"), [
    ((3,), "No dump from rank 3: its part is unknown."),
    ((1, 3), "No dump from ranks 1, 3: their part is unknown."),
])
def test_hang_names_the_ranks_without_a_dump_in_words(tmp_path: Path, left_out: tuple[int, ...], note: str) -> None:
    """samples/hang-4rank-stuck with the dumps of victims left out: the culprit is still rank 2, and the ranks
    without a dump are counted in singular or plural."""
    for dump in (SAMPLES / "hang-4rank-stuck").glob("trace_rank_*"):
        if int(dump.name.rsplit("_", 1)[1]) not in left_out:
            shutil.copy(dump, tmp_path / dump.name)
    hang = next(f for f in analyze([tmp_path], use_cache=False).findings if f.rule == "collective-hang")
    assert hang.scope.rank == 2 and hang.message.endswith(note), hang.message
