"""Every renderer on the same real report; strings from traces never become markup."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tracedoc import Report, analyze
from tracedoc.render import RENDERERS

HOSTILE = "<img src=x onerror=alert(1)> [link](http://x) | *b*"


@pytest.fixture(scope="module")
def report() -> Report:
    return analyze([SAMPLES / "input-slow"])


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_renderer_shows_every_finding(name: str, report: Report) -> None:
    text = RENDERERS[name]().render(report)
    for finding in report.findings:
        assert finding.rule in text


def test_json_round_trip(report: Report) -> None:
    again = Report.from_json(report.to_json())
    assert again.to_dict() == json.loads(report.to_json())


def test_hostile_names_are_escaped_in_markdown(tmp_path: Path) -> None:
    """A DataLoader range named like HTML/Markdown reaches the message (the host was busy in it) but stays text
    (an edited copy of samples/input-slow with the name put before the range's own)."""
    doc = json.loads(gzip.decompress((SAMPLES / "input-slow" / "trace.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("name", "").startswith("enumerate(DataLoader)"):
            e["name"] = HOSTILE + " " + e["name"]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    report = analyze([path])
    finding = next(f for f in report.findings if f.rule == "gpu-idle-host-bound")
    assert HOSTILE in finding.message
    md = RENDERERS["md"]().render(report)
    assert not re.search(r"(?<!\\)<img", md) and "\\<img src=x onerror=alert(1)\\>" in md
    assert "\\[link\\](http://x) \\| \\*b\\*" in md


def test_evidence_reads_as_a_person_would_write_it() -> None:
    """Counts without decimals ('1,152 kernels per step', not '1,152.0'), sizes in their largest unit ('1.92 TB',
    not '1,924,615.1 MB'), and a share in % beside the time of the same name on one row."""
    decode = RENDERERS["md"]().render(analyze([SAMPLES / "decode-eager"]))
    assert re.search(r"\| kernels per step \| [\d,]+ \|", decode), decode
    ncu = RENDERERS["md"]().render(analyze([SAMPLES / "ncu-a40-julia"]))
    assert "4.31 GB" in ncu and "4,312.6 MB" not in ncu
    slow = RENDERERS["md"]().render(analyze([SAMPLES / "input-slow"]))
    assert re.search(r"\| idle in long gaps waiting on the host \| [\d.]+ ms \([\d.]+%\) \|", slow)
    assert not re.search(r"\| idle in long gaps waiting on the host \| [\d.]+% \|", slow)  # no second row for the share


def test_a_long_title_never_cuts_the_rule_id_at_80_columns() -> None:
    report = analyze([SAMPLES / "hang-4rank-stuck"])
    text = RENDERERS["text"](width=80).render(report)
    assert f"{report.findings[0].rule} · no saving: the job is stuck" in text  # a hang's wait is no saving


def test_top_kernels_keep_what_tells_them_apart() -> None:
    """input-fast's top kernels include two cuDNN wgrad GEMMs whose names agree in their first 40 characters
    ('sm90_xmma_wgrad_indexed_implicit_gemm_f…' twice, once per tile size): the terminal shows each as the
    dashboard's shortener writes it (a name that is no C++ template, whole), never two kernels alike."""
    from tracedoc.pages.names import kernel_labels
    from tracedoc.render.text import TextRenderer
    from tracedoc.saved import read_report
    report = read_report(Path(__file__).parent.parent / "reports" / "input-fast.json")
    assert not report.findings
    names = {r["name"] for r in sorted(report.metrics["top_kernels"], key=lambda r: -r["total_ms"])[:5]}
    assert len({n[:39] for n in names}) < len(names)
    table = TextRenderer(width=400).render(report).split("Top kernels")[1]
    labels = kernel_labels(names, 60)
    assert len(set(labels.values())) == len(names)
    for name in names:
        assert labels[name] in table, name
