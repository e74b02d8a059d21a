"""`tracedoc serve --diff BEFORE AFTER`: the diff page built from a real pair, and served to headless Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.browser import chromium, needs_chromium, page_text, served
from tests.conftest import SAMPLES
from tracedoc.cli import cli
from tracedoc.dashboard.diff import DiffLoading
from tracedoc.diff import Diff, build_diff, load_side
from tracedoc.pages.diff import cause_chart, diff_sections, step_chart
from tracedoc.pages.fragments import Html

PAGE_TIMEOUT_MS = 60_000
BEFORE, AFTER = SAMPLES / "moe-hot-expert", SAMPLES / "moe-balanced"


@pytest.fixture(scope="module")
def moe_diff(tmp_path_factory: pytest.TempPathFactory) -> Diff:
    cache = tmp_path_factory.mktemp("cache")
    return build_diff(load_side(BEFORE, cache_dir=cache), load_side(AFTER, cache_dir=cache))


def _data(fig: Any) -> list[dict[str, list[Any]]]:
    return [r.data_source.data for r in fig.renderers]


def test_step_chart_holds_every_step_of_both_sides(moe_diff: Diff) -> None:
    """One dot per step of the job and of each rank, on each side, at its step time; each side's median as a bar."""
    data = _data(step_chart(moe_diff))
    dots, medians = next(d for d in data if "step" in d), next(d for d in data if "step" not in d)
    expected = [(("job", side), ms) for side, steps in (("before", moe_diff.job.before_steps),
                                                         ("after", moe_diff.job.after_steps)) for ms in steps.values()]
    for rank in moe_diff.ranks:
        expected += [((f"rank {rank.steps.rank}", "before"), ms) for ms in rank.steps.before_steps.values()]
        expected += [((f"rank {rank.steps.rank}", "after"), ms) for ms in rank.steps.after_steps.values()]
    assert sorted(zip(dots["y"], dots["ms"])) == sorted(expected)
    job_medians = {side: ms for y, side, ms in zip(medians["y"], medians["side"], medians["ms"]) if y[0] == "job"}
    assert job_medians == {"before": moe_diff.job.before.median_ms, "after": moe_diff.job.after.median_ms}


def test_cause_chart_stacks_the_compared_ranks_causes(moe_diff: Diff) -> None:
    """Before and after, each cause's ms per step: the sums are the mean steps the attribution gives."""
    (data,) = _data(cause_chart(moe_diff))[:1]
    stacks = [k for k in data if k != "y"]
    assert data["y"] == ["before", "after"]
    assert sum(data[k][0] for k in stacks) == pytest.approx(sum(c.before_ms for c in moe_diff.causes))
    assert sum(data[k][1] for k in stacks) == pytest.approx(sum(c.after_ms for c in moe_diff.causes))


def test_the_page_holds_the_verdict_kernels_and_findings_fate(moe_diff: Diff) -> None:
    sections = diff_sections(moe_diff)
    titles = [s.title for s in sections]
    assert titles[0] == "tracedoc diff" and "Findings" in titles and "Across ranks" in titles
    assert "Kernels slower per launch" in titles and "Kernels launched more often" in titles
    head = sections[0].items[0]
    assert isinstance(head, Html) and "Faster" in head.markup
    findings = next(s for s in sections if s.title == "Findings")
    markup = "".join(i.markup for i in findings.items if isinstance(i, Html))
    assert "expert-imbalance" in markup and "resolved" in markup


def test_a_side_that_cannot_be_read_is_one_line_in_the_page(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    loading = DiffLoading(BEFORE, broken, tmp_path / "cache")
    loading._run()
    assert loading.diff is None and loading.error and "\n" not in loading.error


def test_diff_takes_two_paths() -> None:
    result = CliRunner().invoke(cli, ["serve", "--diff", str(BEFORE), "--no-show"])
    assert result.exit_code == 2 and "--diff takes two paths" in result.output
    result = CliRunner().invoke(cli, ["serve", "--diff", str(BEFORE), str(SAMPLES / "absent"), "--no-show"])
    assert result.exit_code == 2 and "no such file" in result.output


# --- a real browser -----------------------------------------------------------------------------------------------

@needs_chromium
def test_diff_page_in_chromium(tmp_path: Path) -> None:
    """The page loads both sides, then shows the verdict, the two charts and the tables; screenshot kept."""
    with served(["--diff", BEFORE, AFTER], tmp_path / "cache", tmp_path / "server.log") as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url + "/")
        try:
            page.get_by_text("Faster: the job's median step").first.wait_for()
        except Exception as exc:
            exc.add_note(f"the page's text: {page_text(page)}")
            raise
        page.locator(".bk-Figure").nth(1).wait_for()
        page.locator(".bk-Figure canvas").first.wait_for()
        page.wait_for_timeout(300)
        page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
        for text in ("Where the time went", "Findings", "expert-imbalance", "Across ranks"):
            assert page.get_by_text(text).filter(visible=True).count(), text
        assert not dialogs
        print(f"screenshot: {tmp_path / 'diff.png'}")
