"""`tracedoc workload`: listing and running the GPU workloads, here without a GPU or torch.

A real run needs torch and a GPU; here the command line each profiler gets is checked, and a stand-in script
(in a folder given by $TRACEDOC_WORKLOADS) runs while telemetry is sampled from a replay of the NVML answers
recorded on a two-H200 machine (samples/health-2xh200). The workloads' real output is in samples/ and is checked
by test_samples.py.
"""

from __future__ import annotations

import ast
import json
import lzma
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze, workload
from tracedoc.cli import cli

REPLAY = SAMPLES / "health-2xh200" / "nvml-load.replay.json"
GEMM_LADDER = SAMPLES / "gemm-ladder-ncu"
CUBLAS = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
STAND_IN = """\
import json, sys, time
from pathlib import Path
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "args.json").write_text(json.dumps(sys.argv[1:]))
time.sleep(0.3)
sys.exit(int(sys.argv[sys.argv.index("--fail") + 1]) if "--fail" in sys.argv else 0)
"""


def invoke(*args: str):
    return CliRunner().invoke(cli, ["workload", *args])


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """This interpreter without torch, torchvision and cupy, whatever is installed."""
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "torchvision", None)
    monkeypatch.setitem(sys.modules, "cupy", None)


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workloads folder whose decode_loop records its arguments; its dependencies count as installed."""
    folder = tmp_path / "workloads"
    (folder / "decode_loop").mkdir(parents=True)
    (folder / "decode_loop" / "run.py").write_text(STAND_IN)
    monkeypatch.setenv(workload.ENV_DIR, str(folder))
    monkeypatch.setattr(workload, "missing_modules", lambda w: [])
    return tmp_path


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_list_works_without_torch(no_torch: None) -> None:
    result = invoke("list")
    assert result.exit_code == 0, result.output
    for name, w in workload.WORKLOADS.items():
        row = next(line for line in result.output.splitlines() if line.split()[:1] == [name])
        assert ", ".join(w.variants) in row
    assert "not installed here: cupy, torch, torchvision (pip install 'tracedoc[workloads]')" in result.output


def test_run_without_torch_is_one_line_exit_2(no_torch: None) -> None:
    line = one_line_error(invoke("run", "decode_loop", "--variant", "eager"))
    assert "decode_loop needs torch" in line and "pip install 'tracedoc[workloads]'" in line


def test_gemm_ladder_names_cupy_too(no_torch: None) -> None:
    assert "gemm_ladder needs torch and cupy" in one_line_error(invoke("run", "gemm_ladder"))


@pytest.mark.parametrize(("args", "says"), [
    (["nope"], "no workload 'nope'; known: decode_loop"),
    (["decode_loop", "--variant", "graph"], "decode_loop has no variant 'graph'; its variants: eager, cudagraph"),
    (["decode_loop", "--gpus", "2"], "decode_loop runs on one GPU"),
])
def test_bad_names_are_one_line_exit_2(args: list[str], says: str) -> None:
    assert says in one_line_error(invoke("run", *args))


def test_missing_profiler_is_one_line_exit_2(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(stand_in))
    line = one_line_error(invoke("run", "decode_loop", "--profiler", "nsys"))
    assert "--profiler nsys needs Nsight Systems's nsys on PATH" in line
    assert "Nsight Compute's ncu" in one_line_error(invoke("run", "decode_loop", "--profiler", "ncu"))


def test_missing_workloads_folder_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload, "missing_modules", lambda w: [])
    monkeypatch.setenv(workload.ENV_DIR, str(tmp_path / "absent"))
    line = one_line_error(invoke("run", "decode_loop"))
    assert f"the workloads folder is missing: $TRACEDOC_WORKLOADS points to {tmp_path / 'absent'}" in line


def test_the_checkout_holds_every_listed_workload() -> None:
    """workloads/<name>/run.py exists for every entry, with the same variants (default first) and --profiler."""
    for name, w in workload.WORKLOADS.items():
        source = (ROOT / "workloads" / name / "run.py").read_text()
        assert (ROOT / "workloads" / name / "README.md").is_file(), name
        assigned = {t.id: n.value for n in ast.parse(source).body if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
        assert ast.literal_eval(assigned["VARIANTS"]) == w.variants, name
        assert "add_profiler_option(parser)" in source and "profiled_steps(args.profiler" in source, name
        default = f'"--variant", choices=VARIANTS, default="{w.variants[0]}"'
        assert default in source, f"{name}: the script's default variant must be the listed first one"


def test_run_records_telemetry_beside_the_workload(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEDOC_NVML_REPLAY", str(REPLAY))
    out = stand_in / "out"
    result = invoke("run", "decode_loop", "--variant", "cudagraph", "--out", str(out), "--interval", "0.05",
                    "--", "--steps", "2")
    assert result.exit_code == 0, result.output
    args = json.loads((out / "args.json").read_text())
    assert args == ["--variant", "cudagraph", "--out", str(out), "--profiler", "torch", "--steps", "2"]
    table = pq.read_table(out / workload.TELEMETRY_FILE)
    assert set(table["device"].to_pylist()) == {0, 1} and table.num_rows >= 4  # 2 GPUs, 0.3 s at 0.05 s
    assert f"diagnose them with: tracedoc analyze {out}" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["args.json", "run.telemetry.parquet"]  # no partial file


def test_run_without_nvml_records_no_telemetry_and_says_nothing(stand_in: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    doc = json.loads(REPLAY.read_text())
    doc["answers"]["nvmlInit[]"] = [{"error": "LibraryNotFound", "message": "NVML Shared Library Not Found"}]
    no_gpu = stand_in / "no-gpu.json"
    no_gpu.write_text(json.dumps(doc))
    monkeypatch.setenv("TRACEDOC_NVML_REPLAY", str(no_gpu))
    out = stand_in / "out"
    result = invoke("run", "decode_loop", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert not (out / workload.TELEMETRY_FILE).exists() and "telemetry" not in result.output


def test_a_failing_workload_is_exit_2(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEDOC_NVML_REPLAY", str(REPLAY))
    result = invoke("run", "decode_loop", "--out", str(stand_in / "out"), "--", "--fail", "3")
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == "Error: decode_loop exited with code 3 (its output is above)"


def test_profilers_wrap_the_script(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    script = str(stand_in / "workloads" / "decode_loop" / "run.py")
    out = Path("o")
    job = workload.plan("decode_loop", None, "nsys", out, None)
    assert job.command == ["nsys", "profile", "-t", "cuda,nvtx,osrt", "--capture-range=cudaProfilerApi",
                           "--capture-range-end=stop", "--force-overwrite=true", "-o", "o/run",
                           sys.executable, script, "--variant", "eager", "--out", "o", "--profiler", "nsys"]
    ncu = workload.plan("decode_loop", "eager", "ncu", out, None).command
    assert ncu[:ncu.index(sys.executable)] == ["ncu", "--set", "full", "--profile-from-start", "off",
                                               "--target-processes", "all", "--launch-count", "50",
                                               "--force-overwrite", "-o", "o/kernels"]
    assert workload.plan("decode_loop", "compile", "none", None, None).out == Path("out/decode-loop-compile")


def test_a_workload_that_times_itself_is_timed_before_the_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GEMM ladder under ncu: its timings (the cuBLAS ceiling) first without ncu, whose launch overhead starves
    short kernels, then the recorded launches alone under ncu; without a wrapping profiler, one run does both."""
    monkeypatch.setattr(workload, "missing_modules", lambda w: [])
    monkeypatch.setattr(workload.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    script = [sys.executable, str(ROOT / "workloads" / "gemm_ladder" / "run.py"), "--variant", "all", "--out", "o"]
    job = workload.plan("gemm_ladder", None, "ncu", Path("o"), None, ["--shapes", "4096"])
    assert job.before == ([*script, "--profiler", "none", "--shapes", "4096", "--phase", "time"],)
    assert job.command[0] == "ncu" and job.command[-8:] == [*script[2:], "--profiler", "ncu", "--shapes", "4096",
                                                            "--phase", "record"][-8:]
    plain = workload.plan("gemm_ladder", None, "torch", Path("o"), None)
    assert plain.before == () and "--phase" not in plain.command


def test_multi_gpu_workloads_start_under_torchrun_one_report_per_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload, "missing_modules", lambda w: [])
    monkeypatch.setattr(workload.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    script = str(ROOT / "workloads" / "fsdp_step" / "run.py")
    job = workload.plan("fsdp_step", "no_prefetch", "nsys", Path("o"), 4)
    assert job.command[:6] == [*launcher, "--no-python"]
    assert job.command[job.command.index("-o") + 1] == "o/run.rank%q{RANK}"
    assert job.command[-8:] == [sys.executable, script, "--variant", "no_prefetch", "--out", "o", "--profiler", "nsys"]
    plain = workload.plan("fsdp_step", None, "torch", Path("o"), None).command
    assert plain == [*launcher[:-1], "--nproc_per_node=2", script, "--variant", "prefetch", "--out", "o",
                     "--profiler", "torch"]


def _tracedocs_verdicts(paths: list[Path]) -> tuple[dict, set[tuple[str, str | None]]]:
    report = analyze(paths, use_cache=False)
    kernels = {k["kernel"]: k for k in report.metrics["ncu_kernels"]}
    return kernels, {(f.rule, f.scope.kernel) for f in report.findings if f.rule != "ncu-verdict-overruled"}


def test_gemm_ladder_names_each_rungs_bottleneck() -> None:
    """H100, ncu: naive L1/LSU-bound and stalling on loads, tiled CUDA-core bound, WMMA on tensor cores but far
    below cuBLAS, cuBLAS tensor-bound with no occupancy complaint at 15 % occupancy."""
    kernels, fired = _tracedocs_verdicts([GEMM_LADDER])
    classes = {name: (k["kernel_class"], k["busiest_unit"]) for name, k in kernels.items()}
    assert classes == {"gemm_naive": ("memory", "L1/TEX"), "gemm_tiled": ("compute", "issue slots"),
                       "gemm_wmma": ("memory", "L1/TEX"), CUBLAS: ("compute", "tensor pipe")}
    assert 10 < kernels["gemm_wmma"]["tensor_pct"] < 50 < 80 < kernels[CUBLAS]["tensor_pct"]
    assert {k for rule, k in fired if rule == "no-tensor-cores"} == {"gemm_naive", "gemm_tiled"}
    assert not {rule for rule, k in fired if k == "gemm_naive" and rule.startswith("warp-stall-")}  # symptoms
    assert not {rule for rule, k in fired if k == CUBLAS} - {"compute-bound"}
    assert kernels[CUBLAS]["achieved_occupancy_pct"] < 20 and not any(r == "low-occupancy" for r, _ in fired)


def _ncu_report_available() -> bool:
    try:
        import ncu_report  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _ncu_report_available(), reason="ncu-report (tracedoc[ncu]) missing")
def test_gemm_ladder_report_agrees_with_its_csv_and_overrules_ncus_occupancy_advice(tmp_path: Path) -> None:
    rep = tmp_path / "gemm_ladder_h100_full.ncu-rep"
    with lzma.open(GEMM_LADDER / "gemm_ladder_h100_full.ncu-rep.xz") as src, rep.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    csv_kernels, csv_fired = _tracedocs_verdicts([GEMM_LADDER])
    report = analyze([rep, GEMM_LADDER / "gemm_ladder.json"], use_cache=False)
    assert {(f.rule, f.scope.kernel) for f in report.findings if f.rule != "ncu-verdict-overruled"} == csv_fired
    assert {k["kernel"]: k["kernel_class"] for k in report.metrics["ncu_kernels"]} == \
        {name: k["kernel_class"] for name, k in csv_kernels.items()}
    overruled = {f.scope.kernel: f.message for f in report.findings if f.rule == "ncu-verdict-overruled"}
    assert "TheoreticalOccupancy" in overruled[CUBLAS] and "the tensor pipe is at 90% of peak" in overruled[CUBLAS]
    assert "uncoalesced-access" in overruled["gemm_naive"]
