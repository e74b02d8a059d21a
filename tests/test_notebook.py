"""The docs' Python examples in a real Jupyter kernel (ipykernel, driven by nbclient), as a notebook user runs them:
where ipywidgets is not installed, DuckDB refuses to change its progress-bar setting, and the cached stores the
examples read must be used, not taken for damaged and deleted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_python_api import _BLOCK, DOC

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

README = ROOT / "README.md"
SAMPLE = ROOT / "samples" / "decode-eager" / "trace.json.gz"
# The first cell: a kernel without ipywidgets, whatever this environment has (an import of it fails).
NO_IPYWIDGETS = "import sys\nsys.modules['ipywidgets'] = None\nimport os\nprint(os.environ['TRACEDOC_CACHE_DIR'])"


def _run(cells: list[str], cache: Path) -> list[dict]:
    """Run ``cells`` in a fresh python3 kernel started in the checkout with ``cache`` as its cache; their outputs,
    each with the index of its cell (``cell``)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(NO_IPYWIDGETS), *(nbformat.v4.new_code_cell(c) for c in cells)]
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # the kernel inherits this process's environment: the caller sets the cache there
    outputs = [dict(o) for cell in nb.cells for o in cell.outputs]
    assert nb.cells[0].outputs[0]["text"].strip() == str(cache)
    errors = [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]
    assert not errors, errors
    return [dict(o, cell=i) for i, cell in enumerate(nb.cells[1:]) for o in cell.outputs]


def _stored(cache: Path) -> dict[str, int]:
    """The cache's stores by name, with their inode (a store rebuilt is a new file)."""
    return {p.name: p.stat().st_ino for p in cache.glob("*.duckdb")}


def test_python_api_page_runs_in_a_kernel_without_ipywidgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/python-api.md's blocks, one cell each, print what the page shows; a second kernel reuses the cached
    store the first one made (never 'damaged; rebuilding it')."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(cache))
    blocks = _BLOCK.findall(DOC.read_text())
    for attempt in (1, 2):
        outputs = _run([code for code, _ in blocks], cache)
        if attempt == 1:
            made = _stored(cache)
            assert len(made) == 1
        stderr = "".join(o["text"] for o in outputs if o.get("name") == "stderr")
        assert "damaged" not in stderr
        # a cell's printed text, however the kernel split it into stream messages
        printed = ["".join(o["text"] for o in outputs if o.get("name") == "stdout" and o["cell"] == i)
                   for i in range(len(blocks))]
        assert printed == [shown for _, shown in blocks]
    assert _stored(cache) == made


def test_readme_python_example_shows_the_report_in_a_kernel_without_ipywidgets(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's notebook example, its store cached beforehand (as a command-line run leaves it): the report
    shows as HTML, the frames and the SQL answer show, and the cached store is read, not rebuilt."""
    import tracedoc

    cache = tmp_path / "cache"
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(cache))
    tracedoc.analyze(SAMPLE)
    made = _stored(cache)
    code = re.search(r"## Python and notebooks\n\n```python\n(.*?)```", README.read_text(), re.DOTALL).group(1)
    # one cell per statement, as a notebook user runs it: a cell ending in an expression shows its value
    cells = [ast.get_source_segment(code, statement) for statement in ast.parse(code).body]
    outputs = _run(cells, cache)
    results = [o["data"] for o in outputs if o["output_type"] == "execute_result"]
    assert len(results) == 3
    assert "launch-bound" in results[0]["text/html"] and "Where the time went" in results[0]["text/html"]
    # each finding a line that opens on its message and fix
    assert '<details class="finding' in results[0]["text/html"] and "<b>Fix:</b>" in results[0]["text/html"]
    assert "launch_overhead" in results[1]["text/html"] and "host_wait" in results[2]["text/html"]
    assert "damaged" not in "".join(o.get("text", "") for o in outputs)
    assert _stored(cache) == made


def test_a_memory_reports_notebook_view_has_its_memory_section() -> None:
    """memory-leak's saved report: the notebook view states each GPU's memory as the text report does (its peak
    and the 32 MiB per step the leak planted), escaped."""
    import tracedoc.notebook  # noqa: F401  (the view a notebook gets with tracedoc's public names)
    from tracedoc.saved import read_report
    from tracedoc.words.memory import memory_lines
    report = read_report(ROOT / "reports" / "memory-leak.json")
    html = report._repr_html_()
    assert "<h3>Memory</h3>" in html
    [(heading, lines)] = memory_lines(report)
    assert f"<h4>{heading}</h4>" in html and all(f"<li>{line}</li>" in html for line in lines if "<" not in line)
    assert "32.0 MiB" in html
