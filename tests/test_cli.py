"""The command line as a user meets it: outputs, exit codes, and one-line errors on bad input."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc.causes import WINDOW_CAUSES
from tracedoc.cli import cli

EAGER = SAMPLES / "decode-eager" / "trace.json.gz"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_text_report_ranks_the_top_finding_first() -> None:
    code, out, _ = run("analyze", str(EAGER))
    assert code == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#  severity"))
    above = " ".join(" ".join(lines[:header]).split())  # the headline and the window, wrapped to the terminal
    assert "Judged: 4 steps (found by ProfilerStep#N annotations)." in above
    assert "launch-bound" in lines[header + 1]  # the first row of the findings table
    assert "CUDA graph" in out


def test_json_report_follows_the_contract() -> None:
    code, out, _ = run("analyze", str(EAGER), "--format", "json")
    report = json.loads(out)
    assert code == 0
    assert (report["tracedoc"], report["schema"]) == ("0.1.0", 1)
    assert set(report) == {"tracedoc", "schema", "inputs", "summary", "window", "findings", "attribution", "what_if",
                           "efficiency", "metrics"}  # no "operators": the trace holds no shapes
    unavailable = report["efficiency"][0]  # the rank over its steady steps: null figures, and why
    assert unavailable["step"] is None and unavailable["mfu_pct"] is None and unavailable["mbu_pct"] is None
    assert "record_shapes=True" in unavailable["note"]  # the advice, where the Efficiency section shows it
    # no shapes: no MFU; the profiled step and the estimate without the profiler (efficiency.observer) follow
    assert report["summary"]["efficiency"].startswith("MFU unavailable: the trace has no operator shapes; step ")
    window = report["window"]
    assert (window["kind"], window["steps"], window["step_count"], window["warmup_steps"]) == (
        "steps", "ProfilerStep#N annotations", 4, 0)
    assert window["end_ns"] - window["start_ns"] == pytest.approx(report["summary"]["wall_ms"] * 1e6, abs=1e3)
    assert [r["rank"] for r in window["ranks"]] == [0]
    assert report["inputs"][0]["format"] == "torch" and report["inputs"][0]["events"] > 10_000
    assert set(report["summary"]) == {"wall_ms", "gpu_busy_pct", "ranks", "basis", "computing_pct",
                                      "communication_pct", "waiting_pct", "waiting_for_rank", "efficiency"}
    top = report["findings"][0]
    assert top["rule"] == "launch-bound" and top["scope"] == {"rank": 0, "device": 0}
    assert set(top) == {"rule", "severity", "title", "message", "impact_ms", "impact_pct", "scope", "evidence",
                        "fix", "references", "drawn_from"}
    assert top["drawn_from"] == ["launch_overhead"]
    assert all(set(a) == {"rank", "device", "step", "cause", "detail", "ms"} for a in report["attribution"])
    judged = [a for a in report["attribution"] if a["cause"] in WINDOW_CAUSES]
    assert sum(a["ms"] for a in judged) == pytest.approx(report["summary"]["wall_ms"], abs=0.01)
    assert {a["cause"] for a in report["attribution"]} - set(WINDOW_CAUSES) <= {"teardown"}
    assert report["what_if"][0]["rule"] == "launch-bound"
    assert all(set(e) == {"name", "value", "unit"} for e in top["evidence"])
    impacts = [f["impact_ms"] for f in report["findings"]]
    assert impacts == sorted(impacts, reverse=True)


def test_out_directory_and_file(tmp_path: Path) -> None:
    assert run("analyze", str(EAGER), "--format", "md", "--out", str(tmp_path / "reports"))[0] == 0
    assert (tmp_path / "reports" / "tracedoc-report.md").read_text().startswith("# tracedoc report")
    assert run("analyze", str(EAGER), "--out", str(tmp_path / "r.json"))[0] == 0
    assert json.loads((tmp_path / "r.json").read_text())["findings"]
    # an explicit format wins over the extension
    assert run("analyze", str(EAGER), "--out", str(tmp_path / "r.json"), "--format", "md")[0] == 0
    assert (tmp_path / "r.json").read_text().startswith("# tracedoc report")
    assert run("analyze", str(EAGER), "--format", "perfetto", "--out", str(tmp_path / "trace.json"))[0] == 0
    events = json.loads((tmp_path / "trace.json").read_text())  # the Chrome JSON trace: an array of events
    assert sum(e["cat"] == "kernel" for e in events) == 4608
    code, _, err = run("analyze", str(EAGER), "--out", str(tmp_path / "r.data"))
    assert code == 2 and "unknown extension" in err


def test_fail_on_sets_the_exit_code() -> None:
    assert run("analyze", str(EAGER), "--fail-on", "warning")[0] == 1  # launch-bound is critical here
    assert run("analyze", str(SAMPLES / "decode-cudagraph"), "--fail-on", "warning")[0] == 0


def test_threshold_override_changes_the_verdict() -> None:
    assert run("analyze", str(EAGER), "--set", "launch-bound.min_idle_pct=95", "--fail-on", "warning")[0] == 0
    code, _, err = run("analyze", str(EAGER), "--set", "launch-bound=95")
    assert code == 2 and "RULE.THRESHOLD=NUMBER" in err


def test_directory_of_ranks() -> None:
    code, out, _ = run("analyze", str(SAMPLES / "ddp-no-overlap"), "--format", "json")
    report = json.loads(out)
    assert code == 0 and report["summary"]["ranks"] == 2
    assert {f["scope"]["rank"] for f in report["findings"] if f["rule"] == "low-comm-overlap"} == {0, 1}


def _truncated_json(tmp_path: Path) -> Path:
    path = tmp_path / "truncated.json"
    path.write_bytes(gzip.decompress(EAGER.read_bytes())[:200_000])
    return path


def _truncated_gzip(tmp_path: Path) -> Path:
    path = tmp_path / "truncated.json.gz"
    path.write_bytes(EAGER.read_bytes()[:100_000])
    return path


def _corrupt_gzip(tmp_path: Path) -> Path:
    data = bytearray(EAGER.read_bytes())
    data[5000:5200] = bytes(200)
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(bytes(data))
    return path


def _events_mangled(tmp_path: Path) -> Path:
    """A complete document whose events are not valid JSON (a cut in the middle of the array)."""
    text = gzip.decompress(EAGER.read_bytes()).decode()
    start = text.index('"traceEvents"')
    path = tmp_path / "mangled.json"
    path.write_text(text[: start + 200_000] + text[-300:])
    return path


BAD_INPUTS = {
    "empty file": (lambda p: (p / "empty.json").write_text("") and None or p / "empty.json", "empty file"),
    "truncated JSON": (_truncated_json, "truncated or malformed"),
    "truncated gzip": (_truncated_gzip, "truncated gzip"),
    "corrupt gzip": (_corrupt_gzip, "gzip"),
    "mangled events": (_events_mangled, "malformed trace JSON"),
    "JSON that is not a trace": (lambda p: (p / "x.json").write_text('{"a": [1, 2]}') and p / "x.json",
                                 "not a trace format"),
    "directory without traces": (lambda p: (p / "d").mkdir() or (p / "d" / "notes.md").write_text("hi") and p / "d",
                                 "no trace files"),
    "missing path": (lambda p: p / "nope.json", "no such file"),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    make, expected = BAD_INPUTS[case]
    path = make(tmp_path)
    cache = tmp_path / "cache"
    code, out, err = run("analyze", str(path), "--cache-dir", str(cache))
    assert code == 2, (out, err)
    assert expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not list(cache.glob("*.duckdb")), "a failed ingest must not leave a store behind"


def test_failed_ingest_leaves_no_store_that_a_later_run_takes_as_complete(tmp_path: Path) -> None:
    """Ranks ingested before a bad one are discarded with it; after fixing the input, analysis works."""
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    good = SAMPLES / "ddp-overlap" / "rank0.trace.json.gz"
    (ranks / "rank0.trace.json.gz").write_bytes(good.read_bytes())
    rank1 = gzip.decompress((SAMPLES / "ddp-overlap" / "rank1.trace.json.gz").read_bytes())
    (ranks / "rank1.trace.json").write_bytes(rank1[:-5000])
    cache = tmp_path / "cache"
    assert run("analyze", str(ranks), "--cache-dir", str(cache))[0] == 2
    assert list(cache.iterdir()) == []
    (ranks / "rank1.trace.json").unlink()
    assert run("analyze", str(ranks), "--cache-dir", str(cache))[0] == 0


def test_user_rule_from_the_readme_runs(tmp_path: Path) -> None:
    """The README's example rule, with its threshold lowered so it fires on the eager decode sample."""
    readme = (ROOT / "README.md").read_text()
    rule = re.search(r"```yaml\n(id: many-kernels.*?)```", readme, re.S).group(1)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "many-kernels.yaml").write_text(rule)
    code, out, _ = run("analyze", str(EAGER), "--rules", str(rules), "--set", "many-kernels.max_kernels=1000",
                       "--format", "json")
    fired = [f for f in json.loads(out)["findings"] if f["rule"] == "many-kernels"]
    assert code == 0 and fired and fired[0]["message"] == "Rank 0 launches 1152 kernels per step."
    code, out, _ = run("rules", "--rules", str(rules))
    assert "many-kernels" in out and str(rules) in out


def test_broken_user_rule_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "oops.yaml").write_text("id: oops\ntitle: x\n")
    code, _, err = run("analyze", str(EAGER), "--rules", str(tmp_path))
    assert code == 2 and "missing" in err and len(err.strip().splitlines()) == 1


def test_module_entry_point() -> None:
    result = subprocess.run([sys.executable, "-m", "tracedoc", "rules", "launch-bound"], capture_output=True,
                            text=True)
    assert result.returncode == 0 and "min_idle_pct" in result.stdout


def stderr_of_a_run(args: list[str], terminal: bool) -> bytes:
    """What `tracedoc ARGS` (a fresh process) writes on standard error: a pseudo-terminal, or a pipe."""
    command = [sys.executable, "-m", "tracedoc", *args]
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TERM")}
    if not terminal:
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True).stderr
    leader, follower = pty.openpty()
    written: list[bytes] = []

    def drain() -> None:  # read as it is written, so that the terminal's buffer never blocks the command
        with contextlib.suppress(OSError):  # the terminal closed: the command ended
            while chunk := os.read(leader, 4096):
                written.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        subprocess.run(command, cwd=ROOT, env={**env, "TERM": "xterm"}, stdout=subprocess.DEVNULL, stderr=follower,
                       check=True)
    finally:
        os.close(follower)
        reader.join(timeout=60)
        os.close(leader)
    return b"".join(written)


def test_progress_is_drawn_on_a_terminal_and_nothing_is_written_to_a_pipe() -> None:
    """The status line says what a run is doing where standard error is a terminal; piped, Rich would draw nothing
    and is not asked to (tracedoc.cli.stderr), so nothing is written there."""
    args = ["analyze", str(EAGER), "--no-cache", "--format", "json"]
    assert b"analysing" in stderr_of_a_run(args, terminal=True)
    assert stderr_of_a_run(args, terminal=False) == b""


def test_help_names_every_kind_of_input_and_health_offers_only_what_it_does() -> None:
    top = CliRunner().invoke(cli, ["--help"]).output
    assert all(kind in " ".join(top.split()) for kind in ("Nsight Systems", "Nsight Compute", "PyTorch profiler",
                                                          "flight-recorder", "health"))
    health = " ".join(CliRunner().invoke(cli, ["health", "--help"]).output.split())
    assert "perfetto" not in health and "launch-bound" not in health
    assert "power-capped.min_power_cap_pct" in health.replace("- ", "-")


def test_set_is_echoed_in_the_report(tmp_path: Path) -> None:
    """A threshold changed with --set is said under the text headline and kept in the JSON summary (only the ones
    set), and a saved report says it again when rendered; without --set there is no such field."""
    sample = str(SAMPLES / "decode-eager")
    runner = CliRunner()
    text = runner.invoke(cli, ["analyze", sample, "--no-cache", "--set", "launch-bound.min_idle_pct=25"],
                         env={"COLUMNS": "200"}).output
    assert "Thresholds set: launch-bound.min_idle_pct=25 (--set; the others are the rules' own)." in text
    saved = tmp_path / "report.json"
    result = runner.invoke(cli, ["analyze", sample, "--no-cache", "--set", "launch-bound.min_idle_pct=25",
                                 "--format", "json", "--out", str(saved)])
    assert result.exit_code == 0, result.output
    assert json.loads(saved.read_text())["summary"]["thresholds"] == {"launch-bound": {"min_idle_pct": 25.0}}
    again = runner.invoke(cli, ["analyze", str(saved), "--format", "md"]).output
    assert "Thresholds set: launch-bound.min\\_idle\\_pct=25" in again
    plain = runner.invoke(cli, ["analyze", sample, "--no-cache", "--format", "json"]).output
    assert "thresholds" not in json.loads(plain)["summary"]
