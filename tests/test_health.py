"""`tracedoc health`: NVML snapshots judged for ECC, clocks, PCIe and NVLink, on answers recorded on two H200s.

There is no GPU here: the NVML path runs on replays of the recordings in samples/health-2xh200 (``--replay``),
which feed the same reader the live driver does. Where a test needs a faulty GPU it edits a copy of a real
recording, in the test and visibly (``edited``): only the answers named change, the rest stay as the H200s gave
them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.conftest import ROOT
from tracedoc.cli import cli
from tracedoc.health.replay import ENV_VAR

SAMPLE = ROOT / "samples" / "health-2xh200"
IDLE = SAMPLE / "nvml-idle.replay.json"   # both GPUs idle
LOAD = SAMPLE / "nvml-load.replay.json"   # both GPUs at their power limit under matrix products

# NVML enum values used in the query names of a recording (nvml.h).
CORRECTED, UNCORRECTED = 0, 1
VOLATILE, AGGREGATE = 0, 1
HW_THERMAL_SLOWDOWN, SW_POWER_CAP = 0x40, 0x04


def health(*args: str) -> Result:
    return CliRunner().invoke(cli, ["health", *args])


def report(recording: Path, *args: str) -> dict[str, Any]:
    result = health("--replay", str(recording), "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.output)


def fired(doc: dict[str, Any]) -> set[tuple[str, int]]:
    return {(f["rule"], f["scope"].get("device")) for f in doc["findings"]}


def edited(tmp_path: Path, recording: Path, answers: dict[str, Any]) -> Path:
    """A copy of a real recording where each named query answers differently: a value, or an NVML error."""
    doc = json.loads(recording.read_text())
    for query, answer in answers.items():
        assert answer is None or query in doc["answers"], f"{query} is not in the real recording"
        doc["answers"][query] = [answer if isinstance(answer, dict) and "error" in answer else {"value": answer}]
    path = tmp_path / f"edited-{recording.name}"
    path.write_text(json.dumps(doc))
    return path


def test_idle_h200s_are_healthy() -> None:
    doc = report(IDLE)
    assert doc["findings"] == []
    gpus = doc["metrics"]["gpu_health"]
    assert [g["device"] for g in gpus] == [0, 1]
    for g in gpus:
        assert g["name"] == "NVIDIA H200"
        assert (g["driver_version"], g["cuda_driver_version"]) == ("580.159.04", "13.0")
        assert (g["sm_clock_mhz"], g["sm_clock_max_mhz"], g["reasons"]) == (345, 1980, "GPU idle")
        assert (g["pcie_gen"], g["pcie_gen_max"], g["pcie_width"], g["pcie_width_max"]) == (5, 5, 16, 16)
        assert (g["nvlink_links"], g["nvlink_up"]) == (18, 18)
        assert g["ecc_enabled"] is True
        assert g["ecc_volatile_uncorrected"] == g["ecc_aggregate_uncorrected"] == g["remapped_rows_uncorrected"] == 0
        assert g["retired_pages_dbe"] is None  # Hopper remaps rows; page retirement is not supported
        assert g["power_limit_w"] == g["power_default_limit_w"] == 700.0


def test_power_cap_under_load_is_information_not_throttling() -> None:
    doc = report(LOAD)
    assert fired(doc) == {("gpu-power-capped", 0), ("gpu-power-capped", 1)}
    assert {f["severity"] for f in doc["findings"]} == {"info"}
    clocks = {g["device"]: (g["sm_clock_mhz"], g["reasons"]) for g in doc["metrics"]["gpu_health"]}
    assert clocks == {0: (1455, "SW power cap"), 1: (1425, "SW power cap")}


@pytest.mark.parametrize(("recording", "answers", "rule", "device"), [
    # uncorrected ECC errors since the driver loaded on GPU 1
    (IDLE, {f"nvmlDeviceGetTotalEccErrors[1,{UNCORRECTED},{VOLATILE}]": 2}, "ecc-errors", 1),
    # a row remap waiting for the next reset on GPU 0 (corrected, uncorrected, pending, failed)
    (IDLE, {"nvmlDeviceGetRemappedRows[0]": [0, 1, 1, 0]}, "ecc-errors", 0),
    # no spare rows left on GPU 1
    (IDLE, {"nvmlDeviceGetRemappedRows[1]": [0, 0, 0, 1]}, "ecc-errors", 1),
    # a handled history: uncorrectable errors in the past, their rows remapped, nothing pending
    (IDLE, {f"nvmlDeviceGetTotalEccErrors[0,{UNCORRECTED},{AGGREGATE}]": 3,
            "nvmlDeviceGetRemappedRows[0]": [0, 3, 0, 0]}, "ecc-error-history", 0),
    # a hardware thermal slowdown on GPU 0 under load
    (LOAD, {"nvmlDeviceGetCurrentClocksEventReasons[0]": HW_THERMAL_SLOWDOWN | SW_POWER_CAP}, "gpu-throttled", 0),
    # the power cap under a limit lowered from 700 W to 500 W (in mW, as NVML gives it)
    (LOAD, {"nvmlDeviceGetEnforcedPowerLimit[1]": 500000}, "gpu-throttled", 1),
    # a link trained to 8 lanes of 16: degraded even when idle
    (IDLE, {"nvmlDeviceGetCurrPcieLinkWidth[0]": 8}, "pcie-degraded", 0),
    # Gen1 while busy
    (LOAD, {"nvmlDeviceGetCurrPcieLinkGeneration[1]": 1}, "pcie-degraded", 1),
    # one NVLink of 18 down
    (IDLE, {"nvmlDeviceGetNvLinkState[0,5]": 0}, "nvlink-down", 0),
    # GPU fallen off the bus
    (IDLE, {"nvmlDeviceGetName[1]": {"error": "GpuIsLost", "message": "GPU is lost"}}, "gpu-unreachable", 1),
])
def test_fault_edited_into_a_real_recording_is_found(tmp_path: Path, recording: Path, answers: dict[str, Any],
                                                     rule: str, device: int) -> None:
    doc = report(edited(tmp_path, recording, answers))
    assert (rule, device) in fired(doc)
    assert (rule, 1 - device) not in fired(doc), "the untouched GPU must stay healthy"


def test_slow_pcie_generation_while_idle_is_power_management(tmp_path: Path) -> None:
    """An idle GPU may lower its link generation to save power; only a busy GPU's generation counts."""
    doc = report(edited(tmp_path, IDLE, {"nvmlDeviceGetCurrPcieLinkGeneration[0]": 1}))
    assert "pcie-degraded" not in {r for r, _ in fired(doc)}
    assert doc["metrics"]["gpu_health"][0]["pcie_gen"] == 1


def test_throttled_gpu_finding_says_why(tmp_path: Path) -> None:
    doc = report(edited(tmp_path, LOAD, {"nvmlDeviceGetCurrentClocksEventReasons[0]": HW_THERMAL_SLOWDOWN}))
    finding = next(f for f in doc["findings"] if f["rule"] == "gpu-throttled")
    assert "HW thermal slowdown" in finding["message"]
    evidence = {e["name"]: e["value"] for e in finding["evidence"]}
    assert evidence["SM clock (busy mean or now)"] == 1455
    assert evidence["HW thermal slowdown"] == 100


def test_fail_on_counts_only_findings_at_or_above_the_severity() -> None:
    assert health("--replay", str(LOAD), "--fail-on", "info").exit_code == 1
    assert health("--replay", str(LOAD), "--fail-on", "warning").exit_code == 0
    assert health("--replay", str(IDLE), "--fail-on", "info").exit_code == 0


def test_text_and_markdown_show_every_gpu(tmp_path: Path) -> None:
    text = health("--replay", str(LOAD))
    assert text.exit_code == 0
    assert "NVIDIA H200" in text.output and "SW power cap" in text.output and "1455/1980" in text.output
    result = health("--replay", str(IDLE), "--out", str(tmp_path), "--format", "md")
    assert result.exit_code == 0
    md = (tmp_path / "tracedoc-health.md").read_text()
    assert md.startswith("# tracedoc health")
    assert md.count("| NVIDIA H200 |") == 2
    assert "No problems found" in md


def test_a_recording_replays_to_the_same_report(tmp_path: Path) -> None:
    again = tmp_path / "again.json"
    assert health("--replay", str(LOAD), "--record", str(again)).exit_code == 0
    assert report(again)["metrics"] == report(LOAD)["metrics"]


def test_replay_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(LOAD))
    result = CliRunner().invoke(cli, ["health", "--format", "json"])
    assert result.exit_code == 0
    assert {f["rule"] for f in json.loads(result.output)["findings"]} == {"gpu-power-capped"}


@pytest.mark.parametrize(("answers", "reason"), [
    # what nvmlInit answers on a machine without the NVIDIA driver (as on this CI machine)
    ({"nvmlInit[]": {"error": "LibraryNotFound", "message": "NVML Shared Library Not Found"}},
     "NVML Shared Library Not Found"),
    ({"nvmlInit[]": {"error": "DriverNotLoaded", "message": "Driver Not Loaded"}}, "Driver Not Loaded"),
    ({"nvmlDeviceGetCount[]": 0}, "no devices"),
])
def test_no_gpu_is_one_line_and_exit_2(tmp_path: Path, answers: dict[str, Any], reason: str) -> None:
    result = health("--replay", str(edited(tmp_path, IDLE, answers)))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"Error: no NVIDIA GPU/driver found (NVML: {reason})"]


@pytest.mark.parametrize("content", [
    b"",
    b'{"format": "tracedoc-nvml-replay", "version": 1, "answers": {"nvmlInit[]": [{"val',
    b'{"traceEvents": []}',
    b'{"format": "tracedoc-nvml-replay", "version": 7, "answers": {}}',
    b'{"format": "tracedoc-nvml-replay", "version": 1, "answers": ["nvmlInit[]"]}',
    b'{"format": "tracedoc-nvml-replay", "version": 1, "answers": {"nvmlInit[]": [{"neither": 1}]}}',
    b"\x00\xff\xfe garbage",
], ids=["empty", "truncated", "a-trace", "future-version", "answers-list", "answer-shape", "binary"])
def test_bad_recordings_are_one_line_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = health("--replay", str(path))
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_hostile_answers_are_not_trusted(tmp_path: Path) -> None:
    """Answers of the wrong type read as 'not reported', never crash; an absurd GPU count is refused."""
    odd = edited(tmp_path, IDLE, {"nvmlDeviceGetClockInfo[0,1]": "fast", "nvmlDeviceGetRemappedRows[0]": [1, 2],
                                  "nvmlDeviceGetName[0]": "<b>[bold]x|y", "nvmlDeviceGetTemperature[0,0]": 1e300})
    doc = report(odd)
    g0 = doc["metrics"]["gpu_health"][0]
    assert (g0["sm_clock_mhz"], g0["remap_pending"], g0["temperature_c"]) == (None, None, None)
    assert "\\[bold\\]x\\|y" in health("--replay", str(odd), "--format", "md").output
    many = edited(tmp_path, IDLE, {"nvmlDeviceGetCount[]": 10**9})
    result = health("--replay", str(many))
    assert result.exit_code == 2 and "more than any machine has" in result.output


def test_usage_errors() -> None:
    assert health("--interval", "1").exit_code == 2
    assert health("--replay", str(IDLE), "--watch").exit_code == 2
    assert health("--replay", str(IDLE), "--watch", "--out", "x.csv").exit_code == 2


def test_handled_ecc_history_is_not_an_emergency(tmp_path: Path) -> None:
    """Lifetime uncorrectable errors whose rows were remapped, nothing pending: information, not critical."""
    doc = report(edited(tmp_path, IDLE, {f"nvmlDeviceGetTotalEccErrors[0,{UNCORRECTED},{AGGREGATE}]": 3,
                                         "nvmlDeviceGetRemappedRows[0]": [0, 3, 0, 0]}))
    assert fired(doc) == {("ecc-error-history", 0)}
    finding = doc["findings"][0]
    assert finding["severity"] == "info"
    assert "3 uncorrected ECC errors over the GPU's life" in finding["message"]


def test_a_gpu_sampled_by_telemetry_and_a_snapshot_is_found_once_with_no_saving() -> None:
    """health-2xh200 holds a telemetry recording and two NVML snapshots of the same two H200s: the power cap is
    one finding per GPU, from the telemetry's 47 busy samples (the snapshot's one sample says less), and its lost
    clock time is said as what it is, not as a time saving."""
    sample = ROOT / "samples" / "health-2xh200"
    result = CliRunner().invoke(cli, ["analyze", str(sample), "--format", "json", "--no-cache"])
    assert result.exit_code == 0, result.output
    capped = [f for f in json.loads(result.output)["findings"] if f["rule"] == "gpu-power-capped"]
    assert sorted(f["scope"]["device"] for f in capped) == [0, 1]
    assert all(e["value"] == "telemetry" for f in capped for e in f["evidence"] if e["name"] == "from")
    md = CliRunner().invoke(cli, ["analyze", str(sample), "--format", "md", "--no-cache"]).output
    assert "| info | `gpu-power-capped` | device 0 | informational, no saving (1,163 ms of clock time given up) |" in md
    assert "0.0 µs" not in md
