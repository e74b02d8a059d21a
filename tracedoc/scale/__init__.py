"""Scale out: the per-rank work of a multi-rank job on a Dask cluster, the same report as one machine.

Each rank's input is ingested on a worker into a per-rank store in the cache (content-keyed, like every store, so
``serve`` and a second run reuse it); the worker hands back only per-rank summaries as Arrow tables (``exports``).
The client lines the ranks up over those summaries with the same SQL modules the local path runs
(``summary_store``), sends each rank its collectives back for the analyses that need them (time attribution,
overlap), and builds the report with ``tracedoc.pipeline.build_report`` over a store made of the summaries. Dask is
imported only here (``cluster``); without ``--workers`` or a scheduler nothing of this runs.
"""

from tracedoc.scale.job import analyze_distributed
from tracedoc.scale.spec import ClusterSpec

__all__ = ["ClusterSpec", "analyze_distributed"]
