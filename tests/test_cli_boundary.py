"""The command line's boundary: every failure ends as one line and its exit code (3 internal, 130 interrupted, 2 bad
input or usage), --set and --out are checked before any work, and the Python API takes one path as it is."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import tracedoc
from tests.conftest import ROOT, SAMPLES
from tests.test_cache import tiled_trace, wait_for
from tracedoc import strict_json
from tracedoc.cli import cli
from tracedoc.errors import InputError

EAGER = SAMPLES / "decode-eager"
HINT = "(run with --debug for the traceback)"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _interruptible() -> None:
    """In a child about to be sent SIGINT: the disposition a terminal's Ctrl-C meets, whatever the test runner's (a
    runner started in the background by a shell ignores SIGINT, and its children would inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _boom(*args: object, **kwargs: object) -> None:
    raise ZeroDivisionError("division by zero")


# Each command with an internal function it calls first, so that function's failure is "nobody anticipated it".
COMMANDS = {
    "analyze": ("tracedoc.cli.analyze.run_analysis", ["analyze", str(EAGER)]),
    "rules": ("tracedoc.cli.rules.load_rules", ["rules"]),
    "health": ("tracedoc.cli.health.load_rules", ["health"]),
    "serve": ("tracedoc.cli.options.load_rules", ["serve", str(EAGER), "--no-show"]),
    "workload": ("tracedoc.workload.missing_modules", ["workload", "list"]),
    "cache": ("tracedoc.cli.cache.cached_stores", ["cache", "list"]),
}


@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
def test_an_unexpected_error_is_one_line_and_exit_3(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target, args = COMMANDS[command]
    monkeypatch.setattr(target, _boom)
    code, _, err = run(*args)
    assert code == 3, err
    assert err == f"internal error: ZeroDivisionError: division by zero {HINT}\n"


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tracedoc.cli.analyze.run_analysis", _boom)
    code, _, err = run("--debug", "analyze", str(EAGER))
    assert code == 3 and err.startswith("Traceback") and "in _boom" in err
    assert err.endswith(f"internal error: ZeroDivisionError: division by zero {HINT}\n")
    monkeypatch.setenv("TRACEDOC_DEBUG", "1")
    code, _, err = run("analyze", str(EAGER))
    assert code == 3 and "Traceback" in err


def test_debug_keeps_the_exit_code_of_bad_input(tmp_path: Path) -> None:
    code, _, err = run("--debug", "analyze", str(tmp_path / "nope.json"))
    assert code == 2 and "Traceback" in err and err.strip().endswith("no such file or directory")
    code, _, err = run("analyze", str(tmp_path / "nope.json"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _interrupt_kinds() -> dict[str, BaseException]:
    wrapped = InputError("trace.json: cannot read")
    wrapped.__context__ = RuntimeError("Query interrupted")
    return {"KeyboardInterrupt": KeyboardInterrupt(), "DuckDB's RuntimeError": RuntimeError("Query interrupted"),
            "duckdb.InterruptException": duckdb.InterruptException("INTERRUPT Error: Interrupted!"),
            "wrapped in an input error": wrapped}


@pytest.mark.parametrize("kind", _interrupt_kinds())
def test_every_form_of_ctrl_c_is_exit_130(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    exc = _interrupt_kinds()[kind]

    def interrupted(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr("tracedoc.cli.analyze.run_analysis", interrupted)
    code, _, err = run("analyze", str(EAGER))
    assert (code, err) == (130, "interrupted\n")


def test_ctrl_c_during_ingest(tmp_path: Path) -> None:
    """SIGINT while DuckDB reads a large trace: one line, exit 130, and no partial store left behind."""
    big = tiled_trace(tmp_path / "big.json", copies=12)
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-m", "tracedoc", "analyze", str(big), "--cache-dir", str(cache)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible)
    wait_for(cache, "*.partial-*.duckdb", proc)
    time.sleep(0.2)  # into the JSON reader
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (130, "", "interrupted\n")
    assert list(cache.iterdir()) == []


UNKNOWN_SETTINGS = {
    "unknown threshold": ("launch-bound.min_idle=95",
                          "rule launch-bound has no threshold 'min_idle' (its thresholds: min_idle_pct, "
                          "min_tiny_kernel_pct, min_kernels)"),
    "unknown rule": ("launch-bond.min_idle_pct=95", "no rule 'launch-bond' (did you mean launch-bound? rules: "),
}


@pytest.mark.parametrize("command", ["analyze", "serve", "rules"])
@pytest.mark.parametrize("case", UNKNOWN_SETTINGS, ids=list(UNKNOWN_SETTINGS))
def test_set_of_an_unknown_rule_or_threshold_is_exit_2(command: str, case: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    setting, message = UNKNOWN_SETTINGS[case]
    monkeypatch.setattr("tracedoc.dashboard.app.serve", lambda *args, **kwargs: None)  # never a server here
    args = {"analyze": ["analyze", str(EAGER)], "serve": ["serve", str(EAGER), "--no-show"], "rules": ["rules"]}
    cache = ["--cache-dir", str(tmp_path)] if command != "rules" else []
    code, _, err = run(*args[command], "--set", setting, *cache)
    assert code == 2
    assert err.startswith(f"Error: --set {setting}: {message}") and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir()), "checked before ingesting anything"


def test_set_knows_the_rules_of_a_rules_folder(tmp_path: Path) -> None:
    (tmp_path / "many-kernels.yaml").write_text(
        "id: many-kernels\ntitle: t\nseverity: info\nreads: gpu.launch\nview: gpu_launch_stats\n"
        "when: kernels_per_step > $max_kernels\nthresholds: {max_kernels: 5000}\nimpact_ms: 0\n"
        "evidence: [{name: k, value: kernels_per_step}]\nmessage: m\nfix: f\nreferences: [x]\n")
    code, out, _ = run("rules", "many-kernels", "--rules", str(tmp_path), "--set", "many-kernels.max_kernels=10")
    assert code == 0 and "threshold max_kernels = 10  (set; default 5000)" in out
    code, _, err = run("rules", "--set", "many-kernels.max_kernels=10")
    assert code == 2 and "no rule 'many-kernels'" in err


def test_rules_show_when_a_rule_becomes_critical() -> None:
    code, out, _ = run("rules", "launch-bound")
    assert code == 0
    assert "severity: warning; critical when the saving is at least 25 % of wall time" in out
    assert "threshold min_idle_pct = 15" in out
    code, out, _ = run("rules", "compute-bound")
    assert code == 0 and "critical when" not in out  # compute-bound has no critical_above_pct


@pytest.mark.parametrize("name, starts", [("report.htm", "<!DOCTYPE html>"), ("report.markdown", "# tracedoc report"),
                                           ("REPORT.JSON", "{")])
def test_out_extension_aliases_write_a_file(name: str, starts: str, tmp_path: Path) -> None:
    out = tmp_path / name
    code, _, err = run("analyze", str(SAMPLES / "decode-compile"), "--out", str(out))
    assert code == 0, err
    assert out.is_file() and out.read_text().startswith(starts)


def test_out_with_an_unknown_extension_is_exit_2(tmp_path: Path) -> None:
    code, _, err = run("analyze", str(EAGER), "--out", str(tmp_path / "report.pdf"))
    assert code == 2
    assert err == f"Error: --out {tmp_path / 'report.pdf'}: unknown extension; use .txt .json .md .html " \
                  ".perfetto.json or a directory\n"
    assert list(tmp_path.iterdir()) == []


def test_out_directories(tmp_path: Path) -> None:
    """A trailing slash or an existing directory takes the report inside, whatever the name looks like."""
    sample = str(SAMPLES / "decode-compile")
    assert run("analyze", sample, "--out", f"{tmp_path / 'reports.v2'}/", "--format", "json")[0] == 0
    assert json.loads((tmp_path / "reports.v2" / "tracedoc-report.json").read_text())["schema"] == 1
    (tmp_path / "old.html").mkdir()
    assert run("analyze", sample, "--out", str(tmp_path / "old.html"), "--format", "md")[0] == 0
    assert (tmp_path / "old.html" / "tracedoc-report.md").is_file()


def test_analyze_passes_a_dash_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tracedoc analyze -` hands Path('-') (standard input) to the API instead of refusing it."""
    seen: list[object] = []

    def analyze(paths: object, *args: object, **kwargs: object) -> None:
        seen.append(paths)
        raise InputError("stop here")

    monkeypatch.setattr("tracedoc.cli.analyze.run_analysis", analyze)
    assert run("analyze", "-")[0] == 2
    assert seen == [(Path("-"),)]


@pytest.mark.parametrize("given", [str(EAGER), EAGER], ids=["str", "Path"])
def test_api_takes_one_path_as_it_is(given: str | Path) -> None:
    report = tracedoc.analyze(given)
    assert [i.path for i in report.inputs] == [str(EAGER / "trace.json.gz")]
    assert report.findings[0].rule == "launch-bound"


def test_a_deeply_nested_saved_report_given_to_serve_is_bad_input(tmp_path: Path) -> None:
    """A copy of the JSON report of samples/decode-eager whose summary holds 100,000 nested arrays: serve's loader
    refuses it with one line instead of a RecursionError."""
    from tracedoc.dashboard.target import resolve

    report = tracedoc.analyze(EAGER).to_json(indent=None)
    deep = report.replace('"summary": {', '"summary": {"nested": ' + "[" * 100_000 + "]" * 100_000 + ", ", 1)
    path = tmp_path / "report.json"
    path.write_text(deep)
    with pytest.raises(InputError, match="not a tracedoc JSON report"):
        resolve([path])


def test_one_line_errors_carry_no_control_characters(tmp_path: Path) -> None:
    """A file whose name holds an escape sequence and whose content is not a trace: the error names it inertly."""
    path = tmp_path / "evil\x1b[31m\x07name.json"
    path.write_bytes(b"\x1b[2J not json")
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert "name.json" in result.stderr


@pytest.mark.parametrize("args", [["analyze", str(SAMPLES / "decode-eager")],
                                  ["diff", str(SAMPLES / "decode-eager"), str(SAMPLES / "decode-compile")]],
                         ids=["analyze", "diff"])
def test_output_closed_early_is_141_and_quiet(args: list[str]) -> None:
    """`tracedoc analyze … | head -1`: the reader goes away (here before the first line, so that every write meets a
    closed pipe). Exit 141, as a shell reports SIGPIPE, and nothing on stderr; never 1, which means a finding at
    --fail-on."""
    proc = subprocess.Popen([sys.executable, "-m", "tracedoc", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141 and not err.strip(), err.decode()


# --- Ctrl-C from the first instruction on ------------------------------------------------------------------------

_INTERRUPTED_WHILE_IMPORTING = """
import builtins, os, signal, sys
real_import = builtins.__import__

def hooked(name, *args, **kwargs):
    if name == "click":
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)

builtins.__import__ = hooked
sys.argv = ["tracedoc", "rules"]
from tracedoc.console import main
main()
"""


def test_ctrl_c_while_the_command_line_imports_is_one_line_and_130() -> None:
    """SIGINT while the command line imports click (the process sends it to itself from an import hook, so the
    moment is exact): 'interrupted' and exit 130, as later on; it was a KeyboardInterrupt traceback."""
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_WHILE_IMPORTING], capture_output=True, text=True,
                          timeout=60, preexec_fn=_interruptible)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "interrupted\n")


def test_the_console_script_and_python_m_start_through_the_guarded_entry() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["tracedoc"] == "tracedoc.console:main"
    assert "from tracedoc.console import main" in (ROOT / "tracedoc" / "__main__.py").read_text()


def test_ctrl_c_while_parsing_the_command_line_is_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before a command runs (click's parsing), Ctrl-C is the same one line, not click's 'Aborted!' and exit 1."""
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("click.Group.parse_args", interrupted)
    assert run("rules") == (130, "", "interrupted\n")


# --- Usage errors: one line ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "needle"), [
    (["analyze", "--nope"], "--nope"), (["nope"], "'nope'"), (["analyze"], "PATHS"), (["diff", "before"], "AFTER"),
    (["analyze", "x.json", "--format", "pdf"], "'pdf'"), (["cache", "nope"], "'nope'"), (["--nope"], "--nope"),
], ids=["option", "command", "argument", "second-argument", "choice", "subcommand", "group-option"])
def test_usage_errors_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    """click prints a usage error in three lines (the usage, a hint, the error): here it is one, with the hint."""
    code, out, err = run(*args)
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1 and needle in err and "--help)" in err, err


def test_no_command_still_shows_the_help() -> None:
    result = CliRunner().invoke(cli, [])
    assert "Usage: " in result.output and "Commands:" in result.output


# --- Non-finite numbers: refused at the option, never written as JSON --------------------------------------------

@pytest.mark.parametrize("option", [["--per-step-items", "inf"], ["--per-step-items", "nan"],
                                    ["--per-step-items", "1e300"], ["--fail-on-regression", "nan"],
                                    ["--set", "launch-bound.min_idle_pct=inf"]])
def test_non_finite_numbers_are_refused_at_the_option(option: list[str]) -> None:
    """`diff --per-step-items inf` wrote "Infinity" into the JSON diff; every such option is one line, exit 2."""
    code, out, err = run("diff", str(EAGER), str(SAMPLES / "decode-cudagraph"), "--format", "json", *option)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert option[0] in err


def test_the_json_writers_refuse_nan_and_infinity_anywhere() -> None:
    """The saved report of samples/decode-eager (reports/decode-eager.json) with a finding's saving made NaN and an
    attribution row's time infinite: writing it as JSON names where, instead of writing NaN or Infinity."""
    from tracedoc.report import Report

    report = Report.from_dict(json.loads((ROOT / "reports" / "decode-eager.json").read_text()))
    report.findings[1].impact_ms = float("nan")
    with pytest.raises(strict_json.BadJson, match=r"findings\[1\]\.impact_ms is not a finite number"):
        report.to_json()
    report.findings[1].impact_ms = 1.0
    report.attribution[2]["ms"] = float("-inf")
    with pytest.raises(strict_json.BadJson, match=r"attribution\[2\]\.ms"):
        report.to_json()
    assert strict_json.dumps({"a": [1, 2.5, None]}) == '{"a": [1, 2.5, null]}'


def test_an_error_after_ctrl_c_is_an_interruption_not_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB reading Arrow batches from a Python generator when Ctrl-C came reports 'Unknown error': once Ctrl-C
    came during the command, any error is the interruption (exit 130), never 'malformed' input (exit 2)."""
    from tracedoc import interrupts
    from tracedoc.cli.errors import is_interrupt
    from tracedoc.errors import InputError

    malformed = InputError("run.sqlite.xz: malformed Nsight Systems export (Invalid Input Error: reading the stream "
                           "registered as '_nsys_in' failed: Unknown error: .)")
    monkeypatch.setattr(interrupts, "_seen", False)
    assert not is_interrupt(malformed)
    with pytest.raises(KeyboardInterrupt):
        interrupts.handler(2, None)
    assert is_interrupt(malformed)
