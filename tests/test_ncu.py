"""Nsight Compute: .ncu-rep and CSV exports give the same diagnosis, judged the way an expert reads ncu."""

from __future__ import annotations

import csv
import gzip
import json
import lzma
import re
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.report import Report

A40_REP = SAMPLES / "ncu-a40-julia" / "a40_julia_indexspaces.ncu-rep"
A40_CSV = SAMPLES / "ncu-a40-julia-csv" / "a40_julia_indexspaces.raw.base-units.csv"
A40_CSV_SCALED = SAMPLES / "ncu-a40-julia-csv-scaled" / "a40_julia_indexspaces.raw.csv"
H800_REP = SAMPLES / "ncu-h800-sglang" / "h800_sglang_pytorch_flashattn_full.ncu-rep"
H800_CSV = SAMPLES / "ncu-h800-sglang-csv" / "h800_sglang_pytorch_flashattn_full.raw.base-units.csv"
H200_CSV = SAMPLES / "ncu-h200-torch-csv" / "h200_torch_gemm_softmax_full.raw.base-units.csv"
H200_REP_XZ = SAMPLES / "ncu-h200-torch-csv" / "h200_torch_gemm_softmax_full.ncu-rep.xz"
A100_CSV = SAMPLES / "ncu-a100-cutlass-csv" / "a100_cutlass_gemm_full.raw.base-units.csv"
SOL = SAMPLES / "ncu-h100-gemm-sol"
SOL_CSV = SOL / "gemm_sol.raw.base-units.csv"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
BIG_GEMM = "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
NCU_SAMPLES = sorted(SAMPLES.glob("ncu-*")) + [SAMPLES / "gemm-ladder-ncu"]
CLASS_RULES = {"compute-bound", "memory-bound", "latency-bound"}

def _ncu_report_available() -> bool:
    try:
        import ncu_report  # noqa: F401
    except ImportError:
        return False
    return True


requires_ncu_report = pytest.mark.skipif(not _ncu_report_available(), reason="ncu-report (tracedoc[ncu]) missing")


def _verdicts(report: Report) -> dict[tuple[str, str | None], float]:
    """tracedoc's own findings as {(rule, kernel): saving in ms}; ncu's stored verdicts (rep only) left out."""
    out: dict[tuple[str, str | None], float] = {}
    for f in report.findings:
        if f.rule != "ncu-verdict-overruled":
            key = (f.rule, f.scope.kernel)
            out[key] = out.get(key, 0.0) + f.impact_ms
    return out


def _kernels(report: Report) -> list[tuple]:
    return sorted((k["kernel"], k["grid"], k["block"], k["launches"], k["kernel_class"], k["busiest_unit"])
                  for k in report.metrics["ncu_kernels"])


def _assert_same_diagnosis(a: Report, b: Report) -> None:
    assert _kernels(a) == _kernels(b)
    va, vb = _verdicts(a), _verdicts(b)
    assert va.keys() == vb.keys()
    for key in va:
        assert va[key] == pytest.approx(vb[key], rel=0.02, abs=1e-3), key


@pytest.fixture(scope="module")
def h200_rep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H200 report, unpacked from the sample's .xz."""
    out = tmp_path_factory.mktemp("h200") / "h200_torch_gemm_softmax_full.ncu-rep"
    with lzma.open(H200_REP_XZ) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@requires_ncu_report
@pytest.mark.parametrize("rep, exported", [(A40_REP, A40_CSV), (A40_REP, A40_CSV_SCALED), (H800_REP, H800_CSV)],
                         ids=["a40-base-units", "a40-scaled-units", "h800"])
def test_report_and_csv_export_give_the_same_verdicts(rep: Path, exported: Path) -> None:
    _assert_same_diagnosis(analyze([rep]), analyze([exported]))


@requires_ncu_report
def test_h200_report_and_csv_give_the_same_verdicts(h200_rep: Path) -> None:
    _assert_same_diagnosis(analyze([h200_rep]), analyze([H200_CSV]))


def test_gemm_at_high_tensor_throughput_is_compute_bound_never_low_occupancy() -> None:
    report = analyze([H200_CSV])
    gemm = [f for f in report.findings if f.scope.kernel == GEMM]
    assert {f.rule for f in gemm} == {"compute-bound"}, [f.rule for f in gemm]
    [kernel] = [k for k in report.metrics["ncu_kernels"] if k["kernel"] == GEMM]
    assert kernel["busiest_unit"] == "tensor pipe" and kernel["busiest_unit_pct"] > 85
    assert kernel["theoretical_occupancy_pct"] < 20  # the number that misleads a one-metric reading
    softmax = next(f for f in report.findings if f.rule == "low-occupancy")
    assert softmax.scope.kernel == "cunn_SoftMaxForwardReg"
    assert "registers (37 per thread)" in softmax.message


@requires_ncu_report
def test_ncu_advice_that_does_not_apply_is_overruled_and_said_so(h200_rep: Path) -> None:
    report = analyze([h200_rep])
    rows = [r for r in report.metrics["ncu_rules_vs_tracedoc"] if r["kernel"] == GEMM]
    occupancy = next(r for r in rows if r["ncu_rule"] == "TheoreticalOccupancy")
    assert occupancy["tracedoc_rule"] == "low-occupancy"
    assert occupancy["ncu_speedup_pct"] == pytest.approx(9.85, abs=0.1)
    assert occupancy["tracedoc_view"].startswith("overruled: it is compute-bound: tensor pipe")
    overruled = next(f for f in report.findings if f.rule == "ncu-verdict-overruled" and f.scope.kernel == GEMM)
    assert "TheoreticalOccupancy" in overruled.message and "SharedMemoryConflicts" in overruled.message
    compute = next(f for f in report.findings if f.rule == "compute-bound" and f.scope.kernel == GEMM)
    assert {e.name: e.value for e in compute.evidence}["ncu's verdict"] == 'SOLBottleneck "High Throughput"'


def test_memory_bound_and_register_spills_on_a40() -> None:
    report = analyze([A40_CSV])
    fill = [f for f in report.findings if f.scope.kernel == "julia__5_11155" and "grid 39312,1,1" in f.message]
    assert [f.rule for f in fill] == ["memory-bound"]  # 91 % of DRAM peak: no occupancy or stall advice
    top = report.findings[0]
    assert (top.rule, top.scope.kernel) == ("register-spill", "julia_frb_5885")
    assert {e.name: e.value for e in top.evidence}["share of L1 load/store traffic"] > 90
    assert not any(f.rule == "uncoalesced-access" for f in report.findings)


def test_small_grid_gemm_is_not_called_low_occupancy() -> None:
    report = analyze([A100_CSV])
    assert {f.rule for f in report.findings} == {"small-grid"}
    first = next(f for f in report.findings if f.rule == "small-grid")
    assert {e.name: e.value for e in first.evidence}["SMs"] == 108


def test_launches_without_metrics_are_reported_not_dropped() -> None:
    report = analyze([H800_CSV])
    [coverage] = report.metrics["ncu_coverage"]
    assert (coverage["launches"], coverage["unmeasured_launches"]) == (5, 1)
    assert coverage["unmeasured_kernels"] == "flash_fwd_kernel" and coverage["collected_set"] == "full"
    incomplete = next(f for f in report.findings if f.rule == "ncu-incomplete-profile")
    assert "flash_fwd_kernel" in incomplete.message
    tail = next(f for f in report.findings if f.rule == "tail-effect")
    assert {e.name: e.value for e in tail.evidence}["waves"] == pytest.approx(1.33, abs=0.01)


def test_smaller_section_set_says_what_it_could_not_judge(tmp_path: Path) -> None:
    """The H200 export cut to the basic set's metrics: classes still judged, the rest named as not judged."""
    basic = ("gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
             "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
             "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "launch__", "device__attribute_",
             "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct")
    with H200_CSV.open(newline="") as f:
        rows = list(csv.reader(f))
    keep = [i for i, name in enumerate(rows[0]) if i < 11 or name.startswith(basic)]
    cut = tmp_path / "h200_basic.csv"
    with cut.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows([[r[i] for i in keep] for r in rows])
    report = analyze([cut])
    fired = {f.rule for f in report.findings}
    assert {"compute-bound", "latency-bound", "small-grid", "ncu-incomplete-profile"} <= fired
    assert not any(r.startswith("warp-stall-") for r in fired)
    [coverage] = report.metrics["ncu_coverage"]
    assert coverage["collected_set"] == "basic"
    for judgement in ("warp stalls", "register spills", "shared-memory bank conflicts", "global-access coalescing"):
        assert judgement in coverage["not_judged"]


def _analyze_cli(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["analyze", "--no-cache", str(path)])
    return result.exit_code, result.output.strip()


def test_truncated_report_is_rejected_in_one_line(tmp_path: Path) -> None:
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(A40_REP.read_bytes()[:1_000_000])
    code, output = _analyze_cli(cut)
    assert code == 2 and len(output.splitlines()) == 1
    assert "truncated or corrupt Nsight Compute report" in output


def test_truncated_csv_export_is_rejected_in_one_line(tmp_path: Path) -> None:
    text = A100_CSV.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: len(text) - 5000])
    code, output = _analyze_cli(cut)
    assert code == 2 and len(output.splitlines()) == 1 and "truncated or malformed ncu CSV" in output


def test_a_cut_row_is_named_by_its_width(tmp_path: Path) -> None:
    """H200's export cut inside its last launch's row (a cut of the fuzzer's): the error says how many of the
    header's columns the row has."""
    cut = tmp_path / "kernels.raw.csv"
    cut.write_bytes(H200_CSV.read_bytes()[:267_853])
    code, output = _analyze_cli(cut)
    assert code == 2 and output.endswith("truncated or malformed ncu CSV (a row has 1705 of 2238 columns)")


def test_arrow_reads_the_csv_without_a_python_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ragged-row error comes from Arrow's own message: an ``invalid_row_handler`` handed Arrow's reader a Python
    function whose last reference its worker threads could drop after the read returned, which aborted a process
    ending then (about 1 run in 70 of the cut above, under load). Checked on a good export and on the cut one."""
    import pyarrow.csv as pa_csv

    from tracedoc.ingest.ncu import ncu_csv

    handlers = []
    read_csv = pa_csv.read_csv

    def recording(*args: object, **kwargs: object) -> object:
        options = kwargs.get("parse_options")
        handlers.append(getattr(options, "invalid_row_handler", None))
        return read_csv(*args, **kwargs)

    monkeypatch.setattr(ncu_csv.pa_csv, "read_csv", recording)
    cut = tmp_path / "kernels.raw.csv"
    cut.write_bytes(H200_CSV.read_bytes()[:267_853])
    assert _analyze_cli(A100_CSV)[0] == 0 and _analyze_cli(cut)[0] == 2
    assert handlers == [None, None]


def test_a_value_cut_short_at_the_end_is_refused(tmp_path: Path) -> None:
    """A100's export cut inside its last value ('...85,3' of '"...85,376"'): Arrow reads the open quote to the end
    as the value, so the count of quotes says the file was cut. The same export without its final line break, its
    last value whole, reads as the whole file does."""
    data = A100_CSV.read_bytes()
    assert data.endswith(b'85,376"\n')
    cut = tmp_path / "kernels.raw.csv"
    cut.write_bytes(data[:-4])
    code, output = _analyze_cli(cut)
    assert code == 2 and output.endswith("truncated or malformed ncu CSV (a quoted value is not closed)")
    no_line_break = tmp_path / "whole.raw.csv"
    no_line_break.write_bytes(data[:-1])
    whole, unbroken = (analyze([path], use_cache=False).to_dict() for path in (A100_CSV, no_line_break))
    assert unbroken["findings"] and unbroken["findings"] == whole["findings"]
    for report in (whole, unbroken):  # the inputs' paths differ
        for row in report["metrics"]["ncu_coverage"]:
            row.pop("path")
    assert unbroken["metrics"] == whole["metrics"]


PAGES = Path(__file__).parent / "data" / "ncu-pages"
RAW_HINT = "export the raw page: ncu --import REPORT.ncu-rep --csv --page raw --print-units base > REPORT.csv"


@pytest.mark.parametrize(("name", "said"), [
    ("a40_julia_indexspaces.details.csv.gz", f"this is ncu's details page, which tracedoc does not read; {RAW_HINT}"),
    ("a40_julia_indexspaces.summary-per-kernel.csv.gz",
     f"this is ncu's per-kernel summary (--print-summary per-kernel), which tracedoc does not read; {RAW_HINT}"),
    ("a40_julia_indexspaces.details.txt.gz",
     "this is ncu's details page as printed text, which tracedoc does not read; profile into a report "
     f"(ncu -o REPORT ...) and give tracedoc REPORT.ncu-rep, or {RAW_HINT}"),
    ("h200_live.details.txt.gz",
     "this is ncu's details page as printed text, which tracedoc does not read; profile into a report "
     f"(ncu -o REPORT ...) and give tracedoc REPORT.ncu-rep, or {RAW_HINT}"),
    ("h200_live.summary.csv.gz",
     f"this is ncu's per-kernel summary (--print-summary per-kernel), which tracedoc does not read; {RAW_HINT}"),
    ("h200_torch_gemm_softmax_full.ncu_stdout.txt", "this is ncu's log of a profiled run, not its results; give "
     "tracedoc the report it wrote: './ncu-out/fresh/h200_torch_gemm_softmax_full.ncu-rep'"),
])
def test_what_ncu_prints_besides_the_raw_page_is_named(name: str, said: str) -> None:
    """ncu's other pages and printed text, as ncu wrote them: one line that says what the file is and what to give
    tracedoc instead, where the per-kernel summary and the printed text were 'not a trace format'."""
    code, output = _analyze_cli(PAGES / name)
    assert code == 2 and output == f"Error: {PAGES / name}: {said}"


def test_the_raw_page_a_live_run_printed_is_read() -> None:
    """What `ncu --csv --page raw --print-units base python3 h200_ncu_workload.py > live.raw.csv` printed on an H200:
    ncu's lines and the workload's own before the page. It is read, and its three kernels (ncu's default set) get
    the verdicts the full-set export of the same workload gives them, and the note that the set was not full."""
    live = analyze([PAGES / "h200_live.raw.csv.gz"], use_cache=False)
    full = analyze([H200_CSV], use_cache=False)
    verdicts = {(f.rule, f.scope.kernel) for f in live.findings}
    assert verdicts - {(f.rule, f.scope.kernel) for f in full.findings} == {("ncu-incomplete-profile", None)}
    assert {rule for rule, _ in verdicts} == {"compute-bound", "latency-bound", "low-occupancy", "small-grid",
                                              "ncu-incomplete-profile"}


def test_a_folder_with_other_ncu_pages_reads_its_traces(tmp_path: Path) -> None:
    """ncu's details page and per-kernel summary beside the A40 raw page in a folder are passed over, as any file
    no format reads is: the folder is analysed, where a details page beside it failed the run."""
    for name in ("a40_julia_indexspaces.details.csv.gz", "a40_julia_indexspaces.summary-per-kernel.csv.gz"):
        shutil.copy(PAGES / name, tmp_path / name)
    shutil.copy(A40_CSV, tmp_path / A40_CSV.name)
    report = analyze([tmp_path], use_cache=False)
    assert [i.format for i in report.inputs] == ["ncu"] and report.findings
    assert report.to_dict()["findings"] == analyze([A40_CSV], use_cache=False).to_dict()["findings"]


def test_what_ncu_printed_while_profiling_is_named(tmp_path: Path) -> None:
    """Edited copies of the H200 run's log: its progress lines followed by the A40 details page as text (what a
    plain ``ncu ./app`` prints, both in one stream) is the printed page; the log without its last line, which names
    the report, says to profile into one; a text of none of ncu's lines is still no trace format."""
    log = (PAGES / "h200_torch_gemm_softmax_full.ncu_stdout.txt").read_text().splitlines(keepends=True)
    assert log[-1].startswith("==PROF== Report: ")
    details = gzip.decompress((PAGES / "a40_julia_indexspaces.details.txt.gz").read_bytes()).decode()
    cases = {"live.txt": ("".join(log[:-2]) + details, "this is ncu's details page as printed text"),
             "log.txt": ("".join(log[:-1]), "this is ncu's log of a profiled run, not its results; profile into a "
                                            "report (ncu -o REPORT ...) and give tracedoc REPORT.ncu-rep"),
             "notes.txt": ((PAGES / "SOURCE.md").read_text(), "not a trace format tracedoc reads")}
    for name, (text, said) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, output = _analyze_cli(path)
        assert code == 2 and len(output.splitlines()) == 1 and output.startswith(f"Error: {path}: {said}"), name


def test_export_without_launches_is_rejected(tmp_path: Path) -> None:
    lines = A100_CSV.read_text().splitlines(keepends=True)
    for kept, name in ((lines[:2], "header-and-units.csv"), (lines[:1], "header.csv")):
        path = tmp_path / name
        path.write_text("".join(kept))
        code, output = _analyze_cli(path)
        assert code == 2 and output.endswith("the ncu export holds no profiled kernel")


def test_an_export_cut_inside_its_header_says_so(tmp_path: Path) -> None:
    """A100's export cut in its header's line, after the ID and Kernel Name columns: said in one line (Arrow's own
    error was that it could not skip the header's row)."""
    header = A100_CSV.read_text().splitlines(keepends=True)[0]
    assert '"Kernel Name"' in header[: len(header) // 2]
    cut = tmp_path / "kernels.raw.csv"
    cut.write_text(header[: len(header) // 2])
    code, output = _analyze_cli(cut)
    assert code == 2 and output.endswith("truncated ncu CSV (it ends inside its header)")


def test_a_row_wider_than_the_header_is_named_by_both_widths(tmp_path: Path) -> None:
    """A100's export with a value added to its last row: the error says the row's width and the header's."""
    data = A100_CSV.read_bytes()
    wide = tmp_path / "kernels.raw.csv"
    wide.write_bytes(data[:-1] + b',"1"\n')
    code, output = _analyze_cli(wide)
    assert code == 2 and output.endswith("truncated or malformed ncu CSV (a row has 1218 columns, the header 1217)")


def test_csv_of_another_tool_is_rejected() -> None:
    """A kernel table of nsys stats is not taken for an ncu export: it is named as nsys's."""
    code, output = _analyze_cli(SAMPLES / "nsys-torch-h100" / "stats_cuda_gpu_kern_sum.csv")
    assert code == 2 and len(output.splitlines()) == 1
    assert "this is a summary printed by nsys stats or nsys analyze" in output and "ncu" not in output


def test_missing_ncu_report_package_names_the_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import ncu_report now raises ImportError
    code, output = _analyze_cli(A40_REP)
    assert code == 2 and len(output.splitlines()) == 1
    assert "pip install 'tracedoc[ncu]'" in output and "--csv --page raw --print-units base" in output


def test_missing_ncu_report_package_names_the_users_xz_and_a_command_that_works(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The H200 sample's report is shipped as .ncu-rep.xz: the hint names that file (no unpacked copy of it) and
    unpacks it before `ncu --import`, which reads no .xz; it is refused before anything is unpacked."""
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import ncu_report now raises ImportError
    code, output = _analyze_cli(H200_REP_XZ)
    assert code == 2 and len(output.splitlines()) == 1, output
    assert f"Error: {H200_REP_XZ}: reading .ncu-rep needs NVIDIA's ncu-report package" in output
    assert "unpacked" not in output
    assert (f"xz -dk {H200_REP_XZ} && ncu --import {H200_REP_XZ.with_suffix('')} --csv --page raw "
            "--print-units base > h200_torch_gemm_softmax_full.csv") in output


# --- Links to a timeline of the same kernels (ncu.links) ---------------------------------------------------------
# The H200 report's programs share two kernels, in the same launch configuration, with other real samples: the
# in-place add on 64 floats (one block of 128 threads) that samples/nsys-torch-h100 runs 1200 times, and the nvjet
# GEMM that samples/ddp-overlap runs on both ranks. Each tool spells the names differently (ncu
# 'at::vectorized_elementwise_kernel<4, …>', nsys 'at::native::vectorized_elementwise_kernel<(int)4, …,
# (unsigned long)2>', the PyTorch profiler '<4, …, 2ul>' with full parameter types).
NSYS_H100 = SAMPLES / "nsys-torch-h100"
DDP_OVERLAP = SAMPLES / "ddp-overlap"
ADD_ON_SELF = "%vectorized_elementwise_kernel%CUDAFunctorOnSelf_add<float>%"


def _nsys_kernels(like: str, grid: tuple[int, int, int], block: tuple[int, int, int]) -> tuple[int, float]:
    """(launches, total ms) of the export's kernels whose demangled name matches, read straight from SQLite."""
    con = sqlite3.connect(NSYS_H100 / "sample.sqlite")
    try:
        count, total_ns = con.execute(
            "SELECT count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE ? AND gridX = ? AND gridY = ? "
            "AND gridZ = ? AND blockX = ? AND blockY = ? AND blockZ = ?", (like, *grid, *block)).fetchone()
    finally:
        con.close()
    return count, total_ns / 1e6


def _torch_kernels(rank: int, name: str, grid: list[int], block: list[int]) -> tuple[int, float]:
    """(launches, total ms) of one rank's kernels of that name and launch configuration, from the raw JSON."""
    events = json.loads(gzip.decompress((DDP_OVERLAP / f"rank{rank}.trace.json.gz").read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"] == name
               and e["args"].get("grid") == grid and e["args"].get("block") == block]
    return len(kernels), sum(e["dur"] for e in kernels) / 1e3


def _timeline_evidence(report: Report, rule: str) -> list[tuple[float, dict]]:
    """(saving, evidence) of the rule's findings that carry the timeline's launches."""
    found = [(f.impact_ms, {e.name: e.value for e in f.evidence}) for f in report.findings if f.rule == rule]
    return [(ms, ev) for ms, ev in found if "launches in the timeline" in ev]


def test_ncu_kernel_links_to_the_nsys_timeline_by_name_and_launch_config() -> None:
    launches, total_ms = _nsys_kernels(ADD_ON_SELF, (1, 1, 1), (128, 1, 1))
    assert launches == 1200
    report = analyze([H200_CSV.parent, NSYS_H100])
    [link] = report.metrics["ncu_trace_links"]  # the fill kernel of the same launch configuration does not link
    assert (link["kernel"], link["grid"], link["block"]) == ("vectorized_elementwise_kernel", "1,1,1", "128,1,1")
    assert "CUDAFunctorOnSelf_add<float>" in link["timeline_name"]
    assert link["timeline_launches"] == launches and link["timeline_total_ms"] == pytest.approx(total_ms, abs=1e-3)
    # its small grid (1 block on 132 SMs) wastes 131/132 of each launch: saving per launch × 1200 launches
    [(saving, evidence)] = _timeline_evidence(report, "small-grid")
    assert evidence["launches in the timeline"] == launches
    assert saving == pytest.approx(131 / 132 * total_ms, rel=1e-3)
    assert saving == pytest.approx(evidence["saving per launch in the timeline"] * launches / 1e3, rel=1e-3)


def test_unlinked_ncu_findings_keep_their_profiled_saving() -> None:
    alone = analyze([H200_CSV.parent])
    both = analyze([H200_CSV.parent, NSYS_H100])
    assert not alone.metrics["ncu_trace_links"]
    assert not [f for f in alone.findings if any(e.name == "launches in the timeline" for e in f.evidence)]
    ncu_rules = {f.rule for f in alone.findings}
    unlinked = sorted((f.rule, f.impact_ms) for f in both.findings if f.rule in ncu_rules
                      and not any(e.name == "launches in the timeline" for e in f.evidence))
    before = sorted((f.rule, f.impact_ms) for f in alone.findings)
    assert len(unlinked) == len(before) - 1 and set(unlinked) <= set(before)


def test_ncu_kernels_link_to_per_rank_torch_traces() -> None:
    """Profiler names, two ranks: the GEMM's saving counts once per rank, because the ranks run side by side."""
    raw = [_torch_kernels(rank, GEMM, [2, 66, 1], [384, 1, 1]) for rank in (0, 1)]
    assert [n for n, _ in raw] == [28, 28]
    report = analyze([H200_CSV.parent, DDP_OVERLAP])
    links = {link["kernel"]: link for link in report.metrics["ncu_trace_links"]}
    gemm = links[GEMM]
    assert (gemm["timeline_sources"], gemm["timeline_launches"]) == (2, 56)
    assert gemm["timeline_total_ms"] == pytest.approx(sum(ms for _, ms in raw), abs=1e-3)
    assert gemm["impact_scale"] == pytest.approx(sum(ms for _, ms in raw) / 2 / gemm["total_ms"], rel=2e-3)
    [(saving, evidence)] = _timeline_evidence(report, "compute-bound")
    [alone] = [f for f in analyze([H200_CSV.parent]).findings if f.rule == "compute-bound"]
    assert evidence["launches in the timeline"] == 28
    assert saving == pytest.approx(alone.impact_ms * gemm["impact_scale"], rel=0.02)


@requires_ncu_report
def test_report_links_like_its_csv_export(h200_rep: Path) -> None:
    """ncu_report's demangled names and the CSV's give the same link."""
    from_rep = analyze([h200_rep, NSYS_H100]).metrics["ncu_trace_links"]
    from_csv = analyze([H200_CSV.parent, NSYS_H100]).metrics["ncu_trace_links"]
    assert from_rep == from_csv


# --- One verdict per kernel (ncu.primary) -------------------------------------------------------------------------
def _evidence(finding) -> dict:
    return {e.name: e.value for e in finding.evidence}


def _by_kernel(report: Report) -> dict[tuple, list]:
    """Findings about one kernel (rank, name, grid, block), from their scope and grid/block evidence."""
    out: dict[tuple, list] = {}
    for f in report.findings:
        ev = _evidence(f)
        if f.scope.kernel is not None and "grid" in ev:
            out.setdefault((f.scope.rank, f.scope.kernel, ev["grid"], ev["block"]), []).append(f)
    return out


@pytest.mark.parametrize("sample", NCU_SAMPLES, ids=lambda p: p.name)
def test_every_kernel_has_one_verdict_and_its_findings_claim_at_most_its_time(sample: Path) -> None:
    """Per kernel: one primary finding, at most one of compute-/memory-/latency-bound, every other finding a facet
    that claims nothing, savings within the kernel's time, and no stall text denying a unit-bound verdict. Kernels
    of one short name and launch configuration (two elementwise functors, say) are checked as a group."""
    if any(sample.glob("*.ncu-rep")) and not _ncu_report_available():
        pytest.skip("ncu-report (tracedoc[ncu]) missing")
    report = analyze([sample])
    kernels: dict[tuple, list] = {}
    for k in report.metrics["ncu_kernels"]:
        if k["kernel_class"]:
            kernels.setdefault((k["rank"], k["kernel"], k["grid"], k["block"]), []).append(k)
    found = _by_kernel(report)
    assert set(found) == set(kernels), sample.name
    for key, findings in found.items():
        rules = [f.rule for f in findings]
        assert sum(f.impact_ms for f in findings) <= sum(k["total_ms"] for k in kernels[key]) + 1e-3, \
            (key, [(f.rule, f.impact_ms) for f in findings])
        assert sum(r in CLASS_RULES for r in rules) <= len(kernels[key]), (key, rules)
        primary = [f for f in findings if "primary finding on this kernel" not in _evidence(f)]
        assert len(primary) == len(kernels[key]), (key, rules)
        for f in findings:
            if f not in primary:
                counted_in = _evidence(f)["primary finding on this kernel"]
                assert f.impact_ms == 0 and counted_in in {p.rule for p in primary}, (key, f.rule)
                assert f"Part of the {counted_in} finding on this kernel" in f.message
        if {"memory-bound", "compute-bound"} & set(rules):
            assert not any("not limited by a unit" in f.message for f in findings), (key, rules)


def test_tensor_pipe_near_peak_is_compute_bound_whatever_l1_reads() -> None:
    """The cuBLAS 320×128 kernel's L1/TEX (the shared memory that feeds wgmma) reads a point above its tensor pipe:
    it is compute-bound on the tensor pipe, and the finding says how close to the H100's bf16 peak it runs."""
    report = analyze([SOL_CSV])
    kernels = {k["kernel"]: k for k in report.metrics["ncu_kernels"]}
    big = kernels[BIG_GEMM]
    assert big["l1_pct"] > big["tensor_pct"] > 90 and big["kernel_class"] == "compute"
    assert big["busiest_unit"] == "tensor pipe"
    for name in (BIG_GEMM, GEMM):
        assert [f.rule for f in report.findings if f.scope.kernel == name] == ["compute-bound"], name
    finding = next(f for f in report.findings if f.scope.kernel == BIG_GEMM)
    evidence = _evidence(finding)
    # 8192³ and 8192×8192×2048 in the durations the CSV prints, against the H100 SXM datasheet's 989.4 TFLOP/s
    with SOL_CSV.open(newline="") as f:
        rows = list(csv.reader(f))
    name, duration = rows[0].index("Kernel Name"), rows[0].index("gpu__time_duration.sum")
    seconds = sum(float(r[duration].replace(",", "")) for r in rows[2:] if r[name] == BIG_GEMM) / 1e9
    # the tensor counters count the work of whole tiles: 26 tiles of 320 cover 8192 as 8320
    tflops = 2 * (8192**3 + 8192 * 8192 * 2048) * (26 * 320 / 8192) / seconds / 1e12
    assert evidence["achieved"] == pytest.approx(tflops, rel=1e-3)
    assert evidence["share of the datasheet peak"] == pytest.approx(100 * tflops / 989.4, rel=0.01)
    assert evidence["precision"] == "tensor bf16" and evidence["datasheet peak for that precision"] == 989.4
    assert "compute-bound on the tensor pipe, at 93% of its peak" in finding.message
    assert "L1/TEX reads 94%" in finding.message and "72% of the H100 SXM's 989 TFLOP/s" in finding.message


def test_stall_reasons_are_symptoms_on_the_main_finding() -> None:
    """The naive SGEMMs: their stalls are listed on the finding that names the limit, never findings of their own."""
    report = analyze([SOL_CSV])
    assert not [f for f in report.findings if f.rule.startswith("warp-stall-")]
    naive = next(f for f in report.findings if f.scope.kernel == "sgemm_naive" and f.impact_ms > 0)
    assert naive.rule == "memory-bound"
    stalls = _evidence(naive)["top stall reasons (% of the cycles between two instructions)"]
    assert stalls.startswith("long_scoreboard 34%, lg_throttle 26%")
    assert "symptoms of the L1/TEX limit" in naive.message
    rowx = next(f for f in report.findings if f.scope.kernel == "sgemm_naive_rowx" and f.impact_ms > 0)
    assert rowx.rule == "uncoalesced-access"
    assert _evidence(rowx)["top stall reasons (% of the cycles between two instructions)"].startswith("lg_throttle 92%")
    rows = [r for r in report.metrics["ncu_warp_stalls"] if r["kernel"] == "sgemm_naive"]
    assert [r["reason"] for r in rows[:2]] == ["long_scoreboard", "lg_throttle"]


def test_waste_that_keeps_the_unit_busy_is_the_primary_finding() -> None:
    """sgemm_naive_rowx: L1/TEX at 98 % leaves 2 % headroom, but 85 % of its L2 sectors are waste from
    uncoalesced accesses; that finding claims the saving, memory-bound is its facet."""
    report = analyze([SOL_CSV])
    rowx = {f.rule: f for f in report.findings if f.scope.kernel == "sgemm_naive_rowx"}
    assert set(rowx) == {"uncoalesced-access", "memory-bound"}
    total = next(k["total_ms"] for k in report.metrics["ncu_kernels"] if k["kernel"] == "sgemm_naive_rowx")
    excess = _evidence(rowx["uncoalesced-access"])["excess sectors"]
    assert excess == pytest.approx(84.85, abs=0.05)  # ncu's own UncoalescedGlobalAccess: 60144222208 of 70883737600
    # L1/TEX is the kernel's busiest unit, so its time is set by the traffic it moves: the waste's share of it
    assert rowx["uncoalesced-access"].impact_ms == pytest.approx(total * excess / 100, rel=1e-3)
    assert rowx["memory-bound"].impact_ms == 0
    assert _evidence(rowx["memory-bound"])["primary finding on this kernel"] == "uncoalesced-access"


def test_uncoalesced_saving_against_the_coalesced_twin() -> None:
    """The saving predicted for uncoalesced accesses, against the measured gain of the same work coalesced: the
    naive transpose against its shared-memory-tiled version (one kernel name, grid and block, two reports), and
    sgemm_naive_rowx against sgemm_naive (the same product with lanes walking columns). Each within 10 points."""
    pairs = []
    naive, tiled = (analyze([SAMPLES / f"ncu-h100-transpose-{v}"]) for v in ("naive", "tiled"))
    pairs.append((naive, "transpose", _ncu_total_ms(naive, "transpose"), _ncu_total_ms(tiled, "transpose")))
    sol = analyze([SOL_CSV])
    pairs.append((sol, "sgemm_naive_rowx", _ncu_total_ms(sol, "sgemm_naive_rowx"), _ncu_total_ms(sol, "sgemm_naive")))
    for report, kernel, before_ms, after_ms in pairs:
        finding = next(f for f in report.findings if f.rule == "uncoalesced-access" and f.scope.kernel == kernel)
        predicted = 100.0 * finding.impact_ms / before_ms
        measured = 100.0 * (1.0 - after_ms / before_ms)
        assert abs(predicted - measured) < 10, (kernel, predicted, measured)


def _ncu_total_ms(report: Report, kernel: str) -> float:
    return sum(k["total_ms"] for k in report.metrics["ncu_kernels"] if k["kernel"] == kernel)


@pytest.fixture(scope="module")
def sol_rep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The H100 report, unpacked from the sample's .xz."""
    out = tmp_path_factory.mktemp("sol") / "gemm_sol.ncu-rep"
    with lzma.open(SOL / "gemm_sol.ncu-rep.xz") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@requires_ncu_report
def test_h100_report_and_csv_give_the_same_verdicts(sol_rep: Path) -> None:
    report = analyze([sol_rep])
    _assert_same_diagnosis(report, analyze([SOL_CSV]))
    rows = [r for r in report.metrics["ncu_rules_vs_tracedoc"] if r["kernel"] == BIG_GEMM]
    arrive = next(r for r in rows if r["ncu_rule"] == "CPIStall" and r["ncu_title"] == "Warpgroup Arrive Stalls")
    assert arrive["tracedoc_rule"] == "warp-stall-gmma" and "tensor-core" in arrive["tracedoc_view"]
    sol = next(r for r in rows if r["ncu_rule"] == "SOLBottleneck")
    assert sol["tracedoc_view"] == "judged by tracedoc rule compute-bound"


# --- Numbers no profiler writes (edited copies of the real exports) ------------------------------------------------
BIG = "1" + "0" * 24


def _edited_csv(tmp_path: Path, source: Path, column: str, value: str | None = None, unit: str | None = None) -> Path:
    """A copy of a real export with the first launch's `column` set to `value` and/or its unit row to `unit`."""
    with source.open(newline="") as f:
        rows = list(csv.reader(f))
    i = rows[0].index(column)
    if value is not None:
        rows[2][i] = value
    if unit is not None:
        rows[1][i] = unit
    out = tmp_path / source.name
    with out.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    return out


@pytest.mark.parametrize("source, column, value, unit, says", [
    (H200_CSV, "Context", BIG, None, "context 1e+24 is out of range"),
    (H200_CSV, "ID", BIG, None, "launch id 1e+24 is out of range"),
    (H200_CSV, "launch__grid_size", BIG, None, "launch__grid_size = 1e+24 is out of range"),
    (H200_CSV, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", BIG, None,
     "% of peak is no measurement"),
    (A40_CSV_SCALED, "launch__registers_per_thread", None, "Gbyte", "registers per thread 1.6e+10 is out of range"),
    (A40_CSV, "Context", "1" + "0" * 400, None, "context of more than 308 digits is out of range"),
    (A40_CSV, "Context", "9" * 5000, None, "context of more than 308 digits is out of range"),
    (A40_CSV, "ID", "-" + "9" * 5000, None, "launch id of more than 308 digits is out of range"),
    (A40_CSV, "Context", "0" * 4500 + "9" * 20, None, "context 1e+20 is out of range"),
], ids=["context", "id", "grid-size", "tensor-pct", "rescaled-registers", "context-401-digits",
        "context-5000-digits", "id-5000-digits", "context-4500-zeros"])
def test_numbers_past_their_range_are_rejected_in_one_line(tmp_path: Path, source: Path, column: str,
                                                           value: str | None, unit: str | None, says: str) -> None:
    """Edited copies of the H200 and A40 exports: values of 10^24, of hundreds and thousands of digits (past a
    float's range, past the digits Python converts to an integer: the fuzzer's mutant ncu-csv/extreme/302687343
    exited 3 on 401), or a unit row rescaled so that a count passes the 32-bit range, give exit 2 and one line
    instead of an overflow traceback."""
    code, output = _analyze_cli(_edited_csv(tmp_path, source, column, value, unit))
    assert code == 2 and len(output.splitlines()) == 1, output
    assert says in output, output


def test_kernel_names_stay_data(tmp_path: Path) -> None:
    """An edited copy of the H200 export whose softmax is renamed with a quote, format braces and Rich markup: the
    name reaches no SQL text or message template, and comes back as written."""
    text = H200_CSV.read_text()
    softmax = re.search(r'"(void at::<unnamed>::cunn_SoftMaxForwardReg<[^"]*)"', text).group(1)
    odd = "k';DROP_TABLE--{total_ms}[bold]x[/bold]"
    path = tmp_path / "odd.raw.base-units.csv"
    path.write_text(text.replace(f'"{softmax}"', f'"void {odd}(float*)"'))
    report = analyze([path], use_cache=False)
    latency = next(f for f in report.findings if f.rule == "latency-bound")
    assert latency.scope.kernel == odd and latency.message.startswith(odd + " (grid 8192,1,1")
