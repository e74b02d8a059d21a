"""The figures of one rank waiting, on the Overview, Ranks and Overlap pages: each says how it relates to the
others, and the relations they state hold on real multi-rank traces."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.pages import overlap, overview, ranks, waits
from tracedoc.pages.fragments import Html


def notes(sections: list) -> str:
    """A page's notes and fragments as one text."""
    return " ".join([s.note for s in sections] + [i.markup for s in sections for i in s.items if isinstance(i, Html)])


def test_each_wait_figure_names_the_others() -> None:
    """ddp-straggler, rank 0 waiting for rank 1: the Overview's 'waiting for a peer' (and the headline's 'waiting
    for rank 1'), the Ranks page's 'wait inside collectives', its exposed part and the straggler's 'others' wait',
    and the Overlap page's 'exposed' communication each come with the sentence that links them."""
    report = analyze([SAMPLES / "ddp-straggler"])
    assert "waiting for rank 1" in notes(overview.sections(report))
    text = notes(overview.sections(report))
    assert waits.OVERVIEW in text and waits.headline_note(report).replace("'", "&#x27;") in text
    assert "Waiting for rank 1" in waits.headline_note(report)
    rank_sections = ranks.sections(report)
    wait = next(s for s in rank_sections if s.title == "Wait inside collectives")
    assert waits.RANKS in wait.note
    table = next(s for s in rank_sections if s.title == "Per rank and step").items[0].markup
    assert "exposed wait ms" in table and "title=" in table.split("exposed wait ms")[0].rsplit("<th", 1)[1]
    assert waits.OVERLAP in overlap.sections(report)[0].note
    for sentence, others in ((waits.OVERVIEW, ("Ranks page", "Overlap page")),
                             (waits.RANKS, ("Overview", "Overlap page")),
                             (waits.OVERLAP, ("Overview", "Ranks page"))):
        assert all(other in sentence for other in others)


def test_a_single_gpu_report_has_no_such_sentences() -> None:
    report = analyze([SAMPLES / "decode-eager"])
    text = notes(overview.sections(report))
    assert waits.OVERVIEW not in text and "Waiting for rank" not in text


@pytest.mark.parametrize("sample", ["ddp-straggler", "moe-hot-expert-4rank", "ddp-no-overlap"])
def test_the_stated_relations_hold(sample: str) -> None:
    """Per rank: the exposed wait is part of the wait inside collectives and of the exposed communication; the
    Overview's 'waiting for a peer' is about the exposed wait; with the attributed communication it makes about the
    exposed communication (the Overlap page's, which also covers what lies outside the steps); the headline's
    'waiting' share is about the same waiting over all GPUs' time; the straggler's
    'others' wait' in a step is the exposed wait of the rank it held up most (two ranks: the other one)."""
    report = analyze([SAMPLES / sample])
    attributed: dict[tuple[int, str], float] = defaultdict(float)
    for row in report.attribution:
        attributed[(row["rank"], row["cause"])] += float(row["ms"] or 0)
    steps = report.metrics["rank_steps"]
    exposed_wait = defaultdict(float)
    for row in steps:
        assert row["exposed_wait_ms"] <= row["comm_wait_ms"] + 1e-3
        exposed_wait[row["rank"]] += row["exposed_wait_ms"]
    for row in report.metrics["comm_overlap"]:
        rank, exposed = row["rank"], row["exposed_comm_ms"]
        peer_wait, transfer = attributed[(rank, "wait_for_peer")], attributed[(rank, "comm_transfer")]
        assert exposed_wait[rank] <= exposed + 1e-3
        assert peer_wait == pytest.approx(exposed_wait[rank], rel=0.2, abs=1.0)
        assert peer_wait + transfer == pytest.approx(exposed, rel=0.1, abs=1.0)
    from tracedoc.causes import window_rows

    window = sum(float(r["ms"] or 0) for r in window_rows(report.attribution))
    all_waits = sum(v for (_, cause), v in attributed.items() if cause == "wait_for_peer")
    assert report.summary["waiting_pct"] == pytest.approx(100 * all_waits / window, rel=0.1)  # the headline's
    if report.summary["ranks"] == 2:
        by = {(r["rank"], r["step"]): r for r in steps}
        for (rank, step), row in by.items():
            if row["others_wait_ms"] > 1:
                assert row["others_wait_ms"] == pytest.approx(by[(1 - rank, step)]["exposed_wait_ms"], abs=0.01)
