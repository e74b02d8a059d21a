"""Names from traces never act on the terminal or on Markdown: escape sequences, Rich markup, line breaks."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from click.testing import CliRunner

from tests.conftest import SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.render.markdown import MarkdownRenderer
from tracedoc.render.text import TextRenderer
from tracedoc.words.sanitize import one_line, terminal_text

# Clear the screen, an OSC 8 hyperlink, Rich markup (a link and an unbalanced closing tag), a carriage return and
# a line break that would start a Markdown heading, a bell, a right-to-left override and a lone surrogate.
HOSTILE = ("data\x1b[2J\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07[link=http://evil.example/]x[/link]"
           "kern[/]\r\n# injected heading\x07\u202e\ud800")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\ud800-\udfff]")


def _hostile_input_slow(directory: Path) -> Path:
    """An edited copy of samples/input-slow/trace.json.gz whose DataLoader range (named by gpu-idle-host-bound as
    what the host did in the gaps) has HOSTILE, less the lone surrogate (a JSON reader rejects those as malformed
    input), before its name."""
    doc = json.loads(gzip.decompress((SAMPLES / "input-slow" / "trace.json.gz").read_bytes()))
    renamed = 0
    for event in doc["traceEvents"]:
        if event.get("name", "").startswith("enumerate(DataLoader)"):
            event["name"] = HOSTILE.replace("\ud800", "") + event["name"]
            renamed += 1
    assert renamed == 3
    path = directory / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _hostile_ncu_csv(directory: Path) -> Path:
    """An edited copy of samples/ncu-h200-torch-csv's CSV whose softmax kernel (of its latency-bound finding) is
    renamed to Rich markup, an escape sequence and a bell."""
    source = SAMPLES / "ncu-h200-torch-csv" / "h200_torch_gemm_softmax_full.raw.base-units.csv"
    text = source.read_text()
    softmax = re.search(r'"(void at::<unnamed>::cunn_SoftMaxForwardReg<[^"]*)"', text).group(1)
    assert text.count(f'"{softmax}"') == 2
    path = directory / "kernels.raw.base-units.csv"
    path.write_text(text.replace(f'"{softmax}"', '"kern[/][link=http://evil.example/]x[/link]\x1b[2J\x07"'))
    return path


def _assert_inert(text: str) -> None:
    assert not _CONTROL.search(text), repr(_CONTROL.search(text))
    assert "\x1b]8" not in text and "\x1b[" not in text


def test_sanitizers_remove_sequences_and_show_controls() -> None:
    assert terminal_text("a\x1b[2Jb\x1b]8;;http://x/\x07c\x1b]8;;\x07") == "abc"
    assert terminal_text("bell\x07") == "bell\\x07"
    assert terminal_text("z\ud800") == "z\ufffd"
    assert one_line("a\r\n# b\tc") == "a # b c"


def test_hostile_annotation_reaches_no_terminal(tmp_path: Path) -> None:
    path = _hostile_input_slow(tmp_path)
    report = analyze([path], use_cache=False)
    host_bound = next(f for f in report.findings if f.rule == "gpu-idle-host-bound")
    assert "evil.example" in host_bound.message  # the name is there, as data
    for color in (False, True):
        out = TextRenderer(color=color).render(report)
        if color:  # styles are escape sequences: only SGR colour codes may remain
            out = re.sub(r"\x1b\[[0-9;]*m", "", out)
        _assert_inert(out)
        assert "[link=http://evil.example/]" in out  # shown literally, never made a link
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 0, result.output
    _assert_inert(result.stdout)


def test_hostile_kernel_name_in_markup_and_markdown(tmp_path: Path) -> None:
    path = _hostile_ncu_csv(tmp_path)
    result = CliRunner().invoke(cli, ["analyze", str(path), "--no-cache"])
    assert result.exit_code == 0, result.output  # 'kern[/]' used to raise rich's MarkupError
    _assert_inert(result.stdout)
    report = analyze([path], use_cache=False)
    assert any("kern[/]" in (f.scope.kernel or "") for f in report.findings)
    markdown = MarkdownRenderer().render(report)
    _assert_inert(markdown)
    assert not any(line.startswith("# injected") for line in markdown.splitlines())
    assert "evil.example" in markdown and "](http" not in markdown
