"""`tracedoc health`: check every NVIDIA GPU through NVML, or sample their telemetry while a job runs."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tracedoc.api import health_files_report, health_snapshot_report
from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.cli.options import (
    FiniteFloatRange,
    emit_report,
    exit_code,
    output_target,
    parse_settings,
    renderer_formats,
    report_options,
)
from tracedoc.cli.stderr import say
from tracedoc.health.nvml import Backend, LiveNvml, read_snapshot
from tracedoc.health.replay import ENV_VAR, Recorder, Replay
from tracedoc.health.watch import watch
from tracedoc.judge import Rule, load_rules
from tracedoc.render.markdown import escape
from tracedoc.report import Report


@click.command("health")
@report_options("Write the report to this file, or into this directory as tracedoc-health.<ext>. With --watch: "
                "the telemetry file to write (NAME.telemetry.parquet); the report then goes to the terminal.",
                formats=("html", "json", "md", "text"), set_example="gpu-power-capped.min_power_cap_pct=50")
@click.option("--record", type=click.Path(path_type=Path), default=None,
              help="Also save NVML's answers as JSON: a recording that `tracedoc analyze` reads beside traces.")
@click.option("--watch", "watching", is_flag=True,
              help="Sample clocks, utilization, memory, power, temperature and throttle reasons into --out "
                   "until Ctrl-C (or --duration).")
@click.option("--interval", type=FiniteFloatRange(min=0.01), default=None,
              help="Seconds between telemetry samples (default 0.5).")
@click.option("--duration", type=FiniteFloatRange(min=0, min_open=True), default=None,
              help="Stop watching after this many seconds.")
@click.option("--replay", type=click.Path(path_type=Path), default=None, envvar=ENV_VAR, hidden=True,
              help="Answer from an NVML recording instead of the driver (tests, demos).")
@one_line_errors
def health_command(fmt: str | None, out: Path | None, rules_dirs: tuple[Path, ...], settings: tuple[str, ...],
                   fail_on: str | None, record: Path | None, watching: bool, interval: float | None,
                   duration: float | None, replay: Path | None) -> None:
    """Check the GPUs of this machine: ECC errors, clocks and throttle reasons, temperature and power against
    their limits, PCIe link, NVLink, driver and CUDA versions. With --watch, record their telemetry while a job
    runs; `tracedoc analyze` reads *.telemetry.parquet files lying beside the traces.

    Example:

        tracedoc health

        tracedoc health --format json --out reports/ --fail-on warning

        tracedoc health --watch --interval 0.1 --out run.telemetry.parquet --duration 60
    """
    rules = load_rules(rules_dirs)
    thresholds = parse_settings(settings, rules)
    backend: Backend = Replay.load(replay) if replay else LiveNvml()
    try:
        if watching:
            report = _watch(backend, out, record, interval, duration, rules, thresholds)
            if report is not None:
                emit_report(report, fmt or "text", None, text_head=_telemetry_head(report))
        else:
            if interval is not None or duration is not None:
                raise BadInput("--interval and --duration apply to --watch")
            fmt, target = output_target(fmt, out, "tracedoc-health", renderer_formats(),
                                        {".perfetto.json": "a health report has no Perfetto form"})
            report = _check(backend, replay, record, rules, thresholds)
            emit_report(report, fmt, target, text_head=_snapshot_head(report), markdown_head=_markdown_head(report))
    finally:
        backend.close()
    sys.exit(exit_code(report, fail_on) if report is not None else 0)


def _check(backend: Backend, replay: Path | None, record: Path | None, rules: Sequence[Rule],
           thresholds: dict[str, dict[str, float]]) -> Report:
    """Read one snapshot (recording it when asked, also when NVML fails) and judge it."""
    recorder = Recorder(backend) if record is not None else None
    try:
        snapshot = read_snapshot(recorder or backend,
                                 taken_ns=backend.recorded_ns if isinstance(backend, Replay) else None)
    finally:
        if recorder is not None and record is not None:
            recorder.save(record)
            say([f"NVML answers recorded in {record}"])
    return health_snapshot_report(snapshot, str(replay) if replay else "NVML", rules, thresholds)


def _watch(backend: Backend, out: Path | None, record: Path | None, interval: float | None, duration: float | None,
           rules: Sequence[Rule], thresholds: dict[str, dict[str, float]]) -> Report | None:
    """Sample telemetry into ``out``, then judge what was recorded (None when nothing was)."""
    if out is None or not out.name.endswith(".parquet"):
        raise BadInput("--watch needs --out NAME.telemetry.parquet")
    if record is not None:
        raise BadInput("--record saves a snapshot; with --watch the telemetry goes to --out")
    err = Console(stderr=True, highlight=False)
    interval = interval or 0.5
    err.print(f"sampling GPU telemetry every {interval:g} s into {out} "
              + (f"for {duration:g} s" if duration else "until Ctrl-C"))
    result = watch(backend, out, interval, duration)
    err.print(f"wrote {result.samples} samples of {result.devices} GPU(s) over {result.seconds:.1f} s to {out}")
    return health_files_report([out], rules, thresholds) if result.samples else None


def _snapshot_head(report: Report) -> list[RenderableType]:
    """The text report's head for a snapshot: versions, then one line per GPU."""
    gpus = report.metrics.get("gpu_health") or []
    first = gpus[0] if gpus else {}
    names = ", ".join(sorted({g.get("name") or "unnamed" for g in gpus if not g.get("nvml_error")})) or "n/a"
    head = Text.assemble(("tracedoc health ", "bold"), f"{len(gpus)} GPU(s): {names} · NVIDIA driver "
                         f"{first.get('driver_version') or 'n/a'} · CUDA {first.get('cuda_driver_version') or 'n/a'}")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("gpu", "temp", "power W", "SM MHz", "PCIe", "ECC u/c", "NVLink"):
        table.add_column(col, no_wrap=True)
    table.add_column("clock reasons")
    for g in gpus:
        if g.get("nvml_error"):
            table.add_row(str(g["device"]), *[""] * 6, Text(f"NVML error: {g['nvml_error']}", style="bold red"))
            continue
        cells = [str(g["device"]), _unit(g.get("temperature_c"), "°C"),
                 f"{_unit(g.get('power_w'), '')}/{_unit(g.get('power_limit_w'), '')}",
                 f"{_unit(g.get('sm_clock_mhz'), '')}/{_unit(g.get('sm_clock_max_mhz'), '')}",
                 f"Gen{_unit(g.get('pcie_gen'), '')}/{_unit(g.get('pcie_gen_max'), '')} "
                 f"x{_unit(g.get('pcie_width'), '')}/{_unit(g.get('pcie_width_max'), '')}",
                 f"{_unit(g.get('ecc_volatile_uncorrected'), '')}/{_unit(g.get('ecc_volatile_corrected'), '')}",
                 _nvlink(g), g.get("reasons") or "n/a"]
        table.add_row(*(Text(c) for c in cells))
    return [head, table]


def _telemetry_head(report: Report) -> list[RenderableType]:
    """The text report's head after a watch: one line per GPU summarising its samples."""
    rows = report.metrics.get("gpu_telemetry") or []
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("gpu", "samples", "busy", "SM clock busy mean/min/max", "max temp", "busy power", "slowdowns"):
        table.add_column(col)
    for t in rows:
        cells = [str(t["device"]), str(t["samples"]), _unit(t.get("busy_pct"), "%"),
                 f"{_unit(t.get('sm_clock_mean_mhz'), '')}/{_unit(t.get('sm_clock_min_mhz'), '')}/"
                 f"{_unit(t.get('sm_clock_max_mhz'), 'MHz')}", _unit(t.get("temperature_max_c"), "°C"),
                 _unit(t.get("power_mean_w"), "W"), t.get("slowdown_reasons") or "none"]
        table.add_row(*(Text(c) for c in cells))
    return [Text.assemble(("tracedoc health ", "bold"), f"telemetry of {len(rows)} GPU(s)"), table]


def _markdown_head(report: Report) -> str:
    """A Markdown table of the snapshot's GPUs, before the findings."""
    gpus = report.metrics.get("gpu_health") or []
    first = gpus[0] if gpus else {}
    lines = ["# tracedoc health", "",
             f"{len(gpus)} GPU(s), NVIDIA driver {escape(first.get('driver_version') or 'n/a')}, "
             f"CUDA {escape(first.get('cuda_driver_version') or 'n/a')}.", "",
             "| GPU | name | temperature | power / limit | SM clock / max | clock reasons | PCIe (max) | "
             "ECC uncorrected / corrected | NVLink up |", "|---|---|---|---|---|---|---|---|---|"]
    for g in gpus:
        cells = [str(g["device"]), g.get("name") or g.get("nvml_error") or "n/a", _unit(g.get("temperature_c"), "°C"),
                 f"{_unit(g.get('power_w'), 'W')} / {_unit(g.get('power_limit_w'), 'W')}",
                 f"{_unit(g.get('sm_clock_mhz'), '')} / {_unit(g.get('sm_clock_max_mhz'), 'MHz')}",
                 g.get("reasons") or "n/a", _pcie(g),
                 f"{_unit(g.get('ecc_volatile_uncorrected'), '')} / {_unit(g.get('ecc_volatile_corrected'), '')}",
                 _nvlink(g)]
        lines.append("| " + " | ".join(escape(c) for c in cells) + " |")
    return "\n".join(lines) + "\n\n"


def _pcie(g: dict[str, Any]) -> str:
    """'Gen5 x16 (max Gen5 x16)'."""
    return (f"Gen{_unit(g.get('pcie_gen'), '')} x{_unit(g.get('pcie_width'), '')} "
            f"(max Gen{_unit(g.get('pcie_gen_max'), '')} x{_unit(g.get('pcie_width_max'), '')})")


def _nvlink(g: dict[str, Any]) -> str:
    """'18/18' links up, or 'none' for a GPU without NVLink."""
    return f"{g.get('nvlink_up')}/{g.get('nvlink_links')}" if g.get("nvlink_links") else "none"


def _unit(value: Any, unit: str) -> str:
    """A reading with its unit, 'n/a' when NVML did not give it."""
    if value is None:
        return "n/a"
    text = f"{value:.0f}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".rstrip() if unit not in ("%", "") else f"{text}{unit}"
