"""tracedoc: a doctor for GPU profiling traces."""

__version__ = "0.1.0"

from tracedoc.api import analyze  # noqa: E402
from tracedoc.report import Evidence, Finding, Report, Scope  # noqa: E402

__all__ = ["Evidence", "Finding", "Report", "Scope", "__version__", "analyze"]
