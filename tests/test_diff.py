"""`tracedoc diff` on the bundled pairs of a problem and its fix, checked against the raw traces.

Step times are recomputed here straight from the trace JSON: the GPU work each ProfilerStep#N launched (kernels,
copies and memsets whose runtime call lies inside the step's host range, linked by correlation id) ends at some
time; step N's span is the end of its work minus the end of step N−1's, per rank, and the job's step is the
slowest rank's. That is the definition the diff reads from the time attribution, computed independently, for
every step after the first of the window (the first has no earlier step in the trace). Kernel counts and times
by name are summed from the trace's kernel events.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc.api import discover, open_store
from tracedoc.cli import cli
from tracedoc.diff import Diff, Side, build_diff, load_side
from tracedoc.diff.efficiency import compare_operators
from tracedoc.diff.gallery import diff_name
from tracedoc.diff.gates import new_finding_failures, regression_failures
from tracedoc.diff.render import render
from tracedoc.diff.sections import kernel_sections
from tracedoc.diff.stats import compare, quantile
from tracedoc.diff.steps import step_tables
from tracedoc.saved import read_report

PAIRS = {  # problem → fixed, the rules whose findings the fix must resolve
    ("decode-eager", "decode-cudagraph"): ("launch-bound",),
    ("decode-eager", "decode-compile"): ("launch-bound",),
    ("input-slow", "input-fast"): ("gpu-idle-host-bound", "host-sync"),
    ("ddp-no-overlap", "ddp-overlap"): ("low-comm-overlap",),
    ("fsdp-no-prefetch", "fsdp-prefetch"): ("low-comm-overlap", "host-sync"),
    ("moe-hot-expert", "moe-balanced"): ("expert-imbalance",),
    ("ddp-straggler", "ddp-overlap"): ("straggler-rank",),
    ("host-stall-item", "host-stall-fixed"): ("host-sync",),
}
# Nsight Compute reports: a kernel → its rewrite (the transpose keeps its name, grid and block; each GEMM ladder
# rung is the next rung's predecessor under another name), the rules whose findings the rewrite must resolve.
NCU_PAIRS = {
    ("ncu-h100-transpose-naive", "ncu-h100-transpose-tiled"): ("uncoalesced-access",),
    ("ncu-h100-gemm-naive", "ncu-h100-gemm-tiled"): ("memory-bound",),
    ("ncu-h100-gemm-tiled", "ncu-h100-gemm-wmma"): ("no-tensor-cores", "compute-bound"),
    ("ncu-h100-gemm-wmma", "ncu-h100-gemm-cublas"): ("below-cublas-ceiling", "shared-bank-conflicts"),
}
SIDES = sorted({name for pair in PAIRS for name in pair})


# --- the raw traces, read with the json module -------------------------------------------------------------------

def _trace_files(sample: str) -> list[Path]:
    return sorted((SAMPLES / sample).glob("*.json.gz"))


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def raw_step_spans(events: list[dict[str, Any]]) -> dict[int, float]:
    """{step: ms}, per ProfilerStep#N of one rank's trace.

    A step's own GPU work is what its host range launched (the runtime call inside the range, on its thread,
    linked to the kernel, copy or memset by correlation id). Step N ends where its own work ends — the last step
    where its host range ends, if that is later — and begins where step N−1 ended; the first step begins at its
    host range's start, or later where the GPU was still busy with work queued before it (a prologue).
    """
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    launched_at = {e["args"]["correlation"]: (e["ts"], e.get("tid")) for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    numbers = [int(s["name"].split("#")[1]) for s in steps]
    ends: dict[int, float] = defaultdict(float)
    first_own, others = float("inf"), []
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launched_at.get(e.get("args", {}).get("correlation"))
        step = next((n for n, s in zip(numbers, steps) if launch is not None
                     and s["ts"] <= launch[0] <= s["ts"] + s["dur"] and s.get("tid") == launch[1]), None)
        if step is None:
            others.append(e)
            continue
        ends[step] = max(ends[step], e["ts"] + e["dur"])
        if step == numbers[0]:
            first_own = min(first_own, e["ts"])
    queued = max((e["ts"] + e["dur"] for e in others if e["ts"] < first_own), default=steps[0]["ts"])
    ends[numbers[-1]] = max(ends[numbers[-1]], steps[-1]["ts"] + steps[-1]["dur"])
    starts = [max(steps[0]["ts"], queued)] + [ends[n] for n in numbers[:-1]]
    return {n: (ends[n] - start) / 1000.0 for n, start in zip(numbers, starts)}


def raw_job_steps(sample: str) -> dict[int, float]:
    """The slowest rank's span, step by step."""
    job: dict[int, float] = {}
    for path in _trace_files(sample):
        for step, ms in raw_step_spans(_events(path)).items():
            job[step] = max(job.get(step, 0.0), ms)
    return job


def raw_launch_steps(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int | None]]:
    """Each kernel event of one rank's trace with the ProfilerStep#N whose host range (on its thread) holds the
    runtime call that launched it, linked by correlation id (None: launched outside every step)."""
    steps = [(int(s["name"].split("#")[1]), s) for s in events if s.get("cat") == "user_annotation"
             and str(s.get("name", "")).startswith("ProfilerStep#")]
    launched_at = {e["args"]["correlation"]: (e["ts"], e.get("tid")) for e in events
                   if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out = []
    for e in events:
        if e.get("cat") == "kernel":
            launch = launched_at.get(e.get("args", {}).get("correlation"))
            out.append((e, next((n for n, s in steps if launch is not None and s.get("tid") == launch[1]
                                 and s["ts"] <= launch[0] <= s["ts"] + s["dur"]), None)))
    return out


def raw_kernels(sample: str, steps: set[int]) -> tuple[Counter[str], dict[str, float]]:
    """Kernel launches and total time (ms) by name, over every rank's trace: the kernels launched in ``steps``
    (the judged steps; not the warm-up's, nor work queued before the first)."""
    count: Counter[str] = Counter()
    total: dict[str, float] = defaultdict(float)
    for path in _trace_files(sample):
        for e, step in raw_launch_steps(_events(path)):
            if step in steps:
                count[e["name"]] += 1
                total[e["name"]] += e["dur"] / 1000.0
    return count, total


def raw_ncu_kernels(sample: str) -> dict[str, float]:
    """Profiled kernel time (ms) by kernel name, summed from the raw-page CSV's gpu__time_duration.sum (ns)."""
    total: dict[str, float] = defaultdict(float)
    for path in (SAMPLES / sample).glob("*.raw.base-units.csv"):
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                if row["ID"].strip().isdigit():  # the second row holds units
                    total[row["Kernel Name"]] += float(row["gpu__time_duration.sum"].replace(",", "")) / 1e6
    return dict(total)


# --- fixtures: each side read once per module ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Side]:
    cache = tmp_path_factory.getbasetemp() / "cache"
    return {name: load_side(SAMPLES / name, cache_dir=cache) for name in SIDES}


@pytest.fixture(scope="module")
def diffs(sides: dict[str, Side]) -> dict[tuple[str, str], Diff]:
    return {(b, a): build_diff(sides[b], sides[a]) for b, a in PAIRS}


@pytest.fixture(scope="module")
def saved(sides: dict[str, Side], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each side's report saved as `tracedoc analyze --format json` writes it."""
    folder = tmp_path_factory.mktemp("reports")
    out = {}
    for name, side in sides.items():
        out[name] = folder / f"{name}.json"
        out[name].write_text(side.report.to_json())
    return out


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["diff", *args])


# --- did it get faster, and is that real ---------------------------------------------------------------------------

@pytest.mark.parametrize("pair", list(PAIRS), ids=lambda p: f"{p[0]}->{p[1]}")
def test_step_spans_match_the_raw_traces(pair: tuple[str, str], diffs: dict[tuple[str, str], Diff]) -> None:
    """Every step of the job (the slowest rank's span) has the span the raw traces give, on both sides (within
    0.1 % or 10 µs)."""
    diff = diffs[pair]
    for name, steps in ((pair[0], diff.job.before_steps), (pair[1], diff.job.after_steps)):
        raw = raw_job_steps(name)
        assert set(steps) == set(raw) and len(raw) >= 3, name
        for step, ms in raw.items():
            assert steps[step] == pytest.approx(ms, rel=1e-3, abs=0.01), (name, step)


@pytest.mark.parametrize("pair", list(PAIRS), ids=lambda p: f"{p[0]}->{p[1]}")
def test_the_fix_is_faster_by_the_measured_gain(pair: tuple[str, str], diffs: dict[tuple[str, str], Diff]) -> None:
    """The fixed side is the faster one, by the gain the raw traces give (medians of the slowest rank's steps,
    within 0.2 points), and the distribution's median and p10/p90 are the raw steps'; significant wherever the
    two sides' steps do not overlap at all (with 3 to 5 steps a side, the bootstrap asks no less)."""
    diff = diffs[pair]
    raw_before, raw_after = list(raw_job_steps(pair[0]).values()), list(raw_job_steps(pair[1]).values())
    raw_gain = 100.0 * (1.0 - statistics.median(raw_after) / statistics.median(raw_before))
    change = diff.job.change
    assert change is not None and diff.job.before is not None and diff.job.after is not None
    assert -change.pct == pytest.approx(raw_gain, abs=0.2)
    assert diff.job.before.median_ms == pytest.approx(statistics.median(raw_before), rel=1e-3)
    assert diff.job.after.p90_ms == pytest.approx(quantile(raw_after, 0.9), rel=1e-3)
    assert change.median_ms < 0
    lo, hi = change.ci_pct
    assert lo <= change.pct <= hi
    separated = max(raw_after) < min(raw_before)
    assert change.significant == separated
    assert diff.verdict == ("faster" if separated else "no significant change")


def test_gains_of_the_pairs(diffs: dict[tuple[str, str], Diff]) -> None:
    """The gains the docs quote, as the raw traces give them: big and certain where the fix removes most of the
    step; DDP's bucketed all-reduce gains about 4 %, within the spread of 3 steps a side."""
    gain = {pair: -d.job.change.pct for pair, d in diffs.items() if d.job.change}
    assert gain[("decode-eager", "decode-cudagraph")] > 85
    assert gain[("input-slow", "input-fast")] > 70
    assert 15 < gain[("moe-hot-expert", "moe-balanced")] < 30
    assert 20 < gain[("host-stall-item", "host-stall-fixed")] < 30
    assert 0 < gain[("ddp-no-overlap", "ddp-overlap")] < 8
    assert not diffs[("ddp-no-overlap", "ddp-overlap")].job.change.significant
    assert gain[("decode-eager", "decode-compile")] > 85
    assert 5 < gain[("fsdp-no-prefetch", "fsdp-prefetch")] < 15
    assert 10 < gain[("ddp-straggler", "ddp-overlap")] < 30


# --- kernel profiles: one kernel and its rewrite ------------------------------------------------------------

@pytest.fixture(scope="module")
def ncu_diffs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Diff]:
    cache = tmp_path_factory.getbasetemp() / "cache"
    sides = {name: load_side(SAMPLES / name, cache_dir=cache) for pair in NCU_PAIRS for name in pair}
    return {(b, a): build_diff(sides[b], sides[a]) for b, a in NCU_PAIRS}


@pytest.mark.parametrize("pair", list(NCU_PAIRS), ids=lambda p: f"{p[0]}->{p[1]}")
def test_ncu_rewrite_is_faster_by_the_measured_gain(pair: tuple[str, str],
                                                    ncu_diffs: dict[tuple[str, str], Diff]) -> None:
    """The rewrite is named faster by the gain of its profiled kernel time in the raw CSVs; the kernel is matched
    across the two reports (by name, grid and block for the transpose; as the one kernel rewritten for the ladder's
    rungs), and the rewrite's problem is resolved."""
    diff = ncu_diffs[pair]
    raw_b, raw_a = raw_ncu_kernels(pair[0]), raw_ncu_kernels(pair[1])
    assert len(raw_b) == len(raw_a) == 1
    (name_b, ms_b), (name_a, ms_a) = next(iter(raw_b.items())), next(iter(raw_a.items()))
    assert diff.verdict == "faster"
    assert diff.kernel_time() == pytest.approx((ms_b, ms_a), abs=1e-3)  # the report keeps whole µs
    (row,) = diff.kernels
    assert row.status == "matched"
    assert row.name == (name_b if name_b == name_a else f"{name_b} → {name_a}")
    (ncu,) = diff.ncu
    assert (ncu.before["total_ms"], ncu.after["total_ms"]) == pytest.approx((ms_b, ms_a), abs=1e-3)
    data = diff.to_dict()
    assert data["verdict"] == "faster" and data["ncu_kernels"][0]["before"]["stalls"]
    resolved = {c["rule"] for c in data["findings"]["resolved"]}
    assert set(NCU_PAIRS[pair]) <= resolved
    assert all(c["scope"]["kernel"] == name_b for c in data["findings"]["resolved"])


def test_ncu_transpose_resolves_its_uncoalesced_stores(ncu_diffs: dict[tuple[str, str], Diff]) -> None:
    """The tiled transpose: the same kernel, 86 % faster; the uncoalesced stores gone, the long-scoreboard stall
    still leading (both wait on memory), DRAM now its busiest unit."""
    diff = ncu_diffs[("ncu-h100-transpose-naive", "ncu-h100-transpose-tiled")]
    (ncu,) = diff.ncu
    assert (ncu.kernel, ncu.grid, ncu.block) == ("transpose", "256,256,1", "32,8,1")
    assert (ncu.before["busiest_unit"], ncu.after["busiest_unit"]) == ("L2", "DRAM")
    assert ncu.top_stall()[0] == "long_scoreboard"
    times = diff.kernel_time()
    assert 80 < 100 * (1 - times[1] / times[0]) < 90
    assert "one kernel rewritten" not in " ".join(diff.notes)


def test_ncu_rung_rewrite_is_said() -> None:
    """The one kernel of each rung compared across its two names, and said so."""
    result = _invoke(str(SAMPLES / "ncu-h100-gemm-naive"), str(SAMPLES / "ncu-h100-gemm-tiled"))
    assert result.exit_code == 0, result.output
    assert "Faster: the kernels profiled on both sides took" in result.output
    assert "gemm_naive → gemm_tiled" in result.output
    assert "compared as one kernel rewritten" in result.output


# --- which problems went away ----------------------------------------------------------------------------------

@pytest.mark.parametrize("pair", list(PAIRS), ids=lambda p: f"{p[0]}->{p[1]}")
def test_the_problem_is_resolved(pair: tuple[str, str], diffs: dict[tuple[str, str], Diff],
                                 sides: dict[str, Side]) -> None:
    diff = diffs[pair]
    for rule in PAIRS[pair]:
        before = [f for f in sides[pair[0]].report.findings if f.rule == rule]
        assert before, (pair[0], rule)
        resolved = [c for c in diff.by_status("resolved") if c.finding.rule == rule]
        assert len(resolved) == len(before)
        assert not [c for c in diff.findings if c.finding.rule == rule and c.status != "resolved"]
    assert not diff.by_status("new")


def test_multi_rank_deltas(diffs: dict[tuple[str, str], Diff]) -> None:
    """MoE: the hot expert's rank is the one compared; the balanced router cuts the other rank's wait for it, and
    expert-imbalance is reported gone across ranks."""
    diff = diffs[("moe-hot-expert", "moe-balanced")]
    assert diff.cause_ranks == (1, 1)
    by_rank = {r.steps.rank: r for r in diff.ranks}
    assert set(by_rank) == {0, 1}
    assert by_rank[0].wait_before_ms > 4 * by_rank[0].wait_after_ms
    data = diff.to_dict()
    assert [(c["rule"], c["status"]) for c in data["cross_rank"]] == [("expert-imbalance", "resolved")]
    waits = {c["cause"]: c for c in data["attribution"]["causes"]}
    assert waits["wait_for_peer"]["delta_ms_per_step"] < 0


def test_causes_sum_to_the_step(diffs: dict[tuple[str, str], Diff]) -> None:
    """The causes of the compared rank add up to 100 % of its step on each side, and their ms per step to the
    mean of its steps."""
    for diff in diffs.values():
        assert sum(c.before_pct for c in diff.causes) == pytest.approx(100.0, abs=0.01)
        assert sum(c.after_pct for c in diff.causes) == pytest.approx(100.0, abs=0.01)
        rank_b = next(r for r in diff.ranks if r.steps.rank == diff.cause_ranks[0])
        mean = statistics.fmean(rank_b.steps.before_steps.values())
        assert sum(c.before_ms for c in diff.causes) == pytest.approx(mean, rel=1e-6)


# --- where the time went: kernels ------------------------------------------------------------------------------

@pytest.mark.parametrize("pair", [("decode-eager", "decode-cudagraph"), ("moe-hot-expert", "moe-balanced")],
                         ids=lambda p: f"{p[0]}->{p[1]}")
def test_kernels_match_the_raw_traces(pair: tuple[str, str], diffs: dict[tuple[str, str], Diff]) -> None:
    """Every kernel's launches and total time on each side equal those the trace's judged steps launched; new and
    vanished are exactly the names on one side only."""
    diff = diffs[pair]
    tb, ta = step_tables(diff.before.report, diff.after.report)
    (count_b, total_b), (count_a, total_a) = raw_kernels(pair[0], set(tb.job())), raw_kernels(pair[1], set(ta.job()))
    rows = {k.name: k for k in diff.kernels}
    assert set(rows) == set(count_b) | set(count_a)
    for name, row in rows.items():
        assert (row.before.count if row.before else 0) == count_b.get(name, 0), name
        assert (row.after.count if row.after else 0) == count_a.get(name, 0), name
        assert (row.before.total_ms if row.before else 0.0) == pytest.approx(total_b.get(name, 0.0), abs=1e-3)
        assert (row.after.total_ms if row.after else 0.0) == pytest.approx(total_a.get(name, 0.0), abs=1e-3)
    assert {k.name for k in diff.kernels if k.status == "new"} == set(count_a) - set(count_b)
    assert {k.name for k in diff.kernels if k.status == "vanished"} == set(count_b) - set(count_a)


def test_kernels_slower_per_launch_apart_from_kernels_launched_more_often(diffs: dict[tuple[str, str], Diff]) -> None:
    """A kernel's change per step is split into its mean time per launch and its launches per step, from the raw
    traces: the nvjet GEMM tile balanced routing launches 6 → 13 times in 3 steps each, faster a launch,
    takes more time per step because it runs more often, not because it got slower."""
    diff = diffs[("moe-hot-expert", "moe-balanced")]
    tb, ta = step_tables(diff.before.report, diff.after.report)
    (count_b, total_b) = raw_kernels("moe-hot-expert", set(tb.job()))
    (count_a, total_a) = raw_kernels("moe-balanced", set(ta.job()))
    steps_b, steps_a = len(tb.job()), len(ta.job())
    tables = {s.title: [row[0] for row in s.rows] for s in kernel_sections(diff, name_chars=1000)}
    matched = [k.name for k in diff.kernels if k.status == "matched"]
    for name in matched:
        mean_b, mean_a = total_b[name] / count_b[name], total_a[name] / count_a[name]
        rate_b, rate_a = count_b[name] / steps_b, count_a[name] / steps_a
        from_mean, from_launches = rate_b * (mean_a - mean_b), (rate_a - rate_b) * mean_a
        listed = {title for title, names in tables.items() if name in names}
        if from_mean >= 0.001:
            assert mean_a > mean_b and "Kernels faster per launch" not in listed, name
        if "Kernels slower per launch" in listed:
            assert from_mean > 0, name
        if "Kernels launched more often" in listed:
            assert rate_a > rate_b and from_launches > 0, name
        if "Kernels faster per launch" in listed:
            assert mean_a < mean_b, name
        row = next(k for k in diff.kernels if k.name == name)
        assert sum(row.split()) == pytest.approx(row.delta_ms_per_step, abs=1e-9)
        assert row.split() == pytest.approx((from_mean, from_launches), abs=1e-6)
    tile = "nvjet_sm90_tst_256x152_64x4_1x2_h_bz_coopA_TNT"
    assert (count_b[tile], count_a[tile]) == (6, 13) and total_a[tile] / 13 < total_b[tile] / 6
    assert tile in tables["Kernels launched more often"] and tile in tables["Kernels faster per launch"]
    assert tile not in tables["Kernels slower per launch"]
    data = diff.to_dict()["kernels"]
    assert tile in data["more_launches"] and tile not in data["slower_per_launch"]


def test_launches_per_step_count_the_judged_steps(diffs: dict[tuple[str, str], Diff]) -> None:
    """The eager and the compiled decode loop run the same GEMMs per token, 4 tokens a step: every GEMM kernel of
    both sides launches as often per step on each (64 → 64, not 64 → 71.8 with the compiled side's warm-up and the
    work queued before its window counted as well), so none is listed as launched more often."""
    diff = diffs[("decode-eager", "decode-compile")]
    gemms = [k for k in diff.kernels if k.status == "matched" and k.name.startswith("nvjet_")]
    assert len(gemms) >= 4
    for row in gemms:
        before, after = row.launches_per_step() or (0.0, 0.0)
        assert before == after and before == int(before) > 0, row.name
    assert diff.to_dict()["kernels"]["more_launches"] == []


def test_kernel_tables_never_show_two_kernels_alike(diffs: dict[tuple[str, str], Diff]) -> None:
    """The eager decode loop's vanished kernels include several vectorized_elementwise_kernel<8, …> instances that a
    cut at 60 characters made identical ('void at::native::vectorized_elementwise_kernel<8, at::nativ…'); the
    dashboard's shortener keeps the template argument that tells them apart, in every table of the terminal."""
    from tracedoc.diff.text import TEXT_NAME_CHARS
    for pair, diff in diffs.items():
        for section in kernel_sections(diff, TEXT_NAME_CHARS):
            shown = [row[0] for row in section.rows]
            assert len(set(shown)) == len(shown), (pair, section.title, shown)
    vanished = next(s for s in kernel_sections(diffs[("decode-eager", "decode-compile")], TEXT_NAME_CHARS)
                    if s.title == "Vanished kernels")
    assert sum("vectorized_elementwise_kernel" in row[0] for row in vanished.rows) >= 2


def test_moe_all_to_all_is_the_top_improvement(diffs: dict[tuple[str, str], Diff]) -> None:
    """Balanced routing shortens the all-to-all (NCCL SendRecv) most: the largest improvement per step."""
    data = diffs[("moe-hot-expert", "moe-balanced")].to_dict()
    assert data["kernels"]["improvements"][0].startswith("ncclDevKernel_SendRecv")


def test_products_under_other_op_names_compare_as_one(tmp_path: Path) -> None:
    """The eager decode step's products are aten::linear and aten::matmul; torch.compile calls the same products
    aten::mm. An edited copy of the eager report with those ops renamed aten::mm (their time and FLOPs unchanged)
    diffs with no operator change: one 'matrix products' row, not linear vanished and mm new."""
    trace = ROOT / "tests" / "data" / "efficiency-h200" / "decode-eager-shapes.trace.json.gz"
    result = CliRunner().invoke(cli, ["analyze", str(trace), "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    eager = json.loads(result.output)
    products = [o for o in eager["operators"] if o["kind"] == "gemm"]
    assert {o["op"] for o in products} == {"aten::linear", "aten::matmul"}
    compiled = json.loads(result.output)
    merged = {**products[0], "op": "aten::mm", "count": sum(o["count"] for o in products),
              "gpu_ms": sum(o["gpu_ms"] for o in products), "flops": sum(o["flops"] for o in products)}
    compiled["operators"] = [o for o in compiled["operators"] if o["kind"] != "gemm"] + [merged]
    (tmp_path / "eager.json").write_text(json.dumps(eager))
    (tmp_path / "compiled.json").write_text(json.dumps(compiled))
    rows = {o.op: o for o in compare_operators(read_report(tmp_path / "eager.json"),
                                               read_report(tmp_path / "compiled.json"), limit=100)}
    label = "matrix products: aten::linear, aten::matmul → aten::mm"
    assert label in rows and not {"aten::linear", "aten::matmul", "aten::mm"} & set(rows)
    assert all(o.change_ms == pytest.approx(0.0, abs=1e-9) for o in rows.values())
    assert rows[label].before_tflops == pytest.approx(rows[label].after_tflops)
    result = _invoke(str(tmp_path / "eager.json"), str(tmp_path / "compiled.json"))
    assert result.exit_code == 0 and "aten::linear " not in result.output, result.output


# --- a sample against itself, and CI gates -------------------------------------------------------------------------

def test_a_sample_against_itself_is_no_change() -> None:
    path = str(SAMPLES / "decode-eager")
    result = _invoke(path, path, "--fail-on-regression", "1", "--fail-on-new", "info")
    assert result.exit_code == 0, result.output
    assert "No significant change" in result.output
    assert "launch-bound" in result.output and "persisting" in result.output


def test_fail_on_regression_on_a_real_regression(saved: dict[str, Path], diffs: dict[tuple[str, str], Diff],
                                                 sides: dict[str, Side]) -> None:
    """host-stall-fixed → host-stall-item is 35 % slower: exit 1 past 5 %, 0 past 50 % (the same diff)."""
    result = _invoke(str(saved["host-stall-fixed"]), str(saved["host-stall-item"]), "--fail-on-regression", "5")
    assert result.exit_code == 1, result.output
    assert "Slower" in result.output
    assert _invoke(str(saved["host-stall-fixed"]), str(saved["host-stall-item"]),
                   "--fail-on-regression", "50").exit_code == 0
    backwards = build_diff(sides["host-stall-fixed"], sides["host-stall-item"])
    assert regression_failures(backwards, 5.0) and not regression_failures(backwards, 50.0)


def test_a_regression_that_is_not_significant_passes(sides: dict[str, Side]) -> None:
    """ddp-overlap → ddp-no-overlap is 4 % slower, but within the steps' spread: no failure even at 1 %."""
    assert not regression_failures(build_diff(sides["ddp-overlap"], sides["ddp-no-overlap"]), 1.0)


def test_fail_on_new(saved: dict[str, Path], sides: dict[str, Side]) -> None:
    """input-fast → input-slow brings gpu-idle-host-bound (critical) and host-sync (warning) back: exit 1 at
    warning; ddp-overlap → ddp-no-overlap brings only warnings: exit 0 at critical, 1 at warning."""
    result = _invoke(str(saved["input-fast"]), str(saved["input-slow"]), "--fail-on-new", "warning")
    assert result.exit_code == 1
    failures = new_finding_failures(build_diff(sides["input-fast"], sides["input-slow"]), "warning")
    assert any("gpu-idle-host-bound" in f for f in failures) and any("host-sync" in f for f in failures)
    args = (str(saved["ddp-overlap"]), str(saved["ddp-no-overlap"]), "--fail-on-new")
    assert _invoke(*args, "critical").exit_code == 0
    assert _invoke(*args, "warning").exit_code == 1


# --- errors ----------------------------------------------------------------------------------------------------

def test_a_trace_against_an_ncu_report_is_bad_input() -> None:
    csv = next((SAMPLES / "ncu-a40-julia-csv").glob("*.csv"))
    result = CliRunner().invoke(cli, ["diff", str(SAMPLES / "decode-eager"), str(csv)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "timeline" in lines[0] and "kernel profile" in lines[0]
    assert "Traceback" not in result.stderr


def test_runs_that_share_no_kernel_are_bad_input(saved: dict[str, Path], tmp_path: Path) -> None:
    """Two reports whose kernels have nothing in common: exit 2, one line."""
    data = json.loads(saved["decode-eager"].read_text())
    for row in data["metrics"]["top_kernels"]:
        row["name"] = "renamed_" + row["name"]
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    result = CliRunner().invoke(cli, ["diff", str(saved["decode-eager"]), str(other)])
    assert result.exit_code == 2
    assert "share no kernel" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_regression_gate_without_steps_is_bad_input() -> None:
    """ncu profiles have no steps: --fail-on-regression cannot be judged, and says so (exit 2)."""
    csv = next((SAMPLES / "ncu-a40-julia-csv").glob("*.csv"))
    result = CliRunner().invoke(cli, ["diff", str(csv), str(csv), "--fail-on-regression", "5"])
    assert result.exit_code == 2 and "needs step times" in result.stderr
    plain = _invoke(str(csv), str(csv), "--format", "json")
    assert plain.exit_code == 0
    data = json.loads(plain.output)
    assert data["verdict"] == "no significant change"  # the same kernels, the same time
    assert data["ncu_kernels"] and all(not any(r["delta"].values()) for r in data["ncu_kernels"])


# --- outputs ---------------------------------------------------------------------------------------------------

def test_json_schema(saved: dict[str, Path]) -> None:
    result = _invoke(str(saved["moe-hot-expert"]), str(saved["moe-balanced"]), "--format", "json",
                     "--per-step-items", "4096")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert {"tracedoc", "schema", "kind", "before", "after", "verdict", "steps", "wall_ms", "gpu_busy_pct",
            "throughput", "attribution", "kernels", "ncu_kernels", "findings", "cross_rank", "notes"} <= set(data)
    assert data["schema"] == 1 and data["kind"] == "diff" and data["verdict"] == "faster"
    assert {"n", "median_ms", "p10_ms", "p90_ms", "steps"} <= set(data["steps"]["job"]["before"])
    assert {"median_ms", "pct", "ci_ms", "ci_pct", "significant", "direction"} <= set(data["steps"]["job"]["change"])
    assert set(data["findings"]) == {"resolved", "new", "persisting"}
    rate = data["throughput"]
    assert rate["after_items_per_s"] == pytest.approx(4096 / data["steps"]["job"]["after"]["median_ms"] * 1000,
                                                      rel=1e-3)
    assert "top kernels" in data["kernels"]["basis"] and data["notes"]


def test_hostile_kernel_names_are_escaped(saved: dict[str, Path], tmp_path: Path) -> None:
    """A kernel named with a terminal escape and HTML stays inert in text and Markdown."""
    evil = "\x1b]8;;http://x\x07<img src=x onerror=alert(1)>|\nkernel"
    paths = []
    for name in ("decode-eager", "decode-cudagraph"):
        data = json.loads(saved[name].read_text())
        data["metrics"]["top_kernels"][0]["name"] = evil
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(data))
    text = _invoke(*map(str, paths))
    assert text.exit_code == 0 and "\x1b" not in text.output and "\x07" not in text.output
    md = _invoke(*map(str, paths), "--format", "md")
    assert md.exit_code == 0 and "\\<img" in md.output and not re.search(r"(?<!\\)<img", md.output)
    page = _invoke(*map(str, paths), "--format", "html")
    assert page.exit_code == 0 and "&lt;img src=x" in page.output
    assert "<img" not in page.output and "<script" not in page.output


def test_out_writes_each_format(saved: dict[str, Path], tmp_path: Path) -> None:
    args = (str(saved["decode-eager"]), str(saved["decode-cudagraph"]))
    assert _invoke(*args, "--out", str(tmp_path / "d.md")).exit_code == 0
    assert (tmp_path / "d.md").read_text().startswith("# tracedoc diff")
    assert _invoke(*args, "--out", str(tmp_path) + "/").exit_code == 0
    assert "Faster" in (tmp_path / "tracedoc-diff.txt").read_text()
    assert _invoke(*args, "--out", str(tmp_path / "d.pdf")).exit_code == 2


def test_a_cached_store_and_a_saved_report_as_sides(saved: dict[str, Path], diffs: dict[tuple[str, str], Diff],
                                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    """BEFORE as the cached store of the traces, AFTER as a saved JSON report: the same step times as the traces."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    store, _ = open_store(discover([SAMPLES / "decode-eager"]), cache)
    store.close()
    result = _invoke(str(store.path), str(saved["decode-cudagraph"]), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["before"]["source"] == "store" and data["after"]["source"] == "saved report"
    assert data["steps"]["job"] == diffs[("decode-eager", "decode-cudagraph")].to_dict()["steps"]["job"]


def test_every_format_renders(diffs: dict[tuple[str, str], Diff]) -> None:
    diff = diffs[("ddp-no-overlap", "ddp-overlap")]
    assert "No significant change" in render(diff, "text")
    assert "low-comm-overlap" in render(diff, "md")
    assert json.loads(render(diff, "json"))["findings"]["resolved"]
    page = render(diff, "html")
    assert page.startswith("<!DOCTYPE html>") and "low-comm-overlap" in page and 'class="bar"' in page


@pytest.mark.slow  # a quick local run deselects it with -m 'not slow'
@pytest.mark.parametrize("pair", list(PAIRS) + list(NCU_PAIRS), ids=lambda p: f"{p[0]}->{p[1]}")
def test_diff_gallery_is_current(pair: tuple[str, str], diffs: dict[tuple[str, str], Diff],
                                 ncu_diffs: dict[tuple[str, str], Diff]) -> None:
    """The committed diffs (reports/diffs/) say what the diff says today: verdict and each finding's fate."""
    committed = ROOT / "reports" / "diffs" / f"{diff_name(*pair)}.json"
    assert committed.exists(), "run `python -m tracedoc.gallery --diffs-only`"
    fresh, saved_diff = {**diffs, **ncu_diffs}[pair].to_dict(), json.loads(committed.read_text())

    def fates(data: dict[str, Any]) -> list[tuple[str, str, str]]:
        return sorted((status, c["rule"], json.dumps(c["scope"], sort_keys=True))
                      for status, changes in data["findings"].items() for c in changes)

    assert saved_diff["verdict"] == fresh["verdict"] and fates(saved_diff) == fates(fresh), \
        "the diff changed; review it and run `python -m tracedoc.gallery --diffs-only`"


# --- the statistics --------------------------------------------------------------------------------------------

def test_quantile_interpolates() -> None:
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.1) == pytest.approx(1.4)
    assert quantile([7.0], 0.9) == 7.0


def test_bootstrap_is_seeded_and_judges_steps() -> None:
    before, after = [10.0, 10.2, 9.9, 10.1, 10.0], [9.0, 9.1, 8.9, 9.2, 9.0]
    change = compare(before, after)
    assert change == compare(before, after)  # the same interval every time
    assert change.significant and change.direction == "faster" and change.ci_ms[1] < 0
    assert not compare(before, before).significant
    assert not compare([10.0, 10.1], [5.0, 5.1]).significant  # too few steps, however large the change
    overlapping = compare([10.0, 12.0, 14.0], [9.0, 11.0, 13.0])
    assert not overlapping.significant and overlapping.ci_ms[0] < 0 < overlapping.ci_ms[1]


def test_a_perfetto_out_is_refused() -> None:
    """A diff has no timeline of its own: --out x.perfetto.json is one line, exit 2, not JSON under that name."""
    path = str(SAMPLES / "decode-eager")
    result = _invoke(path, path, "--out", "diff.perfetto.json")
    assert result.exit_code == 2 and "no Perfetto form" in result.stderr


def test_a_diff_of_traces_diffed_before_reads_the_kept_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each side's report and kernels are kept beside its cached store: the same diff again analyses nothing, and
    says byte for byte what a diff without the cache says, as JSON and as text."""
    pair = [str(SAMPLES / "decode-eager"), str(SAMPLES / "ddp-straggler")]
    cached = ["--cache-dir", str(tmp_path)]
    uncached = {fmt: _invoke(*pair, "--no-cache", "--format", fmt) for fmt in ("json", "text")}
    first = _invoke(*pair, *cached, "--format", "json")
    assert first.exit_code == uncached["json"].exit_code == 0, first.output
    assert len(list(tmp_path.glob("*.reports/*.kernels.json"))) == 2

    def analysed(*args: object, **kwargs: object) -> None:
        raise AssertionError("a side was analysed again")

    monkeypatch.setattr("tracedoc.diff.side.load_report", analysed)
    for fmt, expected in uncached.items():
        again = _invoke(*pair, *cached, "--format", fmt)
        assert again.exit_code == 0, again.output
        assert again.stdout == expected.stdout, fmt
