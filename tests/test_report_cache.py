"""Reports kept beside their cached store (tracedoc.report_cache): analysing the same inputs again the same way
reads the report back, the same report; anything that changes what the report would say analyses again."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import api, pipeline
from tracedoc.cli import cli
from tracedoc.render.base import RENDERERS
from tracedoc.report_cache import report_key
from tracedoc.store import cache as store_cache

EAGER = SAMPLES / "decode-eager"  # a PyTorch trace with several findings
LEAK = SAMPLES / "memory-leak"  # allocator events: the memory section


def counting_analyses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time the analyses run (pipeline.build_report)."""
    calls: list[int] = []
    build = pipeline.build_report

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(pipeline, "build_report", counted)
    return calls


@pytest.mark.parametrize("sample", [EAGER, LEAK], ids=lambda p: p.name)
def test_a_second_analysis_reads_the_kept_report_and_renders_it_the_same(
        sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_analyses(monkeypatch)
    first = api.analyze(sample, cache_dir=tmp_path)
    second = api.analyze(sample, cache_dir=tmp_path)
    assert len(calls) == 1, "the second run analysed again"
    assert first.findings, "the sample's report has findings to compare"
    for fmt, renderer in RENDERERS.items():
        if fmt != "html":  # its plots carry new random ids at every rendering
            assert renderer().render(second) == renderer().render(first), f"{fmt} differs when read back"
    assert len(list(tmp_path.glob("*.reports/*.json"))) == 1


def test_a_kept_hang_is_still_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hang-4rank-stuck read back: its findings' kinds (not in the JSON) come from the rules again, so the hang is
    drawn and worded as a hang, and the straggler-like findings as about ranks."""
    calls = counting_analyses(monkeypatch)
    first = api.analyze(SAMPLES / "hang-4rank-stuck", cache_dir=tmp_path)
    second = api.analyze(SAMPLES / "hang-4rank-stuck", cache_dir=tmp_path)
    assert len(calls) == 1
    assert "hang" in {f.kind for f in first.findings}
    assert [(f.kind, f.across_ranks) for f in second.findings] == [(f.kind, f.across_ranks) for f in first.findings]


def test_other_settings_rules_or_paths_analyse_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_analyses(monkeypatch)
    api.analyze(EAGER, cache_dir=tmp_path)
    changed = api.analyze(EAGER, cache_dir=tmp_path, thresholds={"launch-bound": {"min_idle_pct": 99.0}})
    assert len(calls) == 2
    assert not any(f.rule == "launch-bound" for f in changed.findings)
    api.analyze(EAGER, cache_dir=tmp_path, step_range="decode_step")
    assert len(calls) == 3
    copy = tmp_path / "renamed.json.gz"
    copy.write_bytes((EAGER / "trace.json.gz").read_bytes())
    renamed = api.analyze(copy, cache_dir=tmp_path)  # the same store, but the report names the input as given
    assert len(calls) == 4 and renamed.inputs[0].path == str(copy)
    api.analyze(EAGER, cache_dir=tmp_path, use_cache=False)
    assert len(calls) == 5, "--no-cache analyses"
    api.analyze(EAGER, cache_dir=tmp_path)
    assert len(calls) == 5, "the first report is still kept"
    assert len(set(tmp_path.glob("*.reports/*.json"))) == 4


def test_the_key_follows_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    key = report_key("store", [], None, None, None, ["a.json"])
    monkeypatch.setattr("tracedoc.report_cache.code_digest", lambda: "another tracedoc")
    assert report_key("store", [], None, None, None, ["a.json"]) != key


def test_the_key_follows_the_installed_duckdb_and_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another DuckDB or pyarrow may compute a report differently: which install each is (its file, size and time,
    read without importing it) is part of the key."""
    from tracedoc import report_cache

    assert report_cache._installed("pyarrow").startswith(str(Path(pa.__file__).parent))
    assert report_cache._installed("no_such_module_here") == ""

    def digest_with(reinstalled: str) -> str:
        monkeypatch.setattr(report_cache, "_installed", lambda name: name + (" again" if name == reinstalled else ""))
        report_cache.code_digest.cache_clear()
        return report_cache.code_digest()

    try:
        same = digest_with("")
        assert digest_with("") == same
        assert digest_with("duckdb") != same and digest_with("_duckdb") != same and digest_with("pyarrow") != same
    finally:
        report_cache.code_digest.cache_clear()


def test_a_damaged_kept_report_is_analysed_again_and_replaced(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting_analyses(monkeypatch)
    first = api.analyze(EAGER, cache_dir=tmp_path)
    (kept,) = tmp_path.glob("*.reports/*.json")
    kept.write_text(kept.read_text()[:100])
    again = api.analyze(EAGER, cache_dir=tmp_path)
    assert len(calls) == 2 and again.to_json() == first.to_json()
    assert kept.read_text() == first.to_json(indent=None)


def test_the_cli_prints_the_same_and_cache_clear_removes_the_kept_reports(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["analyze", str(EAGER / "trace.json.gz"), "--cache-dir", str(tmp_path), "--format", "json"]
    first, second = runner.invoke(cli, args), runner.invoke(cli, args)
    assert first.exit_code == second.exit_code == 0
    assert second.stdout == first.stdout
    (store,) = store_cache.cached_stores(tmp_path)
    assert store.size_bytes > store.path.stat().st_size, "the size counts the kept reports"
    cleared = runner.invoke(cli, ["cache", "clear", "--cache-dir", str(tmp_path)])
    assert cleared.exit_code == 0
    assert not list(tmp_path.glob("*.reports"))
