"""Runs that do not compare, said where the reader looks: a diff of unrelated runs (another program, another
number of ranks) warns right under its verdict, and a directory holding a timeline beside a kernel profile says
under its headline that they are not one job's ranks, as do PyTorch traces that name no rank and run no collective,
and timelines recorded at separate times.
The bundled fix pairs and samples draw no warning."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.diff.gallery import DIFF_PAIRS


def diff_json(before: str, after: str, tmp_path: Path) -> tuple[dict, list[str]]:
    """The JSON diff of two samples and the first lines of the text diff."""
    runner = CliRunner()
    args = ["diff", str(SAMPLES / before), str(SAMPLES / after), "--cache-dir", str(tmp_path)]
    data = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)
    text = runner.invoke(cli, args).stdout.splitlines()
    return data, text


def test_a_decode_loop_against_a_two_rank_ddp_job_is_warned(tmp_path: Path) -> None:
    data, text = diff_json("decode-eager", "ddp-overlap", tmp_path)
    assert data["verdict"] == "faster" and (data["before"]["ranks"], data["after"]["ranks"]) == (1, 2)
    ranks, few = data["warnings"]
    assert ranks.startswith("BEFORE holds 1 rank and AFTER 2")
    assert few.startswith("few kernels in common: 6 of the 26 kernel names before and the 39 after")
    assert text[1].startswith("Faster:") and text[2].startswith("Warning: BEFORE holds 1 rank and AFTER 2")
    assert text[3].startswith("Warning: Few kernels in common") and text[3].endswith("one program?")


def test_two_single_rank_runs_of_different_programs_are_warned(tmp_path: Path) -> None:
    """The image pipeline against the decode loop share two small kernels (0.1 % and 1.0 % of their time)."""
    data, text = diff_json("input-slow", "decode-eager", tmp_path)
    [few] = data["warnings"]
    assert "0.1% of the kernel time before and 1.0% after" in few and text[2].startswith("Warning: Few kernels")


@pytest.mark.parametrize("pair", [(b, a) for b, a, _ in DIFF_PAIRS], ids=lambda p: f"{p[0]}->{p[1]}")
def test_the_bundled_fix_pairs_draw_no_warning(pair: tuple[str, str]) -> None:
    """The gallery's diffs (regenerated and compared by test_diff), among them torch.compile's, which replaces most
    of the eager kernels."""
    data = json.loads((ROOT / "reports" / "diffs" / f"{pair[0]}--{pair[1]}.json").read_text())
    assert data["warnings"] == []


def test_a_timeline_beside_a_kernel_profile_is_not_one_job(tmp_path: Path) -> None:
    """A folder with copies of the decode-eager trace and an Nsight Compute CSV export of another program."""
    shutil.copy(SAMPLES / "decode-eager" / "trace.json.gz", tmp_path)
    shutil.copy(SAMPLES / "ncu-h200-torch-csv" / "h200_torch_gemm_softmax_full.raw.base-units.csv", tmp_path)
    report = analyze(tmp_path, use_cache=False)
    assert report.summary["ranks"] == 2
    assert report.summary["mixed_inputs"] == ("a timeline (PyTorch profiler: rank 1) and a kernel profile "
                                              "(Nsight Compute: rank 0)")
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache"], env={"COLUMNS": "300"})
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tracedoc 2 inputs · 2 ranks")
    assert lines[1] == ("These inputs are separate runs, not the ranks of one job: a timeline (PyTorch "
                        "profiler: rank 1) and a kernel profile (Nsight Compute: rank 0). The rank count and the "
                        "headline mix them; analyse each apart.")
    md = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache", "--format", "md"]).stdout
    assert "not the ranks of one job" in md


def test_no_bundled_sample_is_mixed() -> None:
    """Telemetry beside traces, the GEMM ladder's timings beside ncu reports: they ride along."""
    for path in sorted((ROOT / "reports").glob("*.json")):
        assert "mixed_inputs" not in json.loads(path.read_text())["summary"], path.name


def test_an_nsys_run_beside_a_torch_trace_is_not_one_job(tmp_path: Path) -> None:
    """A folder with the nsys-torch-h100 export and a copy of the decode-eager trace: two recordings, said under the
    headline, and their ranks not compared with each other (no straggler or all-to-all analysis)."""
    shutil.copy(SAMPLES / "nsys-torch-h100" / "sample.sqlite", tmp_path)
    shutil.copy(SAMPLES / "decode-eager" / "trace.json.gz", tmp_path)
    report = analyze(tmp_path, use_cache=False)
    assert report.summary["mixed_inputs"] == ("a timeline (Nsight Systems: rank 0) and a timeline (PyTorch "
                                              "profiler: rank 1)")
    assert not {"straggler-rank", "expert-imbalance"} & {f.rule for f in report.findings}
    from tracedoc.ingest import discover
    from tracedoc.pipeline import open_store
    for inputs, compared in (([tmp_path], False), ([SAMPLES / "ddp-straggler"], True)):
        store, _ = open_store(discover(inputs), tmp_path / "cache")
        with store:
            assert store.ranks() == 2 and store.applies("ranks.stragglers") is compared
    text = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache"], env={"COLUMNS": "300"}).stdout
    assert "These inputs are separate runs, not the ranks of one job: a timeline (Nsight Systems" in text


def test_traces_that_name_no_rank_are_separate_runs(tmp_path: Path) -> None:
    """A baseline and its fix in one folder (copies of decode-eager and decode-cudagraph, renamed): PyTorch traces
    with no distributedInfo and no rank in their names were recorded outside any distributed job, so they are said
    to be separate runs; named rank0 and rank1 they are still runs recorded one after the other, not at once."""
    shutil.copyfile(SAMPLES / "decode-eager" / "trace.json.gz", tmp_path / "baseline.json.gz")
    shutil.copyfile(SAMPLES / "decode-cudagraph" / "trace.json.gz", tmp_path / "graphs.json.gz")
    report = analyze(tmp_path, use_cache=False)
    assert report.summary["mixed_inputs"] == ("2 timelines (PyTorch profiler) that name no rank (no distributedInfo "
                                              "of several ranks, no rank in their file names)")
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache"], env={"COLUMNS": "300"})
    assert result.stdout.splitlines()[1] == (
        "These inputs are separate runs, not the ranks of one job: 2 timelines (PyTorch profiler) that name no rank "
        "(no distributedInfo of several ranks, no rank in their file names). The rank count and the headline mix "
        "them; analyse each apart.")
    (tmp_path / "baseline.json.gz").rename(tmp_path / "rank0.json.gz")
    (tmp_path / "graphs.json.gz").rename(tmp_path / "rank1.json.gz")
    assert analyze(tmp_path, use_cache=False).summary["mixed_inputs"] == (
        "2 timelines (PyTorch profiler) recorded at 2 separate times (their host activity never overlaps, where a "
        "job's ranks record at once)")


def test_exports_recorded_at_separate_times_are_separate_runs(tmp_path: Path) -> None:
    """Two Nsight Systems exports of two programs in one folder (nsys-torch-eager and nsys-cupy-nopool): an export
    names no rank, and they were read as one job's ranks 0 and 1 with no note. Their host activity, on UTC, never
    overlaps: they are said to be separate runs. A job's exports, one per rank, record at once and are not."""
    shutil.copy(SAMPLES / "nsys-torch-eager" / "sample.sqlite.xz", tmp_path / "eager.sqlite.xz")
    shutil.copy(SAMPLES / "nsys-cupy-nopool" / "sample.sqlite.xz", tmp_path / "cupy.sqlite.xz")
    assert analyze(tmp_path, use_cache=False).summary["mixed_inputs"] == (
        "2 timelines (Nsight Systems) recorded at 2 separate times (their host activity never overlaps, where a "
        "job's ranks record at once)")
    assert "mixed_inputs" not in analyze(SAMPLES / "nsys-fsdp-no-prefetch-ranks", use_cache=False).summary


def test_both_kinds_of_separate_runs_are_said(tmp_path: Path) -> None:
    """A baseline and its fix named by no rank (copies of decode-eager and decode-cudagraph) beside the
    nsys-torch-h100 export: the note said only that the formats differ, as if the two PyTorch traces were one job's
    ranks 0 and 1; it says that they are runs of their own too."""
    shutil.copyfile(SAMPLES / "decode-eager" / "trace.json.gz", tmp_path / "baseline.json.gz")
    shutil.copyfile(SAMPLES / "decode-cudagraph" / "trace.json.gz", tmp_path / "graphs.json.gz")
    shutil.copy(SAMPLES / "nsys-torch-h100" / "sample.sqlite", tmp_path)
    assert analyze(tmp_path, use_cache=False).summary["mixed_inputs"] == (
        "a timeline (Nsight Systems: rank 2) and a timeline (PyTorch profiler: ranks 0, 1); of these, 2 timelines "
        "(PyTorch profiler) that name no rank (no distributedInfo of several ranks, no rank in their file names) are "
        "runs of their own too")


def test_ranks_that_communicate_are_one_job_though_they_name_no_rank(tmp_path: Path) -> None:
    """Edited copies of two jobs' ranks, their distributedInfo taken out and their files renamed a and b (as a
    profiler too old to write distributedInfo left them): ddp-overlap's GPUs run NCCL's collectives, and the
    ddp-cpu-cycles ranks' hosts gloo's (no GPU at all); each pair is one job's ranks and no note says otherwise."""
    jobs = {"nccl": [SAMPLES / "ddp-overlap" / f"rank{rank}.trace.json.gz" for rank in (0, 1)],
            "gloo": [ROOT / "tests" / "data" / "ddp-cpu-cycles" / name for name in
                     ("vm_596.1796246843911445733.pt.trace.json.gz", "vm_597.1796246843911169131.pt.trace.json.gz")]}
    for job, paths in jobs.items():
        (tmp_path / job).mkdir()
        for path, name in zip(paths, ("a.json.gz", "b.json.gz")):
            doc = json.loads(gzip.decompress(path.read_bytes()))
            del doc["distributedInfo"]
            (tmp_path / job / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
        report = analyze(tmp_path / job, use_cache=False)
        assert report.summary["ranks"] == 2, job
        assert "mixed_inputs" not in report.summary, job


@pytest.mark.parametrize("name", ["baseline.trace.json.gz", "zzz.trace.json.gz"])
def test_a_trace_naming_no_rank_beside_a_jobs_ranks_is_refused(tmp_path: Path, name: str) -> None:
    """A DDP job's two ranks (copies of ddp-overlap's, distributedInfo ranks 0 and 1) and a copy of the conv-step
    trace (no distributedInfo, no rank in its name) in one folder. Numbered by its position, the stray trace was a
    third rank that took the headline's step and every finding with no note (named after the ranks), or a second
    'claim' of rank 0 (named before them). It is refused, with the ranks it stands beside, in one process or
    several; a second stray one is counted; named by a rank, it is read as one, as before."""
    for rank in (0, 1):
        shutil.copy(SAMPLES / "ddp-overlap" / f"rank{rank}.trace.json.gz", tmp_path)
    shutil.copyfile(SAMPLES / "conv-step" / "trace.json.gz", tmp_path / name)
    for extra in ([], ["--workers", "2"]):
        result = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache", *extra])
        assert result.exit_code == 2, extra
        assert result.output == (
            f"Error: {tmp_path / name} names no rank (none in the trace, none in the file name) beside 2 traces of a "
            "job that do (ranks 0, 1): it is a run of its own, not the job's ranks; analyse it apart\n"), extra
    shutil.copyfile(SAMPLES / "decode-eager" / "trace.json.gz", tmp_path / "zzzz.trace.json.gz")
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache"])
    assert result.exit_code == 2 and " and 1 more name no rank " in result.output
    assert result.output.endswith("runs of their own, not the job's ranks; analyse them apart\n")
    (tmp_path / "zzzz.trace.json.gz").unlink()
    (tmp_path / name).rename(tmp_path / "rank2.trace.json.gz")
    assert analyze(tmp_path, use_cache=False).summary["ranks"] == 3


def test_an_nsys_export_naming_no_rank_beside_a_jobs_ranks_is_refused(tmp_path: Path) -> None:
    """The same for Nsight Systems: a DDP job's two exports (nsys-ddp-larger-batch-ranks, named rank0 and rank1)
    and a single-process export beside them (nsys-torch-eager's, renamed zbase), which was read as rank 2, with its
    own launch-bound finding and a straggler finding against the job's ranks."""
    for rank in (0, 1):
        shutil.copy(SAMPLES / "nsys-ddp-larger-batch-ranks" / f"rank{rank}.sqlite.xz", tmp_path)
    shutil.copyfile(SAMPLES / "nsys-torch-eager" / "sample.sqlite.xz", tmp_path / "zbase.sqlite.xz")
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache"])
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {tmp_path / 'zbase.sqlite.xz'} names no rank (none in the trace, none "
                                    "in the file name) beside 2 traces of a job that do (ranks 0, 1)")


def test_a_single_gpu_trace_with_a_world_of_one_names_no_rank(tmp_path: Path) -> None:
    """vLLM's single-GPU trace carries distributedInfo (rank 0 of a world of 1): beside decode-eager, which has
    none, it was 'a job's rank 0' to the check above, and the pair was read as two ranks with no note. Both are runs
    of their own: the separate-runs note."""
    shutil.copy(SAMPLES / "tracelens-vllm-graph-execution" / "graph_execution.json.gz", tmp_path)
    shutil.copy(SAMPLES / "decode-eager" / "trace.json.gz", tmp_path)
    report = analyze(tmp_path, use_cache=False)
    assert report.summary["mixed_inputs"] == ("2 timelines (PyTorch profiler) that name no rank (no distributedInfo "
                                              "of several ranks, no rank in their file names)")


def test_a_diff_warns_of_a_side_that_is_separate_runs(tmp_path: Path) -> None:
    """BEFORE is a folder holding a baseline and its fix (copies of decode-eager and decode-cudagraph, named by no
    rank), AFTER the fix alone: the diff's verdict compares the folder's slowest run with the fix, and says so
    right under it, in place of the warning that the sides hold other numbers of ranks."""
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copyfile(SAMPLES / "decode-eager" / "trace.json.gz", mixed / "baseline.json.gz")
    shutil.copyfile(SAMPLES / "decode-cudagraph" / "trace.json.gz", mixed / "graphs.json.gz")
    runner = CliRunner()
    args = ["diff", str(mixed), str(SAMPLES / "decode-cudagraph"), "--no-cache"]
    data = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)
    separate = ("BEFORE holds separate runs, not the ranks of one job: 2 timelines (PyTorch profiler) that name no "
                "rank (no distributedInfo of several ranks, no rank in their file names). Such a side's step is its "
                "slowest run's, so the verdict compares different programs; diff one run against another")
    assert data["warnings"] == [separate]  # not also that the sides hold 2 and 1 'ranks'
    text = runner.invoke(cli, args, env={"COLUMNS": "400"}).stdout.splitlines()
    assert text[2] == f"Warning: {separate}."
