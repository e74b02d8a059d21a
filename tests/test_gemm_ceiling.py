"""GEMM kernels of an ncu report against the cuBLAS ceiling the GEMM ladder measured (gemm_ladder.json): the H100
sample's hand-written kernels and cuBLAS checked against an independent reading of the CSV and the JSON, and the
cases where no ceiling applies or the measurements are bad."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli

LADDER = SAMPLES / "gemm-ladder-ncu"
LADDER_JSON = LADDER / "gemm_ladder.json"
LADDER_CSV = LADDER / "gemm_ladder_h100_full.raw.base-units.csv"
H200_CSV = SAMPLES / "ncu-h200-torch-csv" / "h200_torch_gemm_softmax_full.raw.base-units.csv"
CUBLAS = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def ncu_durations_ns(path: Path) -> dict[str, float]:
    """Kernel name → gpu__time_duration.sum (ns), read straight from the CSV (one launch per kernel here)."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    header, data = rows[0], rows[2:]  # row 1 holds the units
    name, duration = header.index("Kernel Name"), header.index("gpu__time_duration.sum")
    return {r[name]: float(r[duration].replace(",", "")) for r in data}


def cublas_ms(doc: dict, size: int) -> float:
    [row] = [r for r in doc["results"] if r["rung"] == "cublas" and r["m"] == r["n"] == r["k"] == size]
    return row["ms"]


def edited_ladder(tmp_path: Path, edit) -> Path:
    """The sample's CSV beside an edited copy of its gemm_ladder.json; returns the folder."""
    folder = tmp_path / "ladder"
    folder.mkdir()
    (folder / LADDER_CSV.name).write_bytes(LADDER_CSV.read_bytes())
    doc = json.loads(LADDER_JSON.read_text())
    edit(doc)
    (folder / "gemm_ladder.json").write_text(json.dumps(doc))
    return folder


def test_each_rung_against_cublas_on_the_same_product() -> None:
    report = analyze([LADDER])
    rows = {r["kernel"]: r for r in report.metrics["ncu_cublas_ceiling"]}
    assert set(rows) == {"gemm_naive", "gemm_tiled", "gemm_wmma", CUBLAS}
    doc = json.loads(LADDER_JSON.read_text())
    ceiling_ms = cublas_ms(doc, 4096)
    for name, ns in ncu_durations_ns(LADDER_CSV).items():
        row = rows[name]
        assert row["product"] == "4096×4096×4096" and row["dtype"] == "bf16"
        # the same FLOPs on both sides, so the share is cuBLAS's time over the kernel's
        assert row["pct_of_cublas"] == pytest.approx(100 * ceiling_ms * 1e6 / ns, rel=2e-3)
        assert row["cublas_tflop_per_s"] == pytest.approx(2 * 4096**3 / ceiling_ms / 1e9, rel=1e-3)
        assert row["cublas_sm_clock_mhz"] == 1980 and 1300 < row["sm_clock_mhz"] < 1700  # ncu's locked clock
    assert rows["gemm_naive"]["pct_of_cublas"] < 1 < rows["gemm_tiled"]["pct_of_cublas"] < 10
    assert 10 < rows["gemm_wmma"]["pct_of_cublas"] < 30 and 80 < rows[CUBLAS]["pct_of_cublas"] < 100
    fired = {f.scope.kernel: f for f in report.findings if f.rule == "below-cublas-ceiling"}
    assert set(fired) == {"gemm_naive", "gemm_tiled", "gemm_wmma"}
    wmma = fired["gemm_wmma"]
    assert wmma.impact_ms == pytest.approx(rows["gemm_wmma"]["saving_ms"], abs=1e-3)
    assert wmma.impact_ms == pytest.approx(rows["gemm_wmma"]["total_ms"] - 2 * 4096**3 / 763.396e12 * 1e3, rel=1e-3)
    assert "4096×4096×4096 product" in wmma.message and "763 TFLOP/s cuBLAS" in wmma.message


def test_far_below_cublas_is_the_primary_finding_the_rest_its_facets() -> None:
    """The naive rung: five findings used to claim 86 + 46 + 33 + 33 + 32 % of its time. Now below-cublas-ceiling
    claims its saving, memory-bound (L1/TEX) and no-tensor-cores are facets that claim nothing, and its load stalls
    are listed on the primary finding instead of being findings of their own."""
    report = analyze([LADDER])
    naive = {f.rule: f for f in report.findings if f.scope.kernel == "gemm_naive" and f.rule != "ncu-verdict-overruled"}
    assert set(naive) == {"below-cublas-ceiling", "memory-bound", "no-tensor-cores"}
    [kernel] = [k for k in report.metrics["ncu_kernels"] if k["kernel"] == "gemm_naive"]
    assert 0 < naive["below-cublas-ceiling"].impact_ms <= kernel["total_ms"]
    for rule in ("memory-bound", "no-tensor-cores"):
        assert naive[rule].impact_ms == 0
        assert "Part of the below-cublas-ceiling finding on this kernel" in naive[rule].message
    evidence = {e.name: e.value for e in naive["below-cublas-ceiling"].evidence}
    stalls = evidence["top stall reasons (% of the cycles between two instructions)"]
    assert stalls.split(", ")[0].startswith("long_scoreboard") and "lg_throttle" in stalls
    assert "symptoms of the L1/TEX limit" in naive["below-cublas-ceiling"].message


def test_no_ladder_no_ceiling() -> None:
    report = analyze([LADDER_CSV])
    assert report.metrics["ncu_cublas_ceiling"] == []
    assert not any(f.rule == "below-cublas-ceiling" for f in report.findings)


def test_a_ceiling_is_of_the_same_gpu_model() -> None:
    """The H200's cuBLAS GEMMs are not held against timings taken on an H100, and the ncu page says why."""
    from tracedoc.pages import ncu

    report = analyze([H200_CSV, LADDER_JSON])
    assert report.metrics["ncu_kernels"] and report.metrics["ncu_cublas_ceiling"] == []
    assert {r["gpu"] for r in report.metrics["gemm_ladder_cublas"]} == {"NVIDIA H100 80GB HBM3"}
    [section] = [s for s in ncu.sections(report) if s.title == "Against cuBLAS"]
    assert section.empty.startswith("The GEMM ladder timed cuBLAS on NVIDIA H100 80GB HBM3: 2048×2048×2048, "
                                    "4096×4096×4096, 8192×8192×8192; no GEMM kernel")


def test_host_bound_timings_are_no_ceiling(tmp_path: Path) -> None:
    """An edited copy: the 4096³ cuBLAS timing marked as set by the CPU's launches (as under ncu) is ignored."""
    def host_bound(doc: dict) -> None:
        for r in doc["results"]:
            if r["rung"] == "cublas" and r["m"] == 4096:
                r["gpu_bound"] = False

    report = analyze([edited_ladder(tmp_path, host_bound)])
    assert report.metrics["ncu_cublas_ceiling"] == []


def test_the_fastest_cublas_timing_of_a_size_is_the_ceiling(tmp_path: Path) -> None:
    """Two timings of the same size (an edited copy with a second, slower 4096³ cuBLAS row): the faster one counts."""
    def slower_twin(doc: dict) -> None:
        [row] = [r for r in doc["results"] if r["rung"] == "cublas" and r["m"] == 4096]
        doc["results"].append({**row, "ms": row["ms"] * 2})

    rows = analyze([edited_ladder(tmp_path, slower_twin)]).metrics["ncu_cublas_ceiling"]
    assert len(rows) == 4 and all(r["cublas_tflop_per_s"] == pytest.approx(763.396, abs=1e-3) for r in rows)


def test_measurements_with_sorted_keys_are_recognised(tmp_path: Path) -> None:
    """The same file rewritten with its keys sorted (the tag no longer first) is still read."""
    (tmp_path / LADDER_CSV.name).write_bytes(LADDER_CSV.read_bytes())
    (tmp_path / "timings.json").write_text(json.dumps(json.loads(LADDER_JSON.read_text()), sort_keys=True))
    assert len(analyze([tmp_path]).metrics["ncu_cublas_ceiling"]) == 4


@pytest.mark.parametrize("content, needle", [
    (None, "truncated or corrupt GEMM ladder JSON"),
    ({"version": 2}, "version 2"),
    ({"results": [{"m": 4096, "n": 4096, "k": -1, "rung": "cublas", "ms": 0.2}]}, "positive integers"),
    ({"results": [{"m": 4096, "n": 4096, "k": 4096, "rung": "<script>", "ms": 0.2}]}, "unknown rung"),
    ({"results": [{"m": 4096, "n": 4096, "k": 4096, "rung": "cublas", "ms": "fast"}]}, "ms must be a number"),
    ({"gpu": None}, "without a 'gpu' string"),
])
def test_bad_measurements_are_one_line_exit_2(tmp_path: Path, content: dict | None, needle: str) -> None:
    path = tmp_path / "gemm_ladder.json"
    text = LADDER_JSON.read_text()
    if content is None:
        path.write_text(text[: len(text) // 2])  # cut in half
    else:
        path.write_text(json.dumps({**json.loads(text), **content}))
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
