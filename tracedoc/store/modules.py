"""Load analysis modules: ``analyses/<group>/<name>.sql`` is the module ``group.name``.

A module's header lists its dependencies as ``-- include: other.module`` lines; they are loaded first. Modules
create only TEMP views, tables and macros, so analysing never changes a stored database. Before the first module
on a connection, the declared input formats are written to the TEMP table ``input_formats(format, kind)``
(ingest/base.py FORMATS), so that a module picks inputs by kind ('timeline') rather than by a list of names.

Some groups measure one kind of input only (``group_formats``): Nsight Compute kernels, flight-recorder dumps,
GPU health. Their modules are run only when an input of such a format is in the store; elsewhere their tables
would be empty, and planning their queries alone costs more than analysing a small trace. Likewise the groups
that read timelines run only on a store holding a timeline (``timeline_formats``), ``trace`` on every store.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from importlib import resources
from importlib.resources.abc import Traversable

import duckdb

from tracedoc.errors import TracedocError, first_line
from tracedoc.store.memory import out_of_memory_advice

_INCLUDE = re.compile(r"^--\s*include:\s*([\w.]+)\s*$", re.MULTILINE)
# A statement's text may begin with the comments before it (DuckDB 2.0.1's extract_statements keeps them).
_CREATES = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
                      r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?(?:TABLE|VIEW|MACRO|FUNCTION)\s+"
                      r"(?:IF\s+NOT\s+EXISTS\s+)?([\w.]+)", re.IGNORECASE | re.DOTALL)

# Groups made from tables a trace writes only when recorded with its memory events: a PyTorch trace with
# profile_memory=True, an Nsight Systems export with --cuda-memory-usage=true (Store.formats names such a trace
# 'torch_memory', 'nsys_memory'); every other group's formats are declared with the formats (ingest/base.py FORMATS).
_PSEUDO_FORMATS: dict[str, frozenset[str]] = {"memory": frozenset({"torch_memory", "nsys_memory"})}


@functools.cache
def group_formats() -> dict[str, frozenset[str]]:
    """Analysis group: the input formats its tables are made from; a group not named here reads the timelines
    every trace format has."""
    from tracedoc.ingest.base import FORMATS  # here, not at the top: the ingest package imports the store

    groups: dict[str, frozenset[str]] = dict(_PSEUDO_FORMATS)
    for f in FORMATS:
        for group in f.groups:
            groups[group] = groups.get(group, frozenset()) | {f.name}
    return groups


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


# Modules that compare ranks with each other: nothing to find in a store of one rank.
CROSS_RANK: frozenset[str] = frozenset({"ranks.stragglers", "ranks.alltoall"})


# Groups run on every store: the summary and window say what the inputs are, a timeline or not.
EVERY_STORE: frozenset[str] = frozenset({"trace"})


@functools.cache
def timeline_formats() -> frozenset[str]:
    """The formats whose inputs are timelines (ingest/base.py FORMATS of kind TIMELINE), which every group not in
    ``group_formats`` reads."""
    from tracedoc.ingest.base import FORMATS, TIMELINE  # here, not at the top: the ingest package imports the store

    return frozenset(f.name for f in FORMATS if f.kind == TIMELINE)


def applies(module: str, formats: Collection[str], ranks: int) -> bool:
    """True when ``module`` can find anything in a store holding inputs of ``formats`` from ``ranks`` ranks. A
    timeline group finds nothing without a timeline: on an Nsight Compute CSV, planning those modules alone took
    a quarter of the analyses. Ranks are compared only when they can be one job's: not timelines of two formats
    (an Nsight Systems run beside a PyTorch trace: two recordings, not two ranks)."""
    if module in CROSS_RANK and (ranks < 2 or len(timeline_formats() & set(formats)) > 1):
        return False
    group = module.partition(".")[0]
    needs = group_formats().get(group)
    if needs is None:
        return group in EVERY_STORE or not timeline_formats().isdisjoint(formats)
    return not needs.isdisjoint(formats)


def _declare_formats(con: duckdb.DuckDBPyConnection) -> None:
    """The TEMP table ``input_formats``: each declared input format and its kind."""
    from tracedoc.ingest.base import FORMATS  # here, not at the top: the ingest package imports the store

    con.execute("CREATE OR REPLACE TEMP TABLE input_formats (format VARCHAR, kind VARCHAR)")
    con.executemany("INSERT INTO input_formats VALUES (?, ?)", [(f.name, f.kind) for f in FORMATS])


def include(con: duckdb.DuckDBPyConnection, included: set[str], module: str,
            memory_bytes: int | None = None, skip: Collection[str] = frozenset()) -> None:
    """Run ``module`` (after its includes) on the connection, once: ``included`` holds the modules run on it;
    ``memory_bytes``, the connection's memory cap, is named in the error when DuckDB runs out of memory. The
    statements that create an object named in ``skip`` are left out (it is given already: a distributed run's
    summaries)."""
    if module in included:
        return
    if not included:
        _declare_formats(con)
    sql = module_file(module).read_text()
    for dep in _INCLUDE.findall(sql):
        include(con, included, dep, memory_bytes, skip)
    try:
        if not skip:
            con.execute(sql)
        for statement in duckdb.extract_statements(sql) if skip else ():
            if created_object(statement.query) not in skip:
                con.execute(statement.query)
    except duckdb.Error as exc:
        advice = out_of_memory_advice(memory_bytes) if isinstance(exc, duckdb.OutOfMemoryException) else ""
        raise TracedocError(f"analysis module {module} failed: {first_line(exc)}{advice}") from exc
    included.add(module)


def created_object(statement: str) -> str | None:
    """The object a CREATE statement makes (its name), else None."""
    m = _CREATES.match(statement)
    return m.group(1) if m else None
