"""`tracedoc diff` of GPU memory on the leak sample against its fixed twin (samples/memory-leak → memory-fixed,
made on an H200 by workloads/memory_leak/run.py): the leak keeps every step's 32 MiB output alive, allocated at
run.py:48 (forward); the fix keeps a float instead. The peaks are recomputed here from the traces' own
``[memory]`` events (the highest ``Total Allocated`` and ``Total Reserved`` of the GPU)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.cli import cli
from tracedoc.diff import Diff, build_diff, load_side
from tracedoc.diff.render import render

LEAK, FIXED = SAMPLES / "memory-leak", SAMPLES / "memory-fixed"


def trace_peaks(sample: Path) -> tuple[int, int]:
    """The highest allocated and reserved bytes of the GPU's allocator events."""
    events = json.loads(gzip.decompress((sample / "trace.json.gz").read_bytes()))["traceEvents"]
    memory = [e["args"] for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    return max(a["Total Allocated"] for a in memory), max(a["Total Reserved"] for a in memory)


@pytest.fixture(scope="module")
def diff() -> Diff:
    return build_diff(load_side(LEAK), load_side(FIXED))


def test_peak_and_growth_before_and_after(diff: Diff) -> None:
    truth = yaml.safe_load((LEAK / "expected.yaml").read_text())["truth"]
    (gpu,) = diff.memory
    assert (gpu.rank, gpu.device) == (0, 0)
    leak_peak, leak_reserved = trace_peaks(LEAK)
    fixed_peak, fixed_reserved = trace_peaks(FIXED)
    assert gpu.pair("peak_bytes") == (leak_peak, fixed_peak)
    assert gpu.pair("reserved_peak_bytes") == (leak_reserved, fixed_reserved)
    assert fixed_peak < leak_peak
    before, after = gpu.pair("growth_bytes_per_step")
    assert before == pytest.approx(truth["leaked_bytes_per_step"], rel=0.05)
    assert after == 0
    full_before, full_after = gpu.pair("steps_to_oom")
    assert full_before > 1000 and full_after is None  # no growth after: never full


def test_the_leaking_site_goes_to_zero(diff: Diff) -> None:
    truth = yaml.safe_load((LEAK / "expected.yaml").read_text())["truth"]
    top = diff.growth_sites[0]
    assert top.site.endswith(truth["allocated_at"])
    assert top.before == pytest.approx(truth["leaked_bytes_per_step"], rel=0.05)
    assert top.after == 0.0  # the fixed run measured its growth and this site held nothing


def test_every_format_says_it(diff: Diff) -> None:
    text = render(diff, "text")
    assert "32.0 MiB/step → 0 B/step" in text
    assert "run.py:48 (forward)" in text
    assert "4,423 → —" in text
    # the resolved leak's saving is bytes, not time
    assert any("memory-leak" in line and "32.0 MiB → —" in line for line in text.splitlines())
    md = render(diff, "md")
    assert "## GPU memory" in md and "32.0 MiB/step → 0 B/step" in md
    html = render(diff, "html")
    assert "<h2>GPU memory</h2>" in html and "32.0 MiB/step → 0 B/step" in html
    data = json.loads(render(diff, "json"))["memory"]
    (gpu,) = data["devices"]
    assert gpu["growth_bytes_per_step"]["before"] == pytest.approx(32 << 20, rel=0.05)
    assert gpu["growth_bytes_per_step"]["after"] == 0
    assert gpu["peak_bytes"]["change"] == gpu["peak_bytes"]["after"] - gpu["peak_bytes"]["before"] < 0
    assert data["growth_sites"][0]["bytes_per_step"] == {"before": 33554432, "after": 0.0}


def test_saved_reports_compare_as_the_traces_do(diff: Diff, tmp_path: Path) -> None:
    runner = CliRunner()
    paths = []
    for sample in (LEAK, FIXED):
        out = tmp_path / f"{sample.name}.json"
        assert runner.invoke(cli, ["analyze", str(sample), "--format", "json", "--out", str(out),
                                   "--no-cache"]).exit_code == 0
        paths.append(out)
    result = runner.invoke(cli, ["diff", *map(str, paths), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["memory"] == json.loads(render(diff, "json"))["memory"]
    # a saved report whose memory section is not what tracedoc writes is bad input, one line
    data = json.loads(paths[0].read_text())
    data["memory"][0]["growth_sites"][0]["bytes_per_step"] = "lots"
    paths[0].write_text(json.dumps(data))
    result = runner.invoke(cli, ["diff", *map(str, paths)])
    assert result.exit_code == 2
    assert "memory[0].growth_sites[0].bytes_per_step should be a number" in result.output


def test_runs_without_allocator_data_have_no_memory_section(diff: Diff) -> None:
    plain = build_diff(load_side(SAMPLES / "host-stall-item"), load_side(SAMPLES / "host-stall-fixed"))
    assert plain.memory == [] and "memory" not in plain.to_dict()
    assert "GPU memory" not in render(plain, "text")
