"""``tracedoc.api.analyze`` does what `tracedoc analyze` does: a saved report rendered again, the what-if, the
limits as a value that reaches every store of the run, and the paths the command chooses among (here, Dask,
Perfetto) refused or taken by the library itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc.api import analyze
from tracedoc.cli import cli
from tracedoc.errors import InputError
from tracedoc.ingest import discover
from tracedoc.limits import MEMORY_LIMIT_ENV_VAR, Limits
from tracedoc.options import AnalysisOptions
from tracedoc.pipeline import input_files, open_store
from tracedoc.scale.spec import ClusterSpec

REPORTS = ROOT / "reports"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", ["decode-eager", "ddp-straggler", "gemm-ladder-ncu", "hang-2rank-stuck-notiming"])
def test_a_saved_report_renders_again_as_the_gallery_shows_it(name: str) -> None:
    """`tracedoc analyze report.json --format md` re-renders the saved report: the gallery's Markdown, byte for
    byte, with nothing ingested."""
    code, out, err = run("analyze", str(REPORTS / f"{name}.json"), "--format", "md")
    assert code == 0, err
    assert out == (REPORTS / f"{name}.md").read_text()


def test_a_saved_report_keeps_its_verdicts_for_fail_on_and_what_if() -> None:
    saved = REPORTS / "decode-eager.json"
    assert run("analyze", str(saved), "--fail-on", "warning")[0] == 1
    code, out, err = run("analyze", str(saved), "--what-if", "launch-bound")
    assert code == 0, err
    assert out.startswith("launch-bound (#1): If fixed: step")


@pytest.mark.parametrize("extra, named", [(("--set", "launch-bound.min_kernels=1"), "--set"),
                                          (("--format", "perfetto"), "--format perfetto"),
                                          (("--step-range", "step"), "--step-range")])
def test_what_a_saved_report_cannot_do_is_one_line(extra: tuple[str, ...], named: str) -> None:
    code, _, err = run("analyze", str(REPORTS / "decode-eager.json"), *extra)
    assert code == 2 and err.count("\n") == 1, err
    assert "a saved report is rendered as it is" in err and named in err


def test_the_api_adds_the_what_if_asked_for() -> None:
    report = analyze(REPORTS / "decode-eager.json", what_if="launch-bound")
    assert any(w["finding"] == 1 for w in report.what_if)
    with pytest.raises(InputError, match="no such rule"):
        analyze(REPORTS / "decode-eager.json", what_if="no-such-rule")


def test_a_perfetto_trace_needs_one_store() -> None:
    with pytest.raises(InputError, match="not with --workers"):
        analyze(SAMPLES / "ddp-straggler", use_cache=False, cluster=ClusterSpec(workers=1),
                perfetto=Path("trace.perfetto.json"))


def test_the_api_writes_the_perfetto_trace_beside_the_report(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "trace.perfetto.json"
    report = analyze(SAMPLES / "decode-eager", use_cache=False, perfetto=out)
    events = json.loads(out.read_text())
    assert report.findings and any(e["name"] == "process_name" for e in events)
    assert any(e.get("cat") == "tracedoc.finding" or "launch-bound" in json.dumps(e) for e in events)


def test_limits_given_as_a_value_reach_duckdb_whatever_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory cap travels with the call: the environment is not read when limits are given."""
    monkeypatch.setenv(MEMORY_LIMIT_ENV_VAR, "not a size")
    limits = Limits(memory_bytes=96 << 20)
    store, _ = open_store(input_files(SAMPLES / "input-slow", limits), None, limits=limits)
    try:
        assert store.limits == limits
        assert store.scalar("SELECT current_setting('memory_limit')").replace(" ", "") in {"96.0MiB", "100.6MB"}
    finally:
        store.close()


def test_the_limits_go_with_each_ranks_task(tmp_path: Path) -> None:
    """A distributed run's tasks carry the run's limits to the workers (a remote worker's environment is not
    this process's)."""
    from tracedoc.scale.job import _tasks

    limits = Limits(memory_bytes=1 << 30, max_inflate_bytes=1 << 31)
    options = AnalysisOptions(limits=limits, step_range="ProfilerStep")
    tasks = _tasks(discover([SAMPLES / "ddp-straggler"]), tmp_path, options)
    assert len(tasks) >= 2 and all(t.options == options for t in tasks)


def test_limits_from_the_environment_and_the_options() -> None:
    env = {MEMORY_LIMIT_ENV_VAR: "2G", "TRACEDOC_MAX_INFLATE_BYTES": "lots"}
    assert Limits.from_env(env, max_inflate_bytes=5) == Limits(memory_bytes=2 << 30, max_inflate_bytes=5)
    with pytest.raises(Exception, match="TRACEDOC_MAX_INFLATE_BYTES"):
        Limits.from_env(env)
