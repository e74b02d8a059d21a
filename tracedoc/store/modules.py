"""Load analysis modules: ``analyses/<group>/<name>.sql`` is the module ``group.name``.

A module's header says what the code needs to know about it, one fact a line, parsed here (``facts``):

- ``-- include: other.module``: a dependency, loaded first;
- ``-- uses: other.module``: loaded first where it applies (``Store.applies``); elsewhere the module itself makes
  the objects it reads of it, empty (``CREATE TEMP TABLE ... IF NOT EXISTS``, a table as the other module's), so
  that their planning is not paid where they could hold no row (the GPU floor reads the operators' roofline shares
  only on a trace with shapes). Where several modules read them, one module makes them and the others include it
  (``ranks.matched``: the collectives matched across ranks, ``nvtx.idle``: the NVTX range of the most idle time,
  ``gpu.busy_time``: the busy time the summary reads),
  since modules run at once on cursors (store.pool) may not make one object twice;
- ``-- reads: table, ...``: the store tables it measures, written only by some inputs (Nsight Compute kernels,
  flight-recorder dumps, GPU health, allocator events and snapshots, NVTX ranges), or the rows of a table every
  timeline has that only some traces hold, named in ``ROW_SETS`` (``communication_kernels``, ``steps_to_find``).
  It applies only where one of them has rows (or, in a distributed run's store of summaries, where the ranks handed
  back rows of what it makes): elsewhere its tables would be empty, and planning its queries alone costs more than
  analysing a small trace. A module without the line reads the timelines every trace format has;
- ``-- scope: job``: it runs on the client of a distributed run over every rank's summaries (or over inputs a
  distributed run does not split by rank); ``-- scope: ranks``: it compares ranks with each other, on the client,
  and finds nothing in a store of one rank. A module without the line reads one rank's events;
- ``-- hands back: object, view AS object, ...``: what a rank hands back of it to a distributed run's client in the
  first pass (the summaries the cross-rank modules read there), each object as itself or as a view of it;
- ``-- views stay views``: its views are never made tables (``include``'s ``views_as_tables``): they read rows
  written after they are made, or are read once (an export's events). ``-- stays a view``, the comment line right
  above one view's CREATE, keeps that view a view: one no analysis, rule or report reads, kept for exploring a
  store, is then not computed on every run;
- ``-- client only: object, ...``: objects it makes only on the client (the alignment of the ranks): a worker,
  which holds a batch of ranks and not the job, leaves their statements out.

Modules create only TEMP views, tables and macros, so analysing never changes a stored database; where they run
several at a time on cursors of one connection (``run``'s ``shared``, store.pool), in the connection's own in-memory
catalog instead. Before the first module on a connection, the declared input formats are written to the table
``input_formats`` (format, kind and a column per capability: operator_shapes, world_size, memory_events,
host_ranges, python_stacks, how_to_record; tracedoc/formats.py FORMATS), so that a module picks inputs by what they
are ('timeline') and what they give (``WHERE operator_shapes``) rather than by a list of names.
A module without ``-- reads:`` reads timelines: it runs only on a store holding a timeline
(``timeline_formats``) or where a module that includes it applies (``included_by``), the summary on every store
(``EVERY_STORE``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, fields
from importlib import resources
from importlib.resources.abc import Traversable

from tracedoc.errors import TracedocError, first_line
from tracedoc.formats import CAPABILITIES, FORMATS, TIMELINE, Format, of_kind
from tracedoc.store.engine import duckdb
from tracedoc.store.memory import out_of_memory_advice

_INCLUDE = re.compile(r"^--\s*include:\s*([\w.]+)\s*$", re.MULTILINE)
_USES = re.compile(r"^--\s*uses:\s*([\w.]+)\s*$", re.MULTILINE)
_READS = re.compile(r"^--\s*reads:\s*(\w+(?:\s*,\s*\w+)*)\s*$", re.MULTILINE)
_SCOPE = re.compile(r"^--\s*scope:\s*(job|ranks)\s*$", re.MULTILINE)
_HANDS_BACK = re.compile(r"^--\s*hands back:\s*(.+?)\s*$", re.MULTILINE)
_VIEWS_STAY = re.compile(r"^--\s*views stay views\s*$", re.MULTILINE)
_CLIENT_ONLY = re.compile(r"^--\s*client only:\s*(.+?)\s*$", re.MULTILINE)
# A view is bound again by every statement that reads it, with the views it reads: on a small store, where the
# analyses are mostly planning, each is made a table instead (Store.fit_threads), computed once.
# A view whose CREATE follows the line ``-- stays a view`` is left a view (``_STAYS`` matches that line).
# These patterns start with their words, not with a word boundary, which Python's engine would test at every
# character of the file (0.4 ms a module, on every run): ``_made`` checks the boundary of each match instead.
_TEMP_VIEW = re.compile(r"(?i:CREATE\s+OR\s+REPLACE\s+TEMP\s+VIEW)\b")
_STAYS = re.compile(r"--\s*stays a view\s*\n", re.IGNORECASE)
# Where a module's objects are shared by the cursors that run modules at once (store.pool), they are not TEMP.
_TEMP = re.compile(r"(?i:CREATE)\s+((?i:OR\s+REPLACE)\s+)?(?i:TEMP(?:ORARY)?)\s+")
_HANDED = re.compile(r"^(\w+)(?:\s+AS\s+(\w+))?$", re.IGNORECASE)
# A statement's text may begin with the comments before it (DuckDB 2.0.1's extract_statements keeps them).
_CREATES = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
                      r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|MACRO|FUNCTION)\s+"
                      r"(?:IF\s+NOT\s+EXISTS\s+)?([\w.]+)", re.IGNORECASE | re.DOTALL)

def module_file(module: str) -> Traversable:
    """The SQL file of a module key such as ``gpu.idle``."""
    group, _, name = module.partition(".")
    path = resources.files("tracedoc.analyses").joinpath(group, f"{name}.sql")
    if not name or not path.is_file():
        raise TracedocError(f"unknown analysis module '{module}'")
    return path


def all_modules() -> list[str]:
    """Every module key shipped with tracedoc, sorted."""
    root = resources.files("tracedoc.analyses")
    return sorted(f"{group.name}.{f.name[:-4]}" for group in root.iterdir() if group.is_dir()
                  for f in group.iterdir() if f.name.endswith(".sql"))


@dataclass(frozen=True)
class ModuleFacts:
    """What a module's header says of it: its includes, the store tables it reads (empty: the timelines every
    format has), its scope (None: one rank's events; 'job': on the client; 'ranks': compares ranks), what a rank
    hands back of it (the object's name on the client, and the view of it the worker reads) and the objects it
    makes only on the client."""

    includes: tuple[str, ...]
    reads: tuple[str, ...]
    scope: str | None
    hands_back: tuple[tuple[str, str], ...] = ()
    client_only: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    views_stay: bool = False


@functools.cache
def facts(module: str) -> ModuleFacts:
    """The facts ``module``'s header states (its leading comment lines: tests/test_analyses.py checks that no
    fact line stands below them)."""
    sql = module_header(module_text(module))
    reads = tuple(t.strip() for line in _READS.findall(sql) for t in line.split(","))
    scope = _SCOPE.search(sql)
    handed = []
    for item in (t.strip() for line in _HANDS_BACK.findall(sql) for t in line.split(",")):
        m = _HANDED.match(item)
        if m is None:
            raise TracedocError(f"analysis module {module}: '-- hands back: {item}' names no object")
        handed.append((m.group(2) or m.group(1), m.group(1)))
    client_only = tuple(t.strip() for line in _CLIENT_ONLY.findall(sql) for t in line.split(","))
    return ModuleFacts(tuple(_INCLUDE.findall(sql)), reads, scope.group(1) if scope else None, tuple(handed),
                       client_only, tuple(_USES.findall(sql)), bool(_VIEWS_STAY.search(sql)))


def on_client(module: str) -> bool:
    """True for a module of a distributed run's client: it runs there over the summaries of every rank."""
    return facts(module).scope is not None


# The rows a ``-- reads:`` line may name besides whole tables: rows of a table every timeline has, which only some
# traces hold (a trace of one GPU has no communication kernels), as a query's FROM clause; a store without a
# timeline holds none (Store.any_rows does not ask it).
ROW_SETS: dict[str, str] = {
    "communication_kernels": "gpu_activity WHERE kind = 'kernel' AND category = 'communication'",
    # the sources whose steps are looked for beyond the profiler's (trace.step_search): all of them where a step
    # range is named, else those without profiler steps (NOT IN, as the search's statements ask it)
    "steps_to_find": "sources WHERE getvariable('step_range') IS NOT NULL "
                     "OR source_id NOT IN (SELECT source_id FROM steps)",
}

# Modules run on every store: the summary and what the timelines recorded say what the inputs are, a timeline or
# not. The other modules without ``-- reads:`` (the steps, the window, the busy time among them) run where the store
# holds a timeline, or where a module that includes them applies (``included_by``).
EVERY_STORE: frozenset[str] = frozenset({"trace.summary", "trace.recording"})


@functools.cache
def included_by(module: str) -> tuple[str, ...]:
    """The modules with ``-- reads:`` that include ``module``, directly or through others (the allocator's timeline
    includes the steps, the throttling of GPU health the window): where one applies on a store without a timeline,
    ``module`` runs there too, and so is a dependency of a module that ``-- uses:`` it, never made twice."""
    closure: dict[str, set[str]] = {}

    def includes(name: str) -> set[str]:
        if name not in closure:
            closure[name] = set()
            for dep in facts(name).includes:
                closure[name] |= {dep} | includes(dep)
        return closure[name]

    return tuple(m for m in all_modules() if facts(m).reads and module in includes(m))


@functools.cache
def timeline_formats() -> frozenset[str]:
    """The formats whose inputs are timelines (tracedoc/formats.py FORMATS of kind TIMELINE), which every module
    without ``-- reads:`` reads."""
    return of_kind(TIMELINE)


# input_formats' columns after (format, kind): each capability and its SQL type (a bool, else what it is).
_SQL_TYPES = {"bool": "BOOLEAN", "float | None": "DOUBLE"}
_CAPABILITY_COLUMNS = ", ".join(f"{f.name} {_SQL_TYPES.get(str(f.type), 'VARCHAR')}"
                                for f in fields(Format) if f.name in CAPABILITIES)


def declare_formats(con: duckdb.DuckDBPyConnection, shared: bool = False) -> None:
    """The table ``input_formats`` (TEMP unless ``shared``): each declared input format, its kind and what it can
    give."""
    temp = "" if shared else "TEMP "
    con.execute(f"CREATE OR REPLACE {temp}TABLE input_formats (format VARCHAR, kind VARCHAR, {_CAPABILITY_COLUMNS})")
    row = f"(?, ?{', ?' * len(CAPABILITIES)})"
    con.execute(f"INSERT INTO input_formats VALUES {', '.join([row] * len(FORMATS))}",
                [value for f in FORMATS for value in (f.name, f.kind, *(getattr(f, name) for name in CAPABILITIES))])


def dependencies(module: str, applies: Callable[[str], bool] = lambda module: True) -> tuple[str, ...]:
    """The modules run before ``module``: its includes, then the modules it uses where ``applies`` says they do."""
    module_facts = facts(module)
    return (*module_facts.includes, *(used for used in module_facts.uses if applies(used)))


def include(con: duckdb.DuckDBPyConnection, included: set[str], module: str,
            memory_bytes: int | None = None, skip: Collection[str] = frozenset(),
            applies: Callable[[str], bool] = lambda module: True, views_as_tables: bool = False,
            shared: bool = False) -> None:
    """Run ``module`` (after its includes, and the modules it uses where ``applies`` says they do) on the
    connection, once: ``included`` holds the modules run on it. The other arguments are ``run``'s."""
    if not included and not shared:
        declare_formats(con)
    _include(con, included, module, memory_bytes, skip, applies, views_as_tables, shared)


def _include(con: duckdb.DuckDBPyConnection, included: set[str], module: str, memory_bytes: int | None,
             skip: Collection[str], applies: Callable[[str], bool], views_as_tables: bool, shared: bool) -> None:
    """``include`` once the input formats are declared."""
    if module in included:
        return
    for dep in dependencies(module, applies):
        _include(con, included, dep, memory_bytes, skip, applies, views_as_tables, shared)
    run(con, module, memory_bytes, skip, views_as_tables, shared, applies)
    included.add(module)


def run(con: duckdb.DuckDBPyConnection, module: str, memory_bytes: int | None = None,
        skip: Collection[str] = frozenset(), views_as_tables: bool = False, shared: bool = False,
        applies: Callable[[str], bool] | None = None) -> None:
    """Run ``module``'s own statements on the connection (its dependencies ran before): ``memory_bytes``, the
    connection's memory cap, is named in the error when DuckDB runs out of memory. The statements that create an
    object named in ``skip`` are left out (it is given already: a distributed run's summaries).
    ``views_as_tables``: its views made as tables, their rows computed once (a small store's analyses are mostly
    planning, which a view repeats in every reader). ``shared``: its objects made in the connection's default
    catalog rather than as TEMP ones, so that every cursor of the database sees them (store.pool). ``applies``:
    which of the modules it ``-- uses:`` ran before it, whose objects it then leaves out (not made empty, not even
    IF NOT EXISTS: a statement each on every store where they ran)."""
    sql = module_sql(module, views_as_tables and not facts(module).views_stay, shared)
    if applies is not None:
        skip = {*skip, *(made for used in facts(module).uses if applies(used) for made in created_objects(used, con))}
    try:
        if not skip:
            con.execute(sql)
        for statement in con.extract_statements(sql) if skip else ():
            if created_object(statement.query) not in skip:
                con.execute(statement.query)
    except duckdb.Error as exc:
        advice = out_of_memory_advice(memory_bytes) if isinstance(exc, duckdb.OutOfMemoryException) else ""
        raise TracedocError(f"analysis module {module} failed: {first_line(exc)}{advice}") from exc


@functools.cache
def module_sql(module: str, views_as_tables: bool = False, shared: bool = False) -> str:
    """The statements of ``module``'s file, its views made tables where ``views_as_tables``, its objects not TEMP
    where ``shared``."""
    sql = module_text(module)
    if views_as_tables:
        sql = _TEMP_VIEW.sub(lambda m: "CREATE OR REPLACE TEMP TABLE" if _made(m) and not _stays(m) else m[0], sql)
    return _TEMP.sub(lambda m: f"CREATE {m[1] or ''}" if _made(m) else m[0], sql) if shared else sql


def _made(match: re.Match[str]) -> bool:
    """True where ``match`` starts a word (not inside a longer name)."""
    start = match.start()
    return start == 0 or not (match.string[start - 1].isalnum() or match.string[start - 1] == "_")


def _stays(match: re.Match[str]) -> bool:
    """True where the line above ``match`` (at the start of its line) is ``-- stays a view``."""
    text, start = match.string, match.start()
    if start and text[start - 1] != "\n":
        return False
    above = text.rfind("\n", 0, max(start - 1, 0)) + 1
    return _STAYS.fullmatch(text, above, start) is not None


@functools.cache
def module_text(module: str) -> str:
    """The text of ``module``'s file, read once per process."""
    return module_file(module).read_text()


def module_header(text: str) -> str:
    """The comment lines a module's file starts with (blank lines among them): where its facts are stated."""
    end = 0
    for line in text.splitlines(keepends=True):
        if line.strip() and not line.startswith("--"):
            break
        end += len(line)
    return text[:end]


def created_objects(module: str, con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """The objects ``module``'s own statements create (not its includes'), its file parsed by ``con`` once per
    process. DuckDB's module-level parser would open its default connection: a database of its own, with a
    thread per core, 18 ms of every run's CPU."""
    if module not in _CREATED:
        statements = con.extract_statements(module_text(module))
        _CREATED[module] = frozenset(name for s in statements if (name := created_object(s.query)) is not None)
    return _CREATED[module]


_CREATED: dict[str, frozenset[str]] = {}  # created_objects' by module


def created_object(statement: str) -> str | None:
    """The object a CREATE statement makes (its name), else None."""
    m = _CREATES.match(statement)
    return m.group(1) if m else None
