"""``tracedoc diff``: two runs compared — did it get faster, and is that real; where the time went; which
problems went away. One module per job: reading a side (side), statistics (stats), step times and causes (steps),
kernels (kernels), findings (findings), the assembled comparison (model), the CI gates (gates), and one renderer
per format (text, markdown, html)."""

from tracedoc.diff.model import DIFF_SCHEMA, Diff, build_diff
from tracedoc.diff.side import Side, load_side

__all__ = ["DIFF_SCHEMA", "Diff", "Side", "build_diff", "load_side"]
