"""Hostile inputs that once escaped the contract or ran unbounded: each is built here from a real sample (the
builders say what was changed), run through the command line in a child process as a user would, and held to
the outcome: exit code 0 or 2, one line on stderr when 2, no raw control characters out, and work bounded by the
child's CPU time (never wall time, which a loaded machine stretches) or by counts.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.hostile_report import hostile_report

_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    cpu_s: float  # user + system CPU time of the child


def tracedoc(*args: str, cpu_limit_s: int = 120) -> Outcome:
    """``python -m tracedoc ARGS`` in a child process (stopped by RLIMIT_CPU past ``cpu_limit_s``)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit_s, cpu_limit_s + 5))

    env = {**os.environ, "TRACEDOC_MEMORY_LIMIT": os.environ.get("TRACEDOC_MEMORY_LIMIT", "2G")}
    env.pop("TRACEDOC_DEBUG", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "tracedoc", *args], capture_output=True, cwd=ROOT, env=env,
                          preexec_fn=limit, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Outcome(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"),
                   cpu)


def assert_refused(outcome: Outcome, *needles: str) -> None:
    """Exit code 2 and exactly one line on stderr, without a traceback, holding every needle."""
    assert outcome.code == 2, (outcome.code, outcome.err[-2000:])
    assert outcome.err.count("\n") == 1 and outcome.err.endswith("\n"), outcome.err[-2000:]
    assert "Traceback" not in outcome.err and not _RAW_CONTROL.search(outcome.err)
    for needle in needles:
        assert needle in outcome.err, (needle, outcome.err)


# 1. A saved report is as untrusted as a trace.

@pytest.mark.parametrize("fmt", ["text", "md", "json", "html"])
def test_saved_report_with_escapes_in_every_string_rerendered(tmp_path: Path, fmt: str) -> None:
    """reports/ddp-straggler.json with ESC sequences, an OSC 8 hyperlink, BEL, a bidi override, a C1 CSI and
    "\\r\\n# injected heading" appended to every string: re-rendered in every format, nothing raw gets out, no
    heading is injected, and the report's words are still there."""
    saved = hostile_report(tmp_path / "report.json")
    outcome = tracedoc("analyze", str(saved), "--format", fmt)
    assert outcome.code == 0, outcome.err
    assert not _RAW_CONTROL.search(outcome.out), _RAW_CONTROL.search(outcome.out)
    assert not re.search(r"^#+ injected", outcome.out, re.MULTILINE)  # a Markdown heading of its own
    assert "straggler-rank" in outcome.out
    assert "\\x1b[2J" in outcome.out or "\\\\x1b[2J" in outcome.out  # shown, not acted on


def test_saved_reports_with_escapes_diffed(tmp_path: Path) -> None:
    """Two copies of the poisoned report given to `tracedoc diff`: the diff's text carries no raw control
    character either."""
    saved = hostile_report(tmp_path / "report.json")
    outcome = tracedoc("diff", str(saved), str(saved), "--format", "text")
    assert outcome.code == 0, outcome.err
    assert not _RAW_CONTROL.search(outcome.out)
