"""The measured tables a report carries about GPU health (units in the column names), for `tracedoc health` and
`tracedoc analyze` alike: name -> its view (health_report_*) and row order, as tracedoc.report_tables declares them."""

from tracedoc.report_tables import METRICS, ReportTable

HEALTH_METRICS: dict[str, ReportTable] = {name: METRICS[name] for name in ("gpu_health", "gpu_telemetry")}
