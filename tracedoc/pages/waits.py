"""How the pages' figures of waiting relate, in one sentence each, so that a rank's waits read as one story.

Four figures measure a rank waiting for later ranks, each on its own page:
- Overview, 'waiting for a peer' (the attribution): time a GPU had nothing to run but a collective waiting for a
  later rank, each instant of the judged window counted once; the headline's 'waiting for rank N' is about the same
  time as a share of all GPUs' time;
- Ranks, 'wait inside collectives' (rank_steps.comm_wait_ms): every wait inside a collective, hidden behind compute
  or not; its part with no compute beside it is 'exposed wait' (exposed_wait_ms), about the Overview's figure;
  'others' wait' on the late rank is what it cost the others, their exposed wait seen from its side;
- Overlap, 'exposed' communication (comm_overlap.exposed_comm_ms): communication with no compute beside it over the
  whole trace, the transfer itself and that exposed wait together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracedoc.report import Report

OVERVIEW = ("'Waiting for a peer' is time a GPU had nothing to run but a collective waiting in it for a later rank. "
            "It is about the exposed part of the Ranks page's 'wait inside collectives' (its 'exposed wait' column), "
            "and with 'communication' it makes up about the Overlap page's 'exposed' communication.")
HEADLINE = ("'Waiting for rank {rank}' in the headline is about the same waiting as 'waiting for a peer' below, as "
            "a share of all GPUs' time together.")
RANKS = ("Every wait inside a collective for later ranks, whether compute ran beside it or not; the part with no "
         "compute beside it is the table's 'exposed wait ms', about the Overview's 'waiting for a peer' summed over "
         "the steps, and part of the Overlap page's 'exposed' communication. 'Others' wait ms' on the late rank is "
         "what it cost the others: their exposed wait, seen from its side.")
OVERLAP = ("'Exposed' is communication with no compute beside it: the transfer itself and the waiting in collectives "
           "for later ranks. That waiting is the Overview's 'waiting for a peer' (the exposed part of the Ranks "
           "page's 'wait inside collectives'): overlap cannot hide it, a faster peer can.")


def waits_for_peers(report: Report) -> bool:
    """Whether any GPU of the report waited for a peer (the attribution's 'wait_for_peer' cause)."""
    return any(r.get("cause") == "wait_for_peer" and (r.get("ms") or 0) > 0 for r in report.attribution)


def headline_note(report: Report) -> str:
    """The sentence under a headline that names a rank waited for; '' otherwise."""
    summary = report.summary
    shown = (summary.get("waiting_for_rank") is not None and float(summary.get("waiting_pct") or 0) >= 0.05
             and float(summary.get("communication_pct") or 0) >= 0.05)  # as the headline says it (render.base)
    return HEADLINE.format(rank=summary["waiting_for_rank"]) if shown else ""
