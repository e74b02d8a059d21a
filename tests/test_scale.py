"""The distributed path (tracedoc.scale on a Dask LocalCluster of 2 processes): the same report as one machine
on the bundled multi-rank samples (ranks analysed one per task, and several per task), a rank that cannot be read
left out and named without its batch-mates, a worker that dies, a scheduler that cannot be reached, progress, how
ranks are cut into batches, and that a run without the flags never imports Dask."""

from __future__ import annotations

import dataclasses
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("distributed")

import cloudpickle  # noqa: E402
import dask  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from distributed import LocalCluster  # noqa: E402

from tests.conftest import SAMPLES  # noqa: E402
from tracedoc.api import METRICS, analyze, open_store  # noqa: E402
from tracedoc.cli import cli  # noqa: E402
from tracedoc.errors import InputError  # noqa: E402
from tracedoc.ingest import discover  # noqa: E402
from tracedoc.limits import Limits
from tracedoc.pages.fragments import headline_html  # noqa: E402
from tracedoc.render.markdown import MarkdownRenderer  # noqa: E402
from tracedoc.render.text import TextRenderer  # noqa: E402
from tracedoc.report import Report  # noqa: E402
from tracedoc.scale import ClusterSpec, analyze_distributed  # noqa: E402
from tracedoc.scale import job as job_module  # noqa: E402
from tracedoc.scale.cluster import RankFailure, connect, map_batches  # noqa: E402
from tracedoc.scale.exports import on_client, report_exports  # noqa: E402
from tracedoc.scale.job import _tasks, plan_batches  # noqa: E402
from tracedoc.scale.worker import analyse_ranks  # noqa: E402

# The multi-rank samples: stragglers, expert imbalance, FSDP, DDP without a finding, hangs and mismatches from
# flight-recorder dumps, and on-demand dumps where some files hold no entries.
SAME_ANSWER = ["ddp-straggler", "moe-hot-expert-4rank", "fsdp-no-prefetch", "ddp-overlap", "hang-4rank-stuck",
               "hang-size-mismatch", "hang-ondemand-healthy", "conv-step-cycles"]


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes, one thread each (CI has 2 cores); a task whose worker dies is not retried."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield ClusterSpec(scheduler=c.scheduler_address)


def report_dict(report) -> dict:
    data = report.to_dict()
    data["summary"] = {k: v for k, v in data["summary"].items() if k != "missing_ranks"}
    return data


@pytest.mark.parametrize("sample", SAME_ANSWER)
def test_distributed_report_equals_local(sample: str, cluster: ClusterSpec, tmp_path: Path) -> None:
    """One batch per worker thread: the 4-rank samples go two ranks to a task, in one store on the worker."""
    local = analyze(SAMPLES / sample, cache_dir=tmp_path / "local")
    distributed = analyze_distributed(SAMPLES / sample, dataclasses.replace(cluster, batches_per_thread=1),
                                      cache_dir=tmp_path / "dist")
    assert distributed.summary["missing_ranks"] == []
    assert report_dict(distributed) == report_dict(local)


def test_planted_straggler_and_hot_expert_named(cluster: ClusterSpec, tmp_path: Path) -> None:
    straggler = analyze_distributed(SAMPLES / "ddp-straggler", cluster, cache_dir=tmp_path)
    assert [(f.rule, f.scope.rank) for f in straggler.findings if f.rule == "straggler-rank"] == [
        ("straggler-rank", 1)]
    hot = analyze_distributed(SAMPLES / "moe-hot-expert-4rank", cluster, cache_dir=tmp_path)
    assert [(f.rule, f.scope.rank) for f in hot.findings if f.rule == "expert-imbalance"] == [("expert-imbalance", 2)]


def test_rank_stores_are_cached_per_rank(cluster: ClusterSpec, tmp_path: Path) -> None:
    """Each rank's store lands in the cache under its own content key: a second run, or one rank analysed (or
    served) alone, reuses it."""
    analyze_distributed(SAMPLES / "ddp-straggler", cluster, cache_dir=tmp_path)
    for item in discover([SAMPLES / "ddp-straggler"]):
        store, cached = open_store([item], tmp_path)
        store.close()
        assert cached, item.path


def test_ranks_without_rank_in_name_numbered_as_local(cluster: ClusterSpec, tmp_path: Path) -> None:
    """ddp-straggler's two ranks copied under tensorboard_trace_handler's names (host_pid.ts.pt.trace.json.gz, no
    rank in them), rank 1's file sorting first: each trace's own rank (distributedInfo, rank 0 included) numbers it
    on both paths, so the reports are equal and the straggler is still rank 1."""
    job = tmp_path / "job"
    job.mkdir()
    for rank, name in ((1, "node7_4242.1700000000001"), (0, "node7_4343.1700000000002")):
        shutil.copy(SAMPLES / "ddp-straggler" / f"rank{rank}.trace.json.gz", job / f"{name}.pt.trace.json.gz")
    local = analyze(job, cache_dir=tmp_path / "local")
    distributed = analyze_distributed(job, cluster, cache_dir=tmp_path / "dist")
    assert distributed.summary["missing_ranks"] == []
    assert report_dict(distributed) == report_dict(local)
    assert [(f.rule, f.scope.rank) for f in distributed.findings if f.rule == "straggler-rank"] == [
        ("straggler-rank", 1)]


def truncated_copy(source: Path, target: Path) -> None:
    """A gzip of the first 60 % of the trace's JSON: the head still looks like a PyTorch trace, the rest is cut."""
    text = gzip.decompress(source.read_bytes())
    target.write_bytes(gzip.compress(text[: len(text) * 6 // 10]))


def test_bad_rank_is_missing_and_the_others_analysed(cluster: ClusterSpec, tmp_path: Path) -> None:
    """moe-hot-expert-4rank with rank 3's trace cut short (an edited copy), in batches of two ranks: the report is
    the one machine's report of ranks 0-2 (rank 2, rank 3's batch-mate, analysed on its own), and it names rank 3
    and why it is missing."""
    job, good = tmp_path / "job<b>\x1b[2J", tmp_path / "good"
    shutil.copytree(SAMPLES / "moe-hot-expert-4rank", job)
    shutil.copytree(SAMPLES / "moe-hot-expert-4rank", good)
    truncated_copy(SAMPLES / "moe-hot-expert-4rank" / "rank3.trace.json.gz", job / "rank3.trace.json.gz")
    (good / "rank3.trace.json.gz").unlink()
    with pytest.raises(InputError):
        analyze(job, cache_dir=tmp_path / "cache")
    messages: list[str] = []
    report = analyze_distributed(job, dataclasses.replace(cluster, batches_per_thread=1),
                                 cache_dir=tmp_path / "cache", progress=messages.append)
    assert "reading ranks: 4 of 4 done" in messages and "analysing ranks: 3 of 3 done" in messages
    [missing] = report.summary["missing_ranks"]
    assert missing["rank"] == 3 and missing["path"].endswith("rank3.trace.json.gz")
    assert missing["reason"].startswith("truncated or malformed trace") and missing["path"] not in missing["reason"]
    assert_same_report(report, analyze(good, cache_dir=tmp_path / "cache"))
    assert_missing_rank_shown(report, "rank 3")


def fail_rank1(batch, *args):
    """The second pass, failing for a batch that holds rank 1 (as a worker that runs out of memory there would)."""
    if any("rank1." in item.path.name for task in batch for item in task.items):
        raise InputError("rank 1 failed in its per-rank analyses")
    return analyse_ranks(batch, *args)


def test_rank_failing_second_pass_is_left_out(cluster: ClusterSpec, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """moe-hot-expert-4rank, rank 1 failing only in the second pass (read fine, its per-rank analyses fail), in
    batches of two ranks: it is named missing, and the report is the one machine's report of ranks 0, 2 and 3 (the
    others lined up again without it), with its batch-mate, rank 0, analysed on its own."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.setattr(job_module, "analyse_ranks", fail_rank1)
    good = tmp_path / "good"
    shutil.copytree(SAMPLES / "moe-hot-expert-4rank", good)
    (good / "rank1.trace.json.gz").unlink()
    messages: list[str] = []
    report = analyze_distributed(SAMPLES / "moe-hot-expert-4rank", dataclasses.replace(cluster, batches_per_thread=1),
                                 cache_dir=tmp_path / "cache", progress=messages.append)
    assert "reading ranks: 4 of 4 done" in messages and "analysing ranks: 4 of 4 done" in messages
    [missing] = report.summary["missing_ranks"]
    assert missing["rank"] == 1 and missing["path"].endswith("rank1.trace.json.gz")
    assert "rank 1 failed in its per-rank analyses" in missing["reason"]
    assert_same_report(report, analyze(good, cache_dir=tmp_path / "cache"))
    assert [(f.rule, f.scope.rank) for f in report.findings if f.rule == "expert-imbalance"] == [
        ("expert-imbalance", 2)]


def assert_same_report(got: Report, expected: Report) -> None:
    """The two reports are equal, inputs compared by file name (the sides read them from different folders)."""
    data = [report_dict(got), report_dict(expected)]
    for one in data:
        for item in one["inputs"]:
            item["path"] = Path(item["path"]).name
    assert data[0] == data[1]


def assert_missing_rank_shown(report, rank: str) -> None:
    """The text, Markdown and HTML reports say which rank is missing, under the headline, with the path (here with
    '<b>' and a clear-screen escape in it) made safe for each."""
    text = TextRenderer().render(report)
    assert text.startswith("tracedoc ") and text.index(f"Missing {rank} (") < text.index("severity")
    assert "job<b>" in text and "\x1b" not in text
    markdown = MarkdownRenderer().render(report).splitlines()
    line = next(line for line in markdown if line.startswith("Missing "))
    assert markdown.index(line) < markdown.index("## Findings") and f"Missing {rank}" in line
    assert "job\\<b\\>" in line and "\x1b" not in line
    html = headline_html(report).markup
    assert f"Missing {rank} (" in html and "job&lt;b&gt;" in html and "<b>" not in html and "\x1b" not in html


def test_no_rank_readable_is_an_input_error(cluster: ClusterSpec, tmp_path: Path) -> None:
    for rank in (0, 1):
        truncated_copy(SAMPLES / "ddp-straggler" / f"rank{rank}.trace.json.gz", tmp_path / f"rank{rank}.trace.json.gz")
    with pytest.raises(InputError, match="no rank could be read"):
        analyze_distributed(tmp_path, cluster, cache_dir=tmp_path / "cache")


def exit_on_odd(batch: tuple[int, ...]) -> list[int]:
    """Kills the worker process that runs it when the batch holds an odd number (as an out-of-memory kill would)."""
    if any(n % 2 for n in batch):
        os._exit(1)
    return [n * 10 for n in batch]


def test_worker_that_dies_is_one_failure(cluster: ClusterSpec) -> None:
    """A batch whose worker dies runs again one rank at a time: only the rank that kills its worker is lost."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    messages: list[str] = []
    with connect(cluster) as client:
        results, failures = map_batches(client, exit_on_odd, [(0, 1, 2), (4,)], lambda batch: (), str, "testing",
                                        messages.append)
    assert sorted(results) == [((0,), [0]), ((2,), [20]), ((4,), [40])]
    [(rank, failure)] = failures
    assert rank == 1 and isinstance(failure, RankFailure) and "worker died" in failure.reason
    assert messages[-1] == "testing ranks: 4 of 4 done"


def test_batches_follow_job_order_and_input_bytes(tmp_path: Path) -> None:
    """The 4 ranks of moe-hot-expert-4rank as they are (about equal sizes) and with rank 1 made 10x the others:
    equal runs in job order, and the large rank alone."""
    tasks = _tasks(discover([SAMPLES / "moe-hot-expert-4rank"]), tmp_path, Limits())
    assert [[t.indices for t in b] for b in plan_batches(tasks, 2)] in ([[(0,), (1,)], [(2,), (3,)]],
                                                                         [[(2,), (3,)], [(0,), (1,)]])
    assert [len(b) for b in plan_batches(tasks, 8)] == [1, 1, 1, 1]
    big = [dataclasses.replace(t, items=tuple(dataclasses.replace(i, size_bytes=i.size_bytes * 10) for i in t.items))
           if t.indices == (1,) else t for t in tasks]
    batches = plan_batches(big, 2)
    assert [t.indices for t in batches[0]] == [(1,)]
    assert sorted(t.indices for b in batches[1:] for t in b) == [(0,), (2,), (3,)]


def test_progress_names_the_slowest_running(cluster: ClusterSpec, tmp_path: Path) -> None:
    messages: list[str] = []
    analyze_distributed(SAMPLES / "moe-hot-expert-4rank", cluster, cache_dir=tmp_path, progress=messages.append)
    assert "reading ranks: 4 of 4 done" in messages and "analysing ranks: 4 of 4 done" in messages
    running = [m for m in messages if "running; slowest:" in m]
    assert running and all("rank" in m.split("slowest:")[1] for m in running)


def test_cli_workers_json_equals_local(tmp_path: Path) -> None:
    runner = CliRunner()
    sample = str(SAMPLES / "ddp-straggler")
    local = runner.invoke(cli, ["analyze", sample, "--format", "json", "--cache-dir", str(tmp_path)])
    dist = runner.invoke(cli, ["analyze", sample, "--format", "json", "--cache-dir", str(tmp_path), "--workers", "2"])
    assert local.exit_code == 0 and dist.exit_code == 0, dist.output
    import json

    a, b = json.loads(local.stdout), json.loads(dist.stdout)
    assert b["summary"].pop("missing_ranks") == []
    assert a == b


@pytest.mark.parametrize("args, message", [
    (["--dask-scheduler", "tcp://127.0.0.1:9"], "cannot reach the Dask scheduler at tcp://127.0.0.1:9"),
    (["--dask-scheduler-file", "/nonexistent/scheduler.json"], "no such file"),
    (["--workers", "2", "--dask-scheduler", "tcp://127.0.0.1:9"], "give one of them"),
])
def test_cluster_errors_are_one_line_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["analyze", str(SAMPLES / "ddp-straggler"), "--cache-dir", str(tmp_path), *args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_inputs_not_split_by_rank_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="without --workers"):
        analyze_distributed(SAMPLES / "health-h100", ClusterSpec(workers=1), cache_dir=tmp_path)


def test_without_the_flags_dask_is_not_imported(tmp_path: Path) -> None:
    code = ("import sys; from click.testing import CliRunner; from tracedoc.cli import cli; "
            f"r = CliRunner().invoke(cli, ['analyze', {str(SAMPLES / 'ddp-straggler')!r}, '--cache-dir', "
            f"{str(tmp_path)!r}]); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_created_objects_are_found_behind_their_comments() -> None:
    """Newer DuckDB keeps the comments before a statement in its text: a provided object is still recognised (else
    the client would rebuild it from events it does not have), and a comment alone creates nothing."""
    from tracedoc.store.modules import created_object, module_file

    statements = duckdb.extract_statements(module_file("trace.window").read_text())
    assert "trace_wall" in {created_object(s.query) for s in statements}
    assert created_object("-- the wall\n/* of each\n source */\nCREATE OR REPLACE TEMP VIEW w AS SELECT 1") == "w"
    assert created_object("-- CREATE TABLE z\nSELECT 1") is None


def test_the_ranks_report_views_are_shipped_by_their_names() -> None:
    """The second pass hands back the report's per-rank tables as their declared views (pipeline.METRICS); the
    cross-rank ones are made on the client."""
    shipped = {e.name: e for e in report_exports([], None, METRICS.values())}
    per_rank = [t for t in METRICS.values() if not on_client(t.module)]
    assert {"gpu_report_idle", "comm_report_overlap", "memory_report_curve"} <= {t.view for t in per_rank}
    assert all(shipped[t.view].query == f"SELECT * FROM {t.view}" and shipped[t.view].module == t.module
               for t in per_rank)
    assert not {"ranks_report_steps", "hang_report_collectives", "trace_report_step_times"} & shipped.keys()


def test_summary_stores_are_opened_under_the_runs_memory_cap() -> None:
    """The worker's batch store and the client's store of summaries are opened under the run's limits, as every
    store is (a many-rank job's analyses run there)."""
    from tracedoc.scale.summary_store import SummaryStore, summary_connection

    limits = Limits(memory_bytes=512 << 20)
    store = SummaryStore(summary_connection(limits), limits=limits)
    try:
        assert store.scalar("SELECT current_setting('memory_limit')") == "512.0 MiB"
        assert store.limits == limits
    finally:
        store.close()


def test_a_rank_that_cannot_be_read_is_one_line_in_the_report_and_nothing_on_stderr(tmp_path: Path) -> None:
    """``tracedoc analyze --workers 2`` in a process of its own, as a user runs it, on ddp-overlap with rank 1's
    gzip cut in half (an edited copy): the local workers' own error log ('Compute Failed' and the task's
    traceback) reached the terminal, and the report's line named the path twice. Now stderr stays empty and the
    line names it once; --debug shows the traceback."""
    shutil.copytree(SAMPLES / "ddp-overlap", tmp_path / "job")
    cut = tmp_path / "job" / "rank1.trace.json.gz"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    result = subprocess.run([sys.executable, "-m", "tracedoc", "analyze", str(tmp_path / "job"), "--no-cache",
                             "--workers", "2"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 0 and result.stderr == ""
    assert (f"Missing rank 1 ({cut}): corrupt or truncated gzip (Compressed file ended before the end-of-stream "
            "marker was reached); the report is of the others.") in result.stdout.splitlines()
    debug = subprocess.run([sys.executable, "-m", "tracedoc", "--debug", "analyze", str(tmp_path / "job"),
                            "--no-cache", "--workers", "2"], capture_output=True, text=True)
    assert debug.returncode == 0 and "Traceback (most recent call last)" in debug.stderr  # where it failed
