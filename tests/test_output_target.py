"""One --out resolver for every document a command writes (report, diff, health report): the same reading of
extensions, directories and an explicit --format, each over its own list of formats."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc.cli import cli
from tracedoc.cli.errors import BadInput
from tracedoc.cli.options import _DirectoryPath, output_target, report_formats
from tracedoc.diff.render import FORMATS as DIFF_FORMATS

NO_PERFETTO = {".perfetto.json": "a diff has no Perfetto form"}


@pytest.mark.parametrize("fmt, out, expected", [
    (None, "r.markdown", ("md", "r.markdown")), (None, "r.HTM", ("html", "r.HTM")),
    (None, "r.perfetto.json", ("perfetto", "r.perfetto.json")), ("perfetto", "t.json", ("perfetto", "t.json")),
    ("json", "nodir", ("json", "nodir/tracedoc-report.json"))])
def test_the_report(fmt: str | None, out: str, expected: tuple[str, str]) -> None:
    fmt_, target = output_target(fmt, Path(out))
    assert (fmt_, str(target)) == expected


def test_the_diff_reads_out_as_the_report_does_over_its_own_formats() -> None:
    assert output_target(None, Path("d.markdown"), "tracedoc-diff", DIFF_FORMATS, NO_PERFETTO)[0] == "md"
    fmt, target = output_target(None, _DirectoryPath("out/"), "tracedoc-diff", DIFF_FORMATS, NO_PERFETTO)
    assert (fmt, str(target)) == ("text", "out/tracedoc-diff.txt")
    with pytest.raises(BadInput, match="a diff has no Perfetto form; use .txt .json .md .html or a directory"):
        output_target(None, Path("d.perfetto.json"), "tracedoc-diff", DIFF_FORMATS, NO_PERFETTO)
    with pytest.raises(BadInput, match="unknown extension; use .txt .json .md .html or a directory"):
        output_target(None, Path("d.pdf"), "tracedoc-diff", DIFF_FORMATS, NO_PERFETTO)


def test_the_report_formats_are_the_renderers_and_the_exports() -> None:
    assert report_formats() == {"text": ".txt", "json": ".json", "md": ".md", "html": ".html",
                                "perfetto": ".perfetto.json"}


def test_health_refuses_the_perfetto_form_in_one_line(tmp_path: Path) -> None:
    """A health report is rendered, never exported: --out h.perfetto.json is one line and exit 2 (the replay is
    samples/health-2xh200's NVML recording)."""
    result = CliRunner().invoke(cli, ["health", "--replay", str(SAMPLES / "health-2xh200" / "nvml-load.replay.json"),
                                      "--out", str(tmp_path / "h.perfetto.json")])
    assert result.exit_code == 2, result.output
    assert "a health report has no Perfetto form" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "h.perfetto.json").exists()
