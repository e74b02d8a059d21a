"""GPU telemetry: `tracedoc health --watch` writes it, `tracedoc analyze` reads it beside traces and judges it.

The real telemetry is samples/health-2xh200/run.telemetry.parquet: two H200s, 8 s at 0.1 s, 5 s of it under a
bf16 matrix-product load that holds both at their power limit. Watching runs here on a replay of the NVML
answers recorded on the same machine. A throttling GPU is an edited copy of the real telemetry (in the test).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from tests.conftest import ROOT
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.health.nvml import NvmlError
from tracedoc.health.replay import Replay
from tracedoc.health.watch import TELEMETRY_KEY, watch

SAMPLE = ROOT / "samples" / "health-2xh200"
TELEMETRY = SAMPLE / "run.telemetry.parquet"
LOAD = SAMPLE / "nvml-load.replay.json"
HW_THERMAL_SLOWDOWN = 0x40


def telemetry_rows(paths: list[Path]) -> dict[int, dict[str, Any]]:
    return {row["device"]: row for row in analyze(paths, use_cache=False).metrics["gpu_telemetry"]}


def test_real_telemetry_summary() -> None:
    rows = telemetry_rows([TELEMETRY])
    assert sorted(rows) == [0, 1]
    for row in rows.values():
        assert row["samples"] == 78
        assert 55 <= row["busy_pct"] <= 65                        # 5 s of load in an 8 s recording
        assert row["sm_clock_max_mhz"] == 1980
        assert 1400 <= row["sm_clock_mean_mhz"] <= 1550           # held down by the power cap while busy
        assert row["power_cap_busy_pct"] == 100 and row["fault_pct"] == 0
        assert row["slowdown_reasons"] == "SW power cap"
        assert (row["pcie_gen_busy_min"], row["pcie_width_min"]) == (5, 16)
        assert 7000 <= row["duration_ms"] <= 8200


def test_real_telemetry_is_power_capped_not_throttled() -> None:
    report = analyze([TELEMETRY], use_cache=False)
    assert {(f.rule, f.scope.device) for f in report.findings} == {("gpu-power-capped", 0), ("gpu-power-capped", 1)}
    for f in report.findings:
        # 47 busy samples of 0.1 s at ~75% of the maximum clock: about 1.2 s of clock time lost
        assert 900 <= f.impact_ms <= 1400


def test_edited_telemetry_with_a_thermal_slowdown_fires_gpu_throttled(tmp_path: Path) -> None:
    """A copy of the real telemetry in which GPU 1 reports a HW thermal slowdown whenever it is busy."""
    table = pq.read_table(TELEMETRY)
    busy_gpu1 = pc.and_(pc.equal(table["device"], 1), pc.greater(table["gpu_util_pct"], 0))
    reasons = pc.if_else(busy_gpu1, pc.bit_wise_or(table["clocks_event_reasons"], HW_THERMAL_SLOWDOWN),
                         table["clocks_event_reasons"])
    edited = table.set_column(table.schema.get_field_index("clocks_event_reasons"), "clocks_event_reasons", reasons)
    path = tmp_path / "edited.telemetry.parquet"
    pq.write_table(edited, path)  # keeps the schema's metadata
    report = analyze([path], use_cache=False)
    throttled = [f for f in report.findings if f.rule == "gpu-throttled"]
    assert [f.scope.device for f in throttled] == [1]
    evidence = {e.name: e.value for e in throttled[0].evidence}
    assert evidence["from"] == "telemetry"
    assert 55 <= evidence["samples with a thermal or hardware slowdown"] <= 65
    assert "HW thermal slowdown" in evidence["reasons seen"]
    assert throttled[0].impact_ms > 900
    assert ("gpu-power-capped", 1) not in {(f.rule, f.scope.device) for f in report.findings}


def test_telemetry_beside_a_trace_belongs_to_the_rank_that_used_the_gpu(tmp_path: Path) -> None:
    trace = sorted(ROOT.glob("samples/*/trace.json.gz"))[0]  # a one-rank PyTorch trace on device 0
    shutil.copy(trace, tmp_path / "trace.json.gz")
    shutil.copy(TELEMETRY, tmp_path / "run.telemetry.parquet")
    report = analyze([tmp_path], use_cache=False)
    assert {i.format: i.rank for i in report.inputs} == {"torch": 0, "telemetry": None}
    assert report.summary["ranks"] == 1
    rows = {r["device"]: r["rank"] for r in report.metrics["gpu_telemetry"]}
    assert rows == {0: 0, 1: None}
    capped = {f.scope.device: f for f in report.findings if f.rule == "gpu-power-capped"}
    assert capped[0].scope.rank == 0
    assert capped[0].impact_ms <= report.summary["wall_ms"]  # never more than the trace's own window


def test_watch_writes_valid_telemetry(tmp_path: Path) -> None:
    out = tmp_path / "run.telemetry.parquet"
    result = CliRunner().invoke(cli, ["health", "--watch", "--replay", str(LOAD), "--interval", "0.01",
                                      "--duration", "0.2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "gpu-power-capped" in result.output
    table = pq.read_table(out)
    assert table.schema.metadata[TELEMETRY_KEY] == b"1"
    assert set(table["device"].to_pylist()) == {0, 1} and table.num_rows >= 2
    assert set(table["sm_clock_mhz"].to_pylist()) == {1455, 1425}
    assert [p.name for p in tmp_path.iterdir()] == ["run.telemetry.parquet"]  # no partial file left behind


class _StopAfter:
    """A replay that stops the watch the way a user or a job runner does, after a number of NVML queries."""

    def __init__(self, replay: Replay, calls: int, stop: Callable[[], None]) -> None:
        self.replay, self.left, self.stop = replay, calls, stop

    def call(self, fn: str, *args: Any) -> Any:
        self.left -= 1
        if self.left == 0:
            self.stop()
        return self.replay.call(fn, *args)

    def close(self) -> None:
        self.replay.close()


def _ctrl_c() -> None:
    raise KeyboardInterrupt


def _sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("stop", [_ctrl_c, _sigterm], ids=["ctrl-c", "sigterm"])
def test_interrupted_watch_leaves_a_complete_file(tmp_path: Path, stop: Callable[[], None]) -> None:
    out = tmp_path / "run.telemetry.parquet"
    handler = signal.getsignal(signal.SIGTERM)
    result = watch(_StopAfter(Replay.load(LOAD), 200, stop), out, interval_s=0.0, flush_every_s=0.0)
    table = pq.read_table(out)
    assert table.num_rows == result.samples > 0
    assert [p.name for p in tmp_path.iterdir()] == ["run.telemetry.parquet"]
    assert signal.getsignal(signal.SIGTERM) == handler  # the watch's own handler is gone again


def test_watch_on_a_machine_without_gpu_leaves_no_file(tmp_path: Path) -> None:
    doc = json.loads(LOAD.read_text())
    doc["answers"]["nvmlInit[]"] = [{"error": "LibraryNotFound", "message": "NVML Shared Library Not Found"}]
    recording = tmp_path / "no-gpu.json"
    recording.write_text(json.dumps(doc))
    out = tmp_path / "run.telemetry.parquet"
    result = CliRunner().invoke(cli, ["health", "--watch", "--replay", str(recording), "--out", str(out)])
    assert result.exit_code == 2 and "no NVIDIA GPU/driver found" in result.output
    assert not out.exists()


def test_missing_answers_are_gaps_not_errors() -> None:
    replay = Replay.load(LOAD)
    with pytest.raises(NvmlError) as info:
        replay.call("nvmlDeviceGetClockInfo", 7, 1)
    assert info.value.kind == "NotRecorded"


def test_only_tracedoc_telemetry_is_claimed(tmp_path: Path) -> None:
    """A directory: other Parquet files are not telemetry; a damaged telemetry file is an error, not skipped."""
    shutil.copy(TELEMETRY, tmp_path / "run.telemetry.parquet")
    pq.write_table(pa.table({"device": [0], "sm_clock_mhz": [1980]}), tmp_path / "other.parquet")
    report = analyze([tmp_path], use_cache=False)
    assert [i.format for i in report.inputs] == ["telemetry"]
    (tmp_path / "other.parquet").unlink()
    damaged = tmp_path / "rank0.telemetry.parquet"
    damaged.write_bytes(TELEMETRY.read_bytes()[:4000])
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path), "--no-cache"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {damaged}: corrupt or truncated telemetry Parquet")


@pytest.mark.parametrize(("table", "message"), [
    (pa.table({"device": [0]}).replace_schema_metadata({TELEMETRY_KEY: b"1"}), "without the column(s) ts_ns"),
    (pa.table({"device": [0]}), "without tracedoc telemetry metadata"),
], ids=["missing-columns", "no-metadata"])
def test_wrong_telemetry_is_one_line(tmp_path: Path, table: pa.Table, message: str) -> None:
    path = tmp_path / "x.telemetry.parquet"
    pq.write_table(table, path)
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_non_finite_telemetry_values_never_reach_the_json_report(tmp_path: Path) -> None:
    """An edited copy of samples/health-2xh200's telemetry with power_limit_w set to inf in every row: the JSON
    report stays valid JSON (such a value is carried as null)."""
    source = TELEMETRY
    table = pq.read_table(source)
    column = table.schema.get_field_index("power_limit_w")
    table = table.set_column(column, "power_limit_w", pa.array([float("inf")] * table.num_rows, pa.float64()))
    path = tmp_path / source.name
    pq.write_table(table, path)
    report = analyze([path], use_cache=False)
    json.loads(report.to_json(), parse_constant=lambda name: pytest.fail(f"{name} in the JSON report"))
