"""MFU, HFU, MBU and the operator view against ground truth: traces of training steps and an eager decode loop
recorded on an H200 with record_shapes=True, beside torch.utils.flop_counter.FlopCounterMode's FLOPs of the same
step and its time between CUDA events without the profiler (tests/data/efficiency-h200/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from tracedoc.api import analyze
from tracedoc.cli import cli
from tracedoc.options import Peaks
from tracedoc.store.modules import module_file

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "efficiency-h200"
COUNTS = json.loads((DATA / "counts.json").read_text())
TRAINING = ("gpt-step-base", "gpt-step-checkpoint", "gpt-step-gpt2", "gpt-step-gemm")


def report_of(case: str, tmp_path: Path, **kw):
    return analyze([DATA / f"{case}.trace.json.gz"], cache_dir=tmp_path, **kw)


def rank_row(report) -> dict:
    return next(r for r in report.efficiency if r["step"] is None)


@pytest.mark.parametrize("case", [*TRAINING, "decode-eager-shapes"])
def test_flops_per_step_match_flop_counter_mode(case: str, tmp_path: Path) -> None:
    """Model FLOPs per step within 2 % of FlopCounterMode's count (the checkpointed step: its hardware FLOPs,
    since FlopCounterMode counts the recomputation it sees)."""
    report = report_of(case, tmp_path)
    truth = COUNTS[case]["flops_per_step"]
    steps = [r for r in report.efficiency if r["step"] is not None]
    assert len(steps) >= 2
    key = "hardware_flops" if case == "gpt-step-checkpoint" else "model_flops"
    for row in steps:
        assert row[key] == pytest.approx(truth, rel=0.02), (row["step"], row[key], truth)


@pytest.mark.parametrize("case", TRAINING)
def test_mfu_matches_cuda_event_ground_truth(case: str, tmp_path: Path) -> None:
    """MFU within 3 points of FlopCounterMode's FLOPs ÷ the CUDA-event step time ÷ the peak tracedoc chose, and
    that peak is the H200's dense bf16 one from the datasheet, not the sparse figure."""
    report = report_of(case, tmp_path)
    row = rank_row(report)
    peak = row["peak"]
    assert peak["gpu"] == "NVIDIA H200 SXM" and peak["dtype"] == "bf16"
    assert peak["tflops"] == pytest.approx(1979 / 2) and "datasheet" in peak["source"]
    flops = COUNTS["gpt-step-base" if case == "gpt-step-checkpoint" else case]["flops_per_step"]
    truth_pct = 100 * flops / (COUNTS[case]["step_ms_cuda_events"] / 1e3) / (peak["tflops"] * 1e12)
    assert row["mfu_pct"] == pytest.approx(truth_pct, abs=3), (row["mfu_pct"], truth_pct)
    assert row["bound"] == "compute" and row["flop_model_coverage_pct"] > 95
    assert report.summary["efficiency"].startswith(f"MFU {row['mfu_pct']:.1f}% of NVIDIA H200 SXM bf16 dense")


def test_recomputation_counts_in_hfu_not_mfu(tmp_path: Path) -> None:
    """Activation checkpointing: forward products run again in backward. The model's FLOPs stay those of the step
    without checkpointing; the hardware's are FlopCounterMode's count of the checkpointed step; HFU > MFU."""
    row = rank_row(report_of("gpt-step-checkpoint", tmp_path))
    assert row["model_flops"] == pytest.approx(COUNTS["gpt-step-base"]["flops_per_step"], rel=0.02)
    assert row["hardware_flops"] == pytest.approx(COUNTS["gpt-step-checkpoint"]["flops_per_step"], rel=0.02)
    assert row["hfu_pct"] > row["mfu_pct"] + 5
    assert rank_row(report_of("gpt-step-base", tmp_path))["hfu_pct"] is None


def test_decode_is_memory_bound_and_judged_by_mbu(tmp_path: Path) -> None:
    """The eager decode loop: far under the ridge point, so MBU leads; its bytes come within 10 % of what each
    token must read (every weight and the KV cache), and low-mbu names the ops and the idle GPU."""
    report = report_of("decode-eager-shapes", tmp_path)
    row = rank_row(report)
    assert row["bound"] == "memory"
    assert row["bytes"] == pytest.approx(COUNTS["decode-eager-shapes"]["weights_kv_bytes_per_step"], rel=0.10)
    assert report.summary["efficiency"].startswith("MBU")
    finding = next(f for f in report.findings if f.rule == "low-mbu")
    assert "aten::linear 1×8192 · 8192×2048" in finding.message and "idles" in finding.message
    assert finding.impact_ms > 0
    assert "https://pytorch.org/blog/accelerating-generative-ai-2/" in finding.references  # a decode step's link


def test_low_mfu_names_the_badly_shaped_products(tmp_path: Path) -> None:
    """GPT-2's vocabulary of 50257 makes the output projection and its two backward products the step's slowest
    GEMMs, far below the bf16 peak: low-mfu names them and the dimension that is no multiple of 64."""
    report = report_of("gpt-step-gpt2", tmp_path)
    finding = next(f for f in report.findings if f.rule == "low-mfu")
    assert "50257 no multiple of 64" in finding.message
    assert "aten::mm 8192×50257 · 50257×768" in finding.message
    assert finding.fix.startswith("Pad or choose the products' dimensions to multiples of 64")
    # the saving is drawn from the GPU's computing time, and is at most the steps' time
    assert 0 < finding.impact_ms < sum(r["step_ms"] for r in report.efficiency if r["step"] is not None)


@pytest.mark.parametrize("case", ["gpt-step-gemm", "gpt-step-base", "gpt-step-checkpoint"])
def test_low_mfu_quiet_near_the_roofline(case: str, tmp_path: Path) -> None:
    """Steps whose products run near their ceiling (large bf16 GEMMs; the 8-block GPT at 54 % MFU) raise no
    low-mfu."""
    assert not [f for f in report_of(case, tmp_path).findings if f.rule in ("low-mfu", "low-mbu")]


def test_operator_view(tmp_path: Path) -> None:
    """The operator view: aten ops by GPU time with their kernels; a product's TFLOP/s is its FLOPs over the GPU
    time of the kernels it launched, and its share of the step's work adds up with the others' to the whole."""
    report = report_of("gpt-step-base", tmp_path)
    ops = report.operators
    assert ops[0]["op"] in ("aten::mm", "aten::linear") and ops[0]["kind"] == "gemm"
    for o in ops:
        if o["flops"]:
            assert o["tflops"] == pytest.approx(o["flops"] / (o["gpu_ms"] / 1e3) / 1e12, rel=1e-3)
            assert 0 < o["roofline_pct"] <= 100
    assert any(k["name"].startswith("nvjet") for k in ops[0]["kernels"])
    assert 95 < sum(o["share_pct"] for o in ops) <= 100.5
    text = report.to_json()
    assert '"operators"' in text and '"efficiency"' in text
    frame = report.frames["operators"]  # the same rows for notebooks, kernels as text
    assert frame.height == len(ops) and frame["kernels"][0].startswith(ops[0]["kernels"][0]["name"])
    assert report.frames["efficiency"]["peak_tflops"][0] == pytest.approx(989.5)


def test_cuda_graph_trace_says_why_and_takes_user_flops(tmp_path: Path) -> None:
    """A decode loop replayed from a CUDA graph has no operators in the trace: MFU is unavailable and the headline
    says why; --flops-per-step and --bytes-per-step give the figures from the step time."""
    trace = [ROOT / "samples" / "decode-cudagraph" / "trace.json.gz"]
    report = analyze(trace, cache_dir=tmp_path)
    assert "CUDA graphs" in report.summary["efficiency"] and rank_row(report)["mfu_pct"] is None
    counts = COUNTS["decode-eager-shapes"]
    given = analyze(trace, cache_dir=tmp_path, peaks=Peaks(flops_per_step=counts["flops_per_step"],
                                                             bytes_per_step=counts["weights_kv_bytes_per_step"]))
    row = rank_row(given)
    assert row["bound"] == "memory" and row["note"] is None
    assert row["mbu_pct"] == pytest.approx(
        100 * counts["weights_kv_bytes_per_step"] / (row["step_ms"] / 1e3) / (row["peak"]["gbps"] * 1e9), rel=1e-3)


def test_cli_peak_options_override_the_table(tmp_path: Path) -> None:
    """--peak-tflops replaces the datasheet peak: MFU scales by the ratio and the peak's source says so."""
    trace = str(DATA / "gpt-step-gemm.trace.json.gz")
    out = CliRunner().invoke(cli, ["analyze", trace, "--format", "json", "--cache-dir", str(tmp_path),
                                    "--peak-tflops", "500", "--peak-gbps", "2000"])
    assert out.exit_code == 0, out.output
    row = next(r for r in json.loads(out.output)["efficiency"] if r["step"] is None)
    base = rank_row(report_of("gpt-step-gemm", tmp_path))
    assert row["mfu_pct"] == pytest.approx(base["mfu_pct"] * 989.5 / 500, rel=1e-3)
    assert row["peak"]["source"] == "--peak-tflops and --peak-gbps"
    bad = CliRunner().invoke(cli, ["analyze", trace, "--peak-tflops", "0"])
    assert bad.exit_code == 2


@pytest.mark.parametrize(("name", "gpu"), [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"), ("NVIDIA H200", "NVIDIA H200 SXM"), ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
    ("NVIDIA H20", "NVIDIA H20"), ("NVIDIA H800", "NVIDIA H800 SXM"), ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM"), ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("NVIDIA L40S", "NVIDIA L40S"), ("NVIDIA L4", "NVIDIA L4"), ("NVIDIA A10", "NVIDIA A10"),
    ("NVIDIA B200", "NVIDIA B200"), ("NVIDIA GB200", "NVIDIA GB200"), ("NVIDIA A10G", None),
    ("Tesla V100-SXM2-32GB", None), ("AMD Instinct MI300X", None)])
def test_peak_table_matches_device_names(name: str, gpu: str | None) -> None:
    """Device names as the drivers write them pick the right row (H200 NVL before H200, L40S not L4, A10 not
    A100); a GPU the table lacks gets none."""
    con = duckdb.connect()
    con.execute("CREATE TABLE sources (source_id INTEGER)")
    con.execute("CREATE TABLE devices (source_id INTEGER, device INTEGER, name VARCHAR)")
    con.execute("INSERT INTO sources VALUES (0)")
    con.execute("INSERT INTO devices VALUES (0, 0, ?)", [name])
    con.execute(module_file("efficiency.peaks").read_text())
    found, dense, sparse_half = con.execute("""
        SELECT gpu, bf16_tflops, source LIKE '%halved%' FROM efficiency_peaks""").fetchone()
    assert found == gpu
    if gpu is not None:
        assert dense is not None and sparse_half


def test_convolution_flops_from_concrete_inputs(tmp_path: Path) -> None:
    """TimeSformer's patch embedding (a public H100 trace): conv 16×16 stride 16 on 224×224 frames. Its FLOPs come
    from the stride and padding the trace's Concrete Inputs give: 2·N·Cout·Cin·kh·kw·14·14."""
    from tracedoc.api import input_files, open_store

    store, _ = open_store(input_files([ROOT / "tests" / "data" / "tracelens-timesformer-stacks"]), None)
    with store:
        store.include("efficiency.ops")
        rows = store.query("SELECT name, flops, shape FROM efficiency_flop_ops WHERE kind = 'conv'")
    assert rows and all(r["name"] == "aten::convolution" for r in rows)
    assert rows[0]["shape"].startswith("128×3×224×224 · 768×3×16×16")
    assert rows[0]["flops"] == 2 * 128 * 768 * 3 * 16 * 16 * 14 * 14


def test_distributed_report_gives_the_same_efficiency(tmp_path: Path) -> None:
    """Over Dask workers (one rank each), the efficiency rows and the operator view equal the local report's: each
    rank's figures come from its own trace (DDP with shapes, two H200 ranks)."""
    from tracedoc.scale import ClusterSpec, analyze_distributed

    ranks = ROOT / "tests" / "data" / "ddp-larger-batch-shapes"
    local = analyze([ranks], cache_dir=tmp_path / "local")
    spread = analyze_distributed([ranks], ClusterSpec(workers=1), cache_dir=tmp_path / "spread")
    assert local.efficiency and local.operators
    assert spread.efficiency == local.efficiency and spread.operators == local.operators
    assert spread.summary["efficiency"] == local.summary["efficiency"]
    assert [f.rule for f in spread.findings] == [f.rule for f in local.findings]


def test_diff_compares_mfu_and_the_operators_time_and_tflops(tmp_path: Path) -> None:
    """`tracedoc diff` of the GPT-2-shaped step (16 % MFU) against the GPT-style base step (54 %): each side's MFU
    as its own report gives it, and the operators whose GPU time per step changed most, with their TFLOP/s."""
    before, after = DATA / "gpt-step-gpt2.trace.json.gz", DATA / "gpt-step-base.trace.json.gz"
    out = tmp_path / "diff.json"
    result = CliRunner().invoke(cli, ["diff", str(before), str(after), "--format", "json", "--out", str(out),
                                      "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    eff = json.loads(out.read_text())["efficiency"]
    own = [rank_row(analyze([p], cache_dir=tmp_path / "cache"))["mfu_pct"] for p in (before, after)]
    assert eff["ranks"] == [{"rank": 0, "figure": "MFU", "before": own[0], "after": own[1]}]
    ops = {o["op"]: o for o in eff["operators"]}
    changes = [abs(o["change_ms"]) for o in eff["operators"]]
    assert changes == sorted(changes, reverse=True) and len(ops) == 10
    mm = ops["aten::mm"]
    assert mm["after_tflops"] > 3 * mm["before_tflops"]  # the 50257-wide products run far below the roof
    assert mm["change_ms"] == pytest.approx(mm["after_ms"] - mm["before_ms"], abs=1e-3)
    text = CliRunner().invoke(cli, ["diff", str(before), str(after), "--cache-dir", str(tmp_path / "cache")]).output
    assert "MFU 16.1% → 53.9%" in text and "aten::mm" in text


def test_training_step_heads_with_mfu_and_mbu_beside(tmp_path: Path) -> None:
    """A step with a backward pass is a training step: the headline gives its MFU first with its MBU beside it; the
    eager decode (no backward, memory-bound) is a decode step, headed by its MBU alone."""
    report = report_of("gpt-step-base", tmp_path)
    row = rank_row(report)
    assert row["workload"] == "training"
    assert report.summary["efficiency"] == (f"MFU {row['mfu_pct']:.1f}% of NVIDIA H200 SXM bf16 dense, "
                                            f"MBU {row['mbu_pct']:.1f}% of its HBM bandwidth")
    decode = report_of("decode-eager-shapes", tmp_path)
    assert rank_row(decode)["workload"] == "decode"
    assert decode.summary["efficiency"].startswith("MBU") and "MFU" not in decode.summary["efficiency"]


def test_memory_bound_training_step_gets_training_advice(tmp_path: Path) -> None:
    """The GPT-2-shaped training step judged against a peak of 100 PFLOP/s (--peak-tflops: the ridge point moves
    past every op, so the real step reads as memory-bound, as a conv net's does on the H200): the headline still
    leads with MFU, and low-mbu's advice is a training step's (fuse the norms and elementwise ops), with its op mix
    in the message, not the decode advice it gives the eager decode loop."""
    report = report_of("gpt-step-gpt2", tmp_path, peaks=Peaks(peak_tflops=1e5))
    row = rank_row(report)
    assert row["bound"] == "memory" and row["workload"] == "training"
    assert report.summary["efficiency"].startswith("MFU 0.2% of the given peak bf16 dense, MBU 14.")
    finding = next(f for f in report.findings if f.rule == "low-mbu")
    assert "(training step)" in finding.message
    assert "normalisation" in finding.message and "elementwise" in finding.message
    assert "torch.compile" in finding.fix and "decode" not in finding.fix and "CUDA graph" not in finding.fix
    decode = next(f for f in report_of("decode-eager-shapes", tmp_path).findings if f.rule == "low-mbu")
    assert "(decode step)" in decode.message and "capture the decode step in a CUDA graph" in decode.fix
    assert "torch.compile(model)" not in decode.fix


def test_bytes_per_step_alone_gives_mbu_on_cuda_graphs(tmp_path: Path) -> None:
    """A decode replayed from CUDA graphs has no operators in the trace; --bytes-per-step alone (its weights and KV
    cache read per step) gives MBU over the trace's step time, and MFU says it needs --flops-per-step."""
    trace = [ROOT / "samples" / "decode-cudagraph" / "trace.json.gz"]
    per_step = COUNTS["decode-eager-shapes"]["weights_kv_bytes_per_step"]
    report = analyze(trace, cache_dir=tmp_path, peaks=Peaks(bytes_per_step=per_step))
    row = rank_row(report)
    assert row["note"] is None and row["mfu_pct"] is None
    assert row["mbu_pct"] == pytest.approx(100 * per_step / (row["step_ms"] / 1e3) / (row["peak"]["gbps"] * 1e9),
                                           rel=1e-3)
    assert report.summary["efficiency"] == (f"MBU {row['mbu_pct']:.1f}% of NVIDIA H100 SXM HBM bandwidth "
                                            "(MFU needs --flops-per-step)")


CONV_STEP = ROOT / "samples" / "conv-step"
AUTOCAST_STEP = ROOT / "samples" / "autocast-step"
AUTOCAST_GEMM = ROOT / "samples" / "autocast-gemm"
COMPILE_AUTOTUNE = ROOT / "samples" / "compile-autotune"


@pytest.mark.skipif(not CONV_STEP.exists(), reason="the conv-step sample is recorded apart (workloads/conv_step)")
def test_conv_training_step_is_judged_as_training(tmp_path: Path) -> None:
    """conv-step, a ResNet-50 bf16 training step: memory-bound by its ops (batch norm, elementwise), yet headed by
    its MFU with its MBU beside it; low-mbu's advice is a conv net's (fuse, channels_last), never decode's."""
    report = analyze([CONV_STEP], cache_dir=tmp_path)
    row = rank_row(report)
    assert row["workload"] == "training" and row["bound"] == "memory"
    assert report.summary["efficiency"].startswith(f"MFU {row['mfu_pct']:.1f}% of NVIDIA H200 SXM bf16 dense, MBU ")
    finding = next(f for f in report.findings if f.rule == "low-mbu")
    assert "(training step)" in finding.message
    assert "Per step, the ops without matrix products take: normalisation " in finding.message
    assert "channels_last" in finding.fix and "torch.compile" in finding.fix
    for decode in ("decode", "CUDA graph", "tokens"):
        assert decode not in finding.fix
    assert finding.references and not any("generative-ai" in r for r in finding.references)  # LLM serving's


@pytest.mark.skipif(not AUTOCAST_STEP.exists(), reason="the autocast-step sample is recorded apart")
def test_autocast_weight_casts_are_counted_apart(tmp_path: Path) -> None:
    """autocast-step: fp32 Linear weights cast to bf16 inside every product, once a step. tracedoc counts the casts
    apart from the products: their bytes equal the sample's truth (135,528,448 fp32 elements read and written as
    bf16: 813,170,688 bytes a step), and the finding names them with their time."""
    import yaml
    truth = yaml.safe_load((AUTOCAST_STEP / "expected.yaml").read_text())["truth"]
    report = analyze([AUTOCAST_STEP], cache_dir=tmp_path)
    finding = next(f for f in report.findings if f.rule in ("low-mfu", "low-mbu"))
    assert "fp32 weights cast to bf16 every step" in finding.message and "bf16" in finding.fix
    casts = next(e.value for e in finding.evidence if e.name == "fp32 weights cast to bf16 per step")
    assert 0 < casts < rank_row(report)["step_ms"] / 10
    from tracedoc.api import discover, open_store
    store, _ = open_store(discover([AUTOCAST_STEP]), tmp_path / "store")
    with store:
        store.include("efficiency.findings")
        per_step = store.scalar("SELECT weight_cast_step_bytes FROM efficiency_findings")
    assert per_step == truth["cast_bytes_per_step"]


COMPILE_STEP = ROOT / "samples" / "compile-step"


@pytest.mark.skipif(not COMPILE_STEP.exists(), reason="the compile-step sample is recorded apart")
def test_compiled_step_models_its_triton_kernels(tmp_path: Path) -> None:
    """compile-step: a Llama-style step under torch.compile, 23 % of its kernel time in Inductor's Triton kernels.
    The profiler records each Triton launch as an op with its arguments' shapes: tracedoc gives them bytes (each
    argument once), so nearly all the GPU time has a model, and FLOPs stay FlopCounterMode's (Triton's pointwise and
    reduction kernels do no products); no low-mfu at about 44 % MFU."""
    import yaml
    truth = yaml.safe_load((COMPILE_STEP / "expected.yaml").read_text())["truth"]
    report = analyze([COMPILE_STEP], cache_dir=tmp_path)
    row = rank_row(report)
    assert row["flop_model_coverage_pct"] > 96  # all but the gathers below
    assert row["model_flops"] == pytest.approx(truth["flops_per_step"], rel=0.001)
    triton = [o for o in report.operators if o["op"].startswith("triton_")]
    # a kernel that gathers from an argument (an embedding table, the logits nll_loss picks one of per row) reads
    # a few rows of it: counted whole, the loss kernel moved 49 TB/s, 1030 % of the H200's roofline. Those have no
    # model; every other Triton kernel has its bytes, below the roofline
    gathers = [o for o in triton if "embedding" in o["op"] or "nll_loss" in o["op"]]
    modelled = [o for o in triton if o not in gathers]
    assert gathers and all(not o["bytes"] and o["kind"] is None for o in gathers)
    assert sum(o["gpu_ms"] for o in gathers) < 0.05 * sum(o["gpu_ms"] for o in report.operators)
    assert modelled and all(o["bytes"] > 0 and not o["flops"] and o["kind"] == "memory" for o in modelled)
    assert max(o["roofline_pct"] for o in report.operators) < 100
    assert not [f for f in report.findings if f.rule == "low-mfu"]


def test_low_mfu_advises_only_what_the_step_does_not_do_already() -> None:
    """autocast-gemm: products of 4096 and 11008 (multiples of 64) in bf16 under autocast, and the optimizer fused
    (aten::_fused_adamw_). low-mfu's fix said to pad the dimensions to 64, to run the products in bf16 and to keep
    the optimizer fused, whatever the step did; it says what is left: fuse the other ops, keep the weights in bf16.
    compile-autotune, compiled with max-autotune, was told to use torch.compile."""
    report = analyze([ROOT / "samples" / "autocast-gemm"], use_cache=False)
    fix = next(f for f in report.findings if f.rule == "low-mfu").fix
    assert fix.startswith("Fuse the elementwise, norm and loss ops") and "Keep the weights in bf16" in fix
    assert not any(said in fix for said in ("multiples of 64", "TF32", "fused=True"))
    compiled = analyze([ROOT / "samples" / "compile-autotune"], use_cache=False)  # under torch.compile already
    fix = next(f for f in compiled.findings if f.rule == "low-mfu").fix
    assert fix.startswith("The step is compiled") and "torch.compile" not in fix


def test_a_tensor_lists_element_size_is_its_kernels_not_the_parameters() -> None:
    """autocast-gemm: fp32 parameters under autocast, and aten::cat of bf16 activations. The profiler records no
    dtype for a tensor list, and the parameters' was taken: 4 bytes an element, 8,069 GB/s on an H200 (168 % of its
    peak). The cat's kernel says its element size (CatArrayBatchedCopy<OpaqueType<2u>, …>): 2 bytes."""
    report = analyze([ROOT / "samples" / "autocast-gemm"], use_cache=False)
    cat = next(o for o in report.operators if o["op"] == "aten::cat")
    assert 50 < cat["roofline_pct"] < 100


def test_an_op_whose_list_has_no_size_is_not_modelled_from_its_other_arguments(tmp_path: Path) -> None:
    """An edited copy of memory-leak's trace (its aten::_foreach_mul_ renamed and given GradScaler's unscale
    signature: a list and two scalar tensors): the list takes the parameters' dtype, as an optimizer's does, and
    the op moves the list's bytes. With a name whose lists have no known element size it has no model at all: its
    two scalar tensors (8 bytes) were its bytes, and the op read as far below the roofline."""
    import gzip
    data = json.loads(gzip.decompress((ROOT / "samples" / "memory-leak" / "trace.json.gz").read_bytes()))
    for name, path in (("aten::_amp_foreach_non_finite_check_and_unscale_", tmp_path / "unscale.json"),
                       ("aten::_made_up_list_op_", tmp_path / "unknown.json")):
        for event in data["traceEvents"]:
            if event.get("name") in ("aten::_foreach_mul_", "aten::_amp_foreach_non_finite_check_and_unscale_",
                                     "aten::_made_up_list_op_"):
                event["name"] = name
                event["args"].update({"Input type": ["TensorList", "float", "float"],
                                      "Input Dims": [event["args"]["Input Dims"][0], [], []],
                                      "Concrete Inputs": ["", "", ""]})
        path.write_text(json.dumps(data))
    plain = {o["op"]: o for o in analyze([ROOT / "samples" / "memory-leak"], use_cache=False).operators}
    unscale = {o["op"]: o for o in analyze([tmp_path / "unscale.json"], use_cache=False).operators}
    unknown = {o["op"]: o for o in analyze([tmp_path / "unknown.json"], use_cache=False).operators}
    lists = plain["aten::_foreach_mul_"]["bytes"] / 2  # read and written back, in place
    assert unscale["aten::_amp_foreach_non_finite_check_and_unscale_"]["bytes"] == pytest.approx(2 * lists + 8,
                                                                                                abs=1e3)
    assert not unknown["aten::_made_up_list_op_"]["bytes"] and unknown["aten::_made_up_list_op_"]["kind"] is None


def test_the_gradient_squared_is_read_once() -> None:
    """memory-leak: Adam's exp_avg_sq.addcmul_(grad, grad) over the parameters' lists. The gradient list was
    counted twice, four passes over 201 MB a call, 4,962 GB/s (103 % of the H200's peak); it is read once."""
    report = analyze([ROOT / "samples" / "memory-leak"], use_cache=False)
    addcmul = next(o for o in report.operators if o["op"] == "aten::_foreach_addcmul_")
    assert addcmul["bytes"] == pytest.approx(3 / 4 * 8_055_029_760)
    assert 50 < addcmul["roofline_pct"] < 100


@pytest.mark.skipif(not COMPILE_AUTOTUNE.exists(), reason="the compile-autotune sample is recorded apart")
def test_triton_gemm_templates_get_flops_and_bytes(tmp_path: Path) -> None:
    """compile-autotune: under max-autotune one product a block runs as Inductor's Triton template
    (triton_tem_..._mm_..., A as an [8, 1024, 16, 64] view, B [1024, 1024], C [8192, 1024]); its FLOPs come from its
    arguments' sizes (k = √(|A|·|B|/|C|) = 1024), so the step's FLOPs equal FlopCounterMode's exactly, and every
    Triton kernel has a model but those that gather (test_compiled_step_models_its_triton_kernels)."""
    import yaml
    truth = yaml.safe_load((COMPILE_AUTOTUNE / "expected.yaml").read_text())["truth"]
    report = analyze([COMPILE_AUTOTUNE], cache_dir=tmp_path)
    row = rank_row(report)
    assert row["model_flops"] == truth["flops_per_step"]
    assert row["flop_model_coverage_pct"] > 96
    templates = [o for o in report.operators if o["op"].startswith("triton_tem_")]
    assert len(templates) == 1 and templates[0]["kind"] == "gemm" and templates[0]["dtype"] == "bf16"
    steps = row["steps"]
    assert templates[0]["flops"] == 2 * 8192 * 1024 * 1024 * 8 * steps  # one 8192×1024×1024 product a block
    assert templates[0]["bytes"] == (8192 * 1024 + 1024 * 1024 + 8192 * 1024) * 2 * 8 * steps
    # its GPU time matches the truth's kernel records within the run-to-run spread
    per_step_ms = templates[0]["gpu_ms"] / steps
    assert per_step_ms == pytest.approx(truth["triton_tem_kernel_ms_per_step"], rel=0.1)


@pytest.mark.skipif(not AUTOCAST_GEMM.exists(), reason="the autocast-gemm sample is recorded apart")
def test_autocast_weight_casts_are_a_part_of_low_mfu(tmp_path: Path) -> None:
    """autocast-gemm: a compute-bound step (1.07B fp32 weights, products of 4096×4096×22016) under autocast. MFU
    without the profiler is 36.5 % (24.08 TFLOP in 66.71 ms): low-mfu fires, not low-mbu, and its message names the
    weights cast to bf16 every step with their time and bytes, the bytes equal to the truth's (5.64 GB a step)."""
    import yaml
    truth = yaml.safe_load((AUTOCAST_GEMM / "expected.yaml").read_text())["truth"]
    report = analyze([AUTOCAST_GEMM], cache_dir=tmp_path)
    rules = {f.rule for f in report.findings}
    assert "low-mfu" in rules and "low-mbu" not in rules
    finding = next(f for f in report.findings if f.rule == "low-mfu")
    assert "fp32 weights cast to bf16 every step" in finding.message and "5.3 GiB moved" in finding.message
    assert "Keep the weights in bf16" in finding.fix
    casts = next(e.value for e in finding.evidence if e.name == "fp32 weights cast to bf16 per step")
    assert 0.5 < casts < 5  # ms a step: 5.64 GB at 1.1 to 11 TB/s
    from tracedoc.api import discover, open_store
    store, _ = open_store(discover([AUTOCAST_GEMM]), tmp_path / "store")
    with store:
        store.include("efficiency.findings")
        per_step = store.scalar("SELECT weight_cast_step_bytes FROM efficiency_findings")
    assert per_step == truth["cast_bytes_per_step"]
