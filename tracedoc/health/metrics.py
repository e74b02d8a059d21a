"""The measured tables a report carries about GPU health (units in the column names), for `tracedoc health` and
`tracedoc analyze` alike: name -> its view (health_report_*) and row order."""

from tracedoc.report_tables import ReportTable

HEALTH_METRICS: dict[str, ReportTable] = {
    "gpu_health": ReportTable("health.gpus", "health_report_gpus", "source_id, device", ("source_id",)),
    "gpu_telemetry": ReportTable("health.telemetry", "health_report_telemetry", "source_id, device", ("source_id",)),
}
