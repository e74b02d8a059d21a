"""Health reports: a snapshot or telemetry loaded into a store and judged by the rules that read health.*.

The same tables, analyses and rules serve ``tracedoc analyze`` when NVML recordings or telemetry lie beside
traces; here they run on their own: only the health rules and measurements apply, and there is no trace window
(wall time 0).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from tracedoc.api import collect_metrics, open_store
from tracedoc.health.metrics import HEALTH_METRICS
from tracedoc.health.nvml import Snapshot
from tracedoc.ingest import discover
from tracedoc.ingest.nvml import FORMAT as NVML_FORMAT
from tracedoc.ingest.nvml import insert_snapshot, snapshot_tool
from tracedoc.judge import Rule, judge
from tracedoc.report import InputInfo, Report
from tracedoc.store import Store, open_cached_store

HEALTH_GROUP = "health."


def health_rules(rules: Sequence[Rule]) -> list[Rule]:
    """The rules that judge GPU health (they read an analysis of the health group)."""
    return [r for r in rules if r.reads.startswith(HEALTH_GROUP)]


def snapshot_report(snapshot: Snapshot, label: str, rules: Sequence[Rule],
                    thresholds: dict[str, dict[str, float]] | None = None) -> Report:
    """Judge one snapshot; ``label`` names where it came from (the live driver or a recording)."""

    def build(store: Store) -> None:
        store.con.execute("INSERT INTO sources VALUES (0, ?, ?, NULL, NULL, NULL, NULL, ?, ?)",
                          [label, NVML_FORMAT, len(snapshot.gpus), snapshot_tool(snapshot)])
        insert_snapshot(store, 0, snapshot)

    with tempfile.TemporaryDirectory(prefix="tracedoc-health-") as tmp:
        store, _ = open_cached_store("health", Path(tmp), build)
        with store:
            return _judge(store, rules, thresholds)


def files_report(paths: Sequence[Path], rules: Sequence[Rule],
                 thresholds: dict[str, dict[str, float]] | None = None) -> Report:
    """Judge telemetry or recordings on their own (e.g. the file a watch just wrote)."""
    inputs = discover(list(paths))
    with tempfile.TemporaryDirectory(prefix="tracedoc-health-") as tmp:
        store, _ = open_store(inputs, Path(tmp))
        with store:
            return _judge(store, rules, thresholds)


def _judge(store: Store, rules: Sequence[Rule], thresholds: dict[str, dict[str, float]] | None) -> Report:
    """The health rules' findings and the health measurements of a store."""
    inputs = [InputInfo(path=r["path"], format=r["format"], rank=r["rank"], events=r["event_count"])
              for r in store.query("SELECT path, format, rank, event_count FROM sources ORDER BY source_id")]
    return Report(inputs=inputs, summary={"wall_ms": 0.0, "gpu_busy_pct": None, "ranks": 0},
                  findings=judge(store, health_rules(rules), 0.0, thresholds),
                  metrics=collect_metrics(store, HEALTH_METRICS))
