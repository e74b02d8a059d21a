"""A trace per cycle of the PyTorch profiler's schedule (tracedoc.ingest.cycles): the traces one process wrote at
different times are one rank, judged by its last cycle, the earlier ones named as set aside. Real recordings:
samples/conv-step-cycles (tensorboard_trace_handler's names), tests/data/profiler-cycles-step (named by step) and
tests/data/ddp-cpu-cycles (two ranks over gloo, two cycles each)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import time
from pathlib import Path

from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.ingest import discover
from tracedoc.ingest.chrome import kineto

CONV = SAMPLES / "conv-step-cycles"
CONV_FIRST, CONV_SECOND, CONV_LAST = sorted(CONV.glob("*.pt.trace.json.gz"))  # the names sort by the time written
BY_STEP = ROOT / "tests" / "data" / "profiler-cycles-step"
DDP = ROOT / "tests" / "data" / "ddp-cpu-cycles"


def _set_aside(report) -> list[tuple[str, str, int | None]]:
    return [(Path(r["path"]).name, Path(r["judged"]).name, r["pid"]) for r in report.summary.get("set_aside", [])]


def test_the_tutorials_traces_are_one_rank_judged_by_its_last_cycle(tmp_path: Path) -> None:
    """Three cycles of one process: one input, rank 0, whose report is that of the last trace given alone, with the
    two earlier traces named. Before, the folder was three ranks."""
    report = analyze(CONV, cache_dir=tmp_path / "dir")
    alone = analyze(CONV_LAST, cache_dir=tmp_path / "alone")
    assert [(Path(i.path).name, i.rank) for i in report.inputs] == [(CONV_LAST.name, 0)]
    assert report.summary["ranks"] == 1
    assert _set_aside(report) == [(CONV_FIRST.name, CONV_LAST.name, 476), (CONV_SECOND.name, CONV_LAST.name, 476)]
    assert "set_aside" not in alone.summary
    judged = report.to_dict()
    del judged["summary"]["set_aside"]
    assert judged == alone.to_dict() | {"inputs": judged["inputs"]}


def test_the_set_aside_traces_are_said_under_the_headline() -> None:
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", str(CONV)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert (f"Judged the last of the 3 traces process 476 wrote, one per cycle of the profiler's schedule "
            f"({CONV_LAST.name}); the 2 earlier ones are set aside ({CONV_FIRST.name}, {CONV_SECOND.name}): name one "
            "to judge it.") in result.output
    assert "1 input · 1 rank" in result.output
    as_json = CliRunner().invoke(cli, ["analyze", "--no-cache", "--format", "json", str(CONV)])
    assert as_json.exit_code == 0
    assert "the 2 earlier ones are set aside" in as_json.stderr


def test_a_cached_report_of_the_last_trace_alone_does_not_say_the_others(tmp_path: Path) -> None:
    """The folder and its last trace share one store, but not one kept report: each says what it was given."""
    cache = tmp_path / "cache"
    first = analyze(CONV, cache_dir=cache)
    alone = analyze(CONV_LAST, cache_dir=cache)
    again = analyze(CONV, cache_dir=cache)
    assert len(list(cache.glob("*.duckdb"))) == 1
    assert "set_aside" not in alone.summary
    assert _set_aside(again) == _set_aside(first) != []


def test_cycles_named_by_step_are_ordered_by_when_they_ran() -> None:
    """The recipe's handler names a trace by its last step: trace_12 sorts before trace_6, and is the later one."""
    report = analyze(BY_STEP, use_cache=False)
    assert [Path(i.path).name for i in report.inputs] == ["trace_12.json.gz"]
    assert _set_aside(report) == [("trace_6.json.gz", "trace_12.json.gz", 523)]
    assert sorted({row["step"] for row in report.attribution if row.get("step") is not None}) == [9, 10, 11]


def test_each_rank_of_a_job_is_judged_by_its_last_cycle() -> None:
    """Two DDP ranks, two cycles each: before, 'two traces claim rank 0' (exit 2); now two ranks, each its last."""
    report = analyze(DDP, use_cache=False)
    last = {0: "vm_596.1796246843911445733.pt.trace.json.gz", 1: "vm_597.1796246843911169131.pt.trace.json.gz"}
    assert {i.rank: Path(i.path).name for i in report.inputs} == last
    assert sorted(_set_aside(report)) == [("vm_596.1796246843408945997.pt.trace.json.gz", last[0], 596),
                                          ("vm_597.1796246843405547859.pt.trace.json.gz", last[1], 597)]
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", str(DDP)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert ("Judged the last of the traces each of 2 processes wrote, one per cycle of the profiler's schedule; 2 "
            "earlier traces are set aside") in result.output


def test_copies_of_one_trace_are_not_cycles(tmp_path: Path) -> None:
    """Two files that started at the same moment are copies, not cycles: both are read, as before."""
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copyfile(CONV_LAST, tmp_path / name)
    assert [i.path.name for i in discover([tmp_path])] == ["a.json.gz", "b.json.gz"]


def test_copies_of_the_last_trace_leave_the_earlier_cycles_set_aside(tmp_path: Path) -> None:
    """Two copies of the middle cycle among the three: the first two cycles are set aside, the last judged."""
    for name, source in (("a.json.gz", CONV_FIRST), ("b.json.gz", CONV_SECOND), ("b2.json.gz", CONV_SECOND),
                         ("c.json.gz", CONV_LAST)):
        shutil.copyfile(source, tmp_path / name)
    found = discover([tmp_path])
    assert [(i.path.name, [p.name for p in i.earlier]) for i in found] == [("c.json.gz", ["a.json.gz", "b.json.gz",
                                                                                          "b2.json.gz"])]


def test_standard_input_may_hold_the_last_cycle(tmp_path: Path, monkeypatch) -> None:
    """The last cycle piped in beside an earlier one of its folder: the piped copy is judged (and lives until it is
    read), the file set aside."""
    shutil.copyfile(BY_STEP / "trace_6.json.gz", tmp_path / "trace_6.json.gz")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", "--format", "json", "-", "trace_6.json.gz"],
                                input=(BY_STEP / "trace_12.json.gz").read_bytes())
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [i["path"] for i in data["inputs"]] == ["-"]
    assert data["summary"]["set_aside"] == [{"path": "trace_6.json.gz", "judged": "-", "pid": 523}]


def test_a_last_cycle_cut_short_names_the_one_before(tmp_path: Path) -> None:
    """The last trace cut short (its first 3 MB kept: a job killed as it wrote) is an input error, exit 2, that names
    the cycle before it, which reads."""
    for source in (CONV_FIRST, CONV_SECOND):
        shutil.copyfile(source, tmp_path / source.name)
    (tmp_path / CONV_LAST.name).write_bytes(gzip.compress(gzip.decompress(CONV_LAST.read_bytes())[:3_000_000]))
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"Error: {tmp_path / CONV_LAST.name}: truncated")
    assert result.stderr.rstrip().endswith(f"; the cycle before it, {tmp_path / CONV_SECOND.name}, can be judged "
                                           "instead: name it")
    assert CliRunner().invoke(cli, ["analyze", "--no-cache", str(tmp_path / CONV_SECOND.name)]).exit_code == 0


def test_processes_of_one_pid_on_two_hosts_or_in_two_folders_are_not_cycles(tmp_path: Path) -> None:
    """Two hosts may run processes of one pid: the worker tensorboard_trace_handler names a file by (host_pid), or
    the folder, tells them apart."""
    (tmp_path / "hosts").mkdir()
    shutil.copyfile(CONV_FIRST, tmp_path / "hosts" / "hostA_476.1796246817917751109.pt.trace.json.gz")
    shutil.copyfile(CONV_LAST, tmp_path / "hosts" / "hostB_476.1796246819355348514.pt.trace.json.gz")
    assert [i.earlier for i in discover([tmp_path / "hosts"])] == [(), ()]
    for folder, source in (("a", CONV_FIRST), ("b", CONV_LAST)):
        (tmp_path / folder).mkdir()
        shutil.copyfile(source, tmp_path / folder / "trace.json.gz")
    assert [i.earlier for i in discover([tmp_path / "a", tmp_path / "b"])] == [(), ()]


def test_processes_told_apart_by_the_rank_in_their_names(tmp_path: Path) -> None:
    """Two hosts may run processes of one pid: traces whose names give different ranks are not cycles of one."""
    shutil.copyfile(CONV_FIRST, tmp_path / "rank0.trace.json.gz")
    shutil.copyfile(CONV_LAST, tmp_path / "rank1.trace.json.gz")
    found = discover([tmp_path])
    assert [(i.path.name, i.earlier) for i in found] == [("rank0.trace.json.gz", ()), ("rank1.trace.json.gz", ())]


def test_what_the_first_bytes_tell(tmp_path: Path) -> None:
    """The pid and start of the first host event, and the rank in distributedInfo before the events; a trace written
    with its keys in another order (re-saved by json.dump with sorted keys) tells nothing, and is read as before."""
    head = gzip.decompress((DDP / "vm_597.1796246843405547859.pt.trace.json.gz").read_bytes())[:1 << 20]
    told = kineto.recording(head)
    assert told is not None and (told.pid, told.rank, told.start_us) == (597, 1, 5389817216839.861)
    resaved = json.dumps(json.loads(gzip.decompress(CONV_LAST.read_bytes())), sort_keys=True).encode()
    assert kineto.recording(resaved[:1 << 20]) is None


def test_a_hostile_head_is_read_in_bounded_time() -> None:
    """1 MiB of event starts whose names never end, and of header ranks that never come: linear, not quadratic."""
    for head in (b'{"traceEvents": [' + b'{"ph": "X", "cat": "cpu_op", "name": "' + b"\\\"" * (1 << 19),
                 b'{"distributedInfo": {' + b'"r": 1, ' * (1 << 17) + b'"traceEvents": []}',
                 b'{"traceEvents": [' + b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": ' * 20000):
        started = time.process_time()
        assert kineto.recording(head) is None
        assert time.process_time() - started < 1.0


def test_distributed_run_sets_the_same_cycles_aside(tmp_path: Path) -> None:
    """--workers reads the inputs discovery kept: the same set-aside traces in its report."""
    result = CliRunner().invoke(cli, ["analyze", "--format", "json", "--cache-dir", str(tmp_path), "--workers", "1",
                                      str(BY_STEP)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [Path(i["path"]).name for i in data["inputs"]] == ["trace_12.json.gz"]
    assert [Path(r["path"]).name for r in data["summary"]["set_aside"]] == ["trace_6.json.gz"]
    assert re.search(r"trace_6\.json\.gz\): name one to judge it", result.stderr)
