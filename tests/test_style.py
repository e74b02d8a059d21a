"""The code base stays ruff clean (configuration in pyproject.toml) and its modules import one another without
circles."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT


def test_ruff_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]


def import_graph(package: Path) -> dict[str, set[str]]:
    """Which tracedoc modules each tracedoc module imports: every import statement, those inside functions too (a
    lazy import hides a circle from Python, not from the design)."""
    modules = {".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block)
                       for stmt in block.body for n in ast.walk(stmt)}  # type: ignore[attr-defined]
        for node in ast.walk(tree):
            if id(node) in typing_only:  # `if TYPE_CHECKING:` imports never run
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    parts = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(parts + ([base] if base else []))
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` the module mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            edges |= {t for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def _is_type_checking(node: ast.AST) -> bool:
    """An `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) block."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def cycle_in(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of the graph, as the modules around it (empty when there is none)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def circles_through(graph: dict[str, set[str]], prefixes: tuple[str, ...]) -> list[str]:
    """A circle through a module whose name starts with one of ``prefixes`` (the graph cut to what they reach)."""
    reached: set[str] = set()
    todo = [m for m in graph if m.startswith(prefixes)]
    while todo:
        if (m := todo.pop()) not in reached:
            reached.add(m)
            todo += graph[m]
    cycle = cycle_in({m: graph[m] & reached for m in reached})
    return cycle if any(m.startswith(prefixes) for m in cycle) else []


def test_the_pages_import_without_circles() -> None:
    """The pages, the HTML renderer and the dashboard import downwards only: pages from the report and the text
    helpers, the renderer and the app from the pages."""
    graph = import_graph(ROOT / "tracedoc")
    assert {"tracedoc.pages.overview", "tracedoc.pages.fragments"} <= graph["tracedoc.pages.report"] | \
        graph["tracedoc.pages.overview"]
    assert circles_through(graph, ("tracedoc.pages", "tracedoc.dashboard", "tracedoc.render")) == []



def test_the_pages_and_the_words_do_not_import_the_renderers() -> None:
    """The pages and the wording (tracedoc.words) sit below the renderers: the HTML renderer draws the pages, never
    the other way round."""
    graph = import_graph(ROOT / "tracedoc")
    upward = sorted(f"{m} → {t}" for m, targets in graph.items() if m.startswith(("tracedoc.pages", "tracedoc.words"))
                    for t in targets if t.startswith("tracedoc.render"))
    assert upward == []

CORE = ("tracedoc.report", "tracedoc.store", "tracedoc.analyses", "tracedoc.judge", "tracedoc.ingest")
FACES = ("tracedoc.cli", "tracedoc.dashboard", "tracedoc.notebook", "tracedoc.pages", "tracedoc.render")


def test_the_core_never_imports_the_faces() -> None:
    """Reading, storing, measuring and judging import nothing that shows a report (the command line, the dashboard,
    the notebook view, the pages, the renderers), not even inside a function: a library user gets the core without
    them."""
    graph = import_graph(ROOT / "tracedoc")
    assert any(m.startswith("tracedoc.ingest.") for m in graph)  # the core is read
    upward = sorted(f"{m} → {t}" for m, targets in graph.items() if m.startswith(CORE)
                    for t in targets if t.startswith(FACES))
    assert upward == []


def test_what_draws_a_report_never_reads_rules() -> None:
    """The pages, the renderers, the notebook view, the dashboard and the wording take what a finding's rule made of
    it from the finding (``Finding.kind``, ``across_ranks``): none imports the rules' package, so none reads a rule
    file."""
    graph = import_graph(ROOT / "tracedoc")
    readers = sorted(f"{m} → {t}" for m, targets in graph.items()
                     if m.startswith((*FACES, "tracedoc.words")) and not m.startswith("tracedoc.cli")
                     for t in targets if t.startswith("tracedoc.judge"))
    assert readers == []


def test_no_import_circles() -> None:
    graph = import_graph(ROOT / "tracedoc")
    assert len(graph) > 50 and graph["tracedoc.render.html"]  # the whole package is read
    assert cycle_in(graph) == [], " → ".join(cycle_in(graph))


def test_the_cycle_check_finds_a_circle() -> None:
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_every_package_is_installed() -> None:
    """Each folder of the package with an __init__.py is listed in pyproject.toml's packages, so a built wheel holds
    it (an editable install would hide one left out)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "tracedoc").rglob("__init__.py")
             if "__pycache__" not in p.parts and "builtin_rules" not in p.parts}
    assert found - listed == set()
