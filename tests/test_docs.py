"""The documentation promises hold: analyses, rules, commands and the README describe what the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import ROOT
from tracedoc.cli import cli
from tracedoc.formats import FORMATS
from tracedoc.judge import load_rules
from tracedoc.measures import UNITS
from tracedoc.pages import PAGES
from tracedoc.report_tables import SECTIONS, Section
from tracedoc.store import Store
from tracedoc.store.modules import all_modules, module_file

_CREATE = re.compile(r"^CREATE (?:OR REPLACE )?(TEMP )?(TABLE|VIEW|MACRO)\s+(?:IF NOT EXISTS\s+)?(\w+)", re.M)


@pytest.mark.parametrize("module", all_modules())
def test_analysis_module_is_documented(module: str) -> None:
    """Each module starts with a header comment naming it, documents every object it creates, and only TEMP."""
    sql = module_file(module).read_text()
    assert sql.startswith(f"-- {module}:"), f"{module}: header comment must start with '-- {module}:'"
    group = module.split(".")[0]
    for match in _CREATE.finditer(sql):
        temp, _, name = match.groups()
        assert temp, f"{module}: {name} must be TEMP (stores are read-only during analysis)"
        assert name.startswith(f"{group}_"), f"{module}: public name {name} must start with '{group}_'"
        preceding = sql[: match.start()].rstrip().splitlines()[-1]
        assert preceding.startswith("--"), f"{module}: {name} needs a comment above it"



def _comment_above(sql: str, name: str) -> str:
    """The comment lines right above the statement that creates ``name``."""
    match = next(m for m in _CREATE.finditer(sql) if m.group(3) == name)
    lines = sql[: match.start()].rstrip().splitlines()
    comment: list[str] = []
    while lines and lines[-1].startswith("--"):
        comment.insert(0, lines.pop())
    return "\n".join(comment)


@pytest.fixture(scope="module")
def every_module() -> Store:
    """An empty store with every analysis module run, to read the columns of their views."""
    store = Store.create(None)
    for module in all_modules():
        store.include(module)
    return store


@pytest.mark.parametrize("module", all_modules())
def test_report_views_name_every_column(module: str, every_module: Store) -> None:
    """A report view (<group>_report_<name>: a table of the report, its measures in the report's units) names each
    of its columns in the comment above it: the columns pages and renderers read."""
    sql = module_file(module).read_text()
    group = module.split(".")[0]
    for name in (m.group(3) for m in _CREATE.finditer(sql) if m.group(3).startswith(f"{group}_report_")):
        comment = _comment_above(sql, name)
        columns = [r["column_name"] for r in every_module.query(f"DESCRIBE {name}")]
        missing = [c for c in columns if not re.search(rf"\b{c}\b", comment)]
        assert not missing, f"{module}: the comment above {name} does not name {missing}"


@pytest.mark.parametrize("table", [t for s in SECTIONS for t in s.tables], ids=lambda t: t.view)
def test_report_tables_read_report_views(table, every_module: Store) -> None:
    """Each view of the report is a <group>_report_<name> view of its module, ordered by its own columns."""
    group = table.module.split(".")[0]
    assert table.view.startswith(f"{group}_report_"), table.view
    assert re.search(rf"^CREATE OR REPLACE TEMP VIEW {table.view} AS$", module_file(table.module).read_text(), re.M)
    columns = {r["column_name"] for r in every_module.query(f"DESCRIBE {table.view}")}
    assert set(table.order_only) <= columns
    order = set(re.findall(r"\b[a-z_]+\b", table.order))  # the column names (SQL's words are in capitals)
    assert order <= columns, order - columns

# Columns of numbers that are keys, not measures: which rank, device, step, sequence number or P-state a row is of.
_KEYS = re.compile(r"^(rank|device|step|source_id|snapshot_id|pstate|\w+_seq)$")
_NUMBER = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UBIGINT|FLOAT|DOUBLE|DECIMAL)")


def _number_columns(columns: list[tuple[str, str]]) -> set[str]:
    """The columns holding numbers, a nested row's (STRUCT, LIST of STRUCT) fields by their own names."""
    out = set()
    for name, kind in columns:
        if (nested := re.fullmatch(r"STRUCT\((.*)\)(\[\])?", kind)) is not None:
            fields = re.findall(r'(?:^|, )"?(\w+)"? ((?:[^,(]|\([^()]*\))+)', nested.group(1))
            out |= _number_columns([(f, t) for f, t in fields])
        elif _NUMBER.match(kind) and not _KEYS.match(name):
            out.add(name)
    return out


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.key)
def test_report_views_declare_their_measures(section: Section, every_module: Store) -> None:
    """Every number a part of the report carries is declared with its unit (and polarity, where one way is better)
    beside its view, so that the check of saved reports, the renderers and the diff read it rather than guess from
    the column's name; and each declaration names a column of the part."""
    columns: set[str] = set()
    for table in section.tables:
        described = [(r["column_name"], r["column_type"]) for r in every_module.query(f"DESCRIBE {table.view}")
                     if r["column_name"] not in table.order_only]
        numbers = _number_columns(described)
        undeclared = numbers - {name for name, _ in table.measures}
        assert not undeclared, f"{table.view}: no measure declared for {sorted(undeclared)}"
        assert all(m.unit in UNITS and m.better in (None, "lower", "higher") for _, m in table.measures)
        columns |= numbers
    declared = {name for table in section.tables for name, _ in table.measures}
    assert declared <= columns, f"{section.key}: measures of no column: {sorted(declared - columns)}"


def test_every_rule_has_fix_and_references() -> None:
    for rule in load_rules():
        assert rule.fix and rule.references, rule.id
        assert rule.evidence, f"{rule.id}: a finding must carry evidence"


def test_readme_lists_every_builtin_rule() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [r.id for r in load_rules() if f"`{r.id}`" not in readme]
    assert not missing, f"README's table of findings misses {missing}"


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_command_help_has_an_example(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output, f"`tracedoc {command} --help` should end with an Example block"


def test_readme_commands_exist() -> None:
    """Every `tracedoc <command>` the README shows is a real command."""
    readme = (ROOT / "README.md").read_text()
    used = set(re.findall(r"^\s*(?:\$ )?tracedoc ([a-z-]+)", readme, re.M))
    assert used, "README shows no tracedoc command"
    assert used <= set(cli.commands), f"README uses unknown commands: {used - set(cli.commands)}"


def test_architecture_steps_name_what_exists() -> None:
    """The steps for adding a format, a page and a rule (docs/ARCHITECTURE.md) name files that exist, and every
    "`NAME` in `FILE`" they give is defined in that file; the examples are a real format, page and rule."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    steps = text[text.index("## Adding a format, a page, a rule"):]
    paths = {p for p in re.findall(r"`([\w./-]+/[\w./-]*)`", steps) if "<" not in p}
    missing = sorted(p for p in paths if not (ROOT / p.rstrip("/")).exists())
    assert not missing, f"ARCHITECTURE.md names missing files: {missing}"
    for name, path in re.findall(r"`(\w+)` in\s+`([\w./-]+)`", steps):
        source = (ROOT / path).read_text()
        assert re.search(rf"^(?:def |class )?{name}\b|\b(?:def|class) {name}\b|^\s*{name}\b.*=|^{name}:", source,
                         re.MULTILINE), f"{name} is not defined in {path}"
    assert "telemetry" in {f.name for f in FORMATS} and "memory" in {p.module for p in PAGES}
    assert "low-comm-overlap" in {r.id for r in load_rules()}


def test_readme_diff_example_prints_what_the_code_prints() -> None:
    """The lines the README shows of `tracedoc diff samples/decode-eager samples/decode-cudagraph` are the first lines
    the command prints today."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"\$ tracedoc diff (samples/decode-eager samples/decode-cudagraph)\n(.*?)\n\.\.\.\n", readme,
                      re.DOTALL)
    assert block, "README shows no diff example of decode-eager → decode-cudagraph"
    shown = block.group(2).splitlines()
    printed = CliRunner().invoke(cli, ["diff", *block.group(1).split()], env={"COLUMNS": "300"},
                                 catch_exceptions=False).output.splitlines()
    assert printed[:len(shown)] == shown


def _heading_anchors(path: Path) -> set[str]:
    """The anchors a Markdown renderer gives the headings of ``path``: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered (-1, -2 …); headings inside fenced code are not headings."""
    seen: dict[str, int] = {}
    fenced = False
    for line in path.read_text().splitlines():
        fenced ^= line.startswith("```")
        if fenced or not (heading := re.match(r"#+ (.*)", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).replace("`", "").strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return {f"{slug}-{n}" if n else slug for slug, count in seen.items() for n in range(count + 1)}


def test_links_between_the_docs_resolve() -> None:
    """Every relative link of the README and docs/ names a file that exists and, after '#', a heading it has: the
    docs cite one another's sections, and a renamed or moved section must take its links with it."""
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (page.parent / file) if file else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _heading_anchors(linked):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
