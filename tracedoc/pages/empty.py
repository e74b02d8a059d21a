"""Why a page has nothing to show for a report, in the words of the inputs' format: an Nsight Compute profile has
kernels but no timeline, flight-recorder dumps have collectives but no kernels, a single-rank trace has nothing to
compare across ranks. Each page module words its own empty state: ``EMPTY`` (input kind, see ``input_kind`` → the
sentence, with OTHER for the rest), ``has_data(report)`` and, where the wording needs more than the input kind,
``empty_sentence(report)``; a page without ``has_data`` is always drawn. This module reads those members for any
page: the pages show the sentence as their empty state and the dashboard's navigation greys out the page with it as
the tooltip. Needs no Bokeh.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from tracedoc.formats import ALLOCATOR_SNAPSHOTS, BY_NAME, HANG_DUMPS, HEALTH, KERNEL_PROFILE, TIMELINE
from tracedoc.report import Report

OTHER = "other"
# The kinds of input a page words its empty state for (tracedoc/formats.py), the first present winning, and OTHER.
INPUT_KINDS = (TIMELINE, KERNEL_PROFILE, HANG_DUMPS, HEALTH, ALLOCATOR_SNAPSHOTS, OTHER)


def input_kind(report: Report | None) -> str:
    """What the inputs are, for the wording, from their formats' declared kinds: TIMELINE (PyTorch traces, Nsight
    Systems reports), else KERNEL_PROFILE, HANG_DUMPS, HEALTH (NVML, telemetry), ALLOCATOR_SNAPSHOTS, or OTHER
    (kernel benchmarks; also without a report)."""
    kinds = {BY_NAME[i.format].kind for i in report.inputs if i.format in BY_NAME} if report is not None else set()
    return next((kind for kind in INPUT_KINDS if kind in kinds), OTHER)


def worded(sentences: Mapping[str, str], report: Report | None) -> str:
    """The sentence of ``sentences`` (a page's ``EMPTY``) for the report's kind of input, else its OTHER one."""
    return sentences.get(input_kind(report), sentences[OTHER])


def sentence(page: ModuleType, report: Report) -> str:
    """Why ``page`` has nothing to show for these inputs: its own ``empty_sentence`` where it has one, else its
    ``EMPTY`` sentence for the inputs' kind."""
    own = getattr(page, "empty_sentence", None)
    return str(own(report)) if own is not None else worded(page.EMPTY, report)


def why_empty(page: ModuleType, report: Report) -> str | None:
    """The page's empty-state sentence when it has no data for the report, else None (also for a page without
    ``has_data``: always drawn, or, like the timeline, judged from the store)."""
    has_data = getattr(page, "has_data", None)
    return None if has_data is None or has_data(report) else sentence(page, report)
