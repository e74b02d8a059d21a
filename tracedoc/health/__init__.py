"""GPU health: NVML snapshots and telemetry, judged by the same analyses and rules as traces.

``nvml`` reads NVML into plain rows, ``replay`` records and replays NVML's answers, ``watch`` samples telemetry
into Parquet; ``tracedoc.api`` turns a snapshot or telemetry into a Report.
"""
