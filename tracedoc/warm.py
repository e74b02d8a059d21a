"""What a command imports and reads on its way, done ahead of the step that needs it: all of it once by a resident
process before it forks (tracedoc.resident), and, in ``tracedoc analyze`` run by itself, the imports on a helper
thread while DuckDB reads a trace, and without the cache the empty store made on another while the command line
imports (``store_ahead``).

DuckDB reads a small PyTorch trace on one thread with Python's GIL let go, so one of two cores sits idle for most
of the ingest: the imports the command makes after it (the analyses' machinery, the report's renderer with Rich)
then cost it no time of their own. Reading the rules and the analysis modules' files there too gained the 0.6 MB
decode-eager sample a further 1 % but cost an Nsight Systems export 3 %, whose ingest holds the GIL more: a
command reads them itself. An import done ahead is not done again.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterable

from tracedoc.render.base import RENDERERS
from tracedoc.resident.client import command_of

# What every analysis imports once its store is made (the pool of cursors, the analysis modules' loader, the
# statistics of the what-if projection).
ANALYSIS_IMPORTS = ("tracedoc.store.modules", "tracedoc.store.pool", "statistics")


def import_all(modules: Iterable[str]) -> None:
    """Import each of ``modules``."""
    for name in modules:
        importlib.import_module(name)


def warm(modules: Iterable[str]) -> None:
    """Import ``modules``, and read what every analysis reads: the built-in rules, each analysis module's file,
    its facts and its statements as a store of any size runs them."""
    from tracedoc.judge.rule import load_rules
    from tracedoc.store import modules as analysis_modules

    import_all(modules)
    load_rules()
    for module in analysis_modules.all_modules():
        analysis_modules.facts(module)
        for as_tables in (False, True):
            analysis_modules.module_sql(module, as_tables, shared=True)


# Options of `analyze` under which no store in memory is made here: the help, or ranks analysed by workers.
_NO_STORE_HERE = frozenset({"--help", "-h", "--workers", "--dask-scheduler", "--dask-scheduler-file"})


def store_ahead(argv: list[str]) -> Callable[[], None]:
    """Start making the empty store in memory on a helper thread (``store.premake_aside``) when ``argv`` (the
    arguments after `tracedoc`) analyses here without the cache, which makes such a store (unless its input is a
    saved report): DuckDB then starts while the command line imports. Not otherwise: a run that reads a kept report
    back makes no store, and making one would cost it a fifth of its time. Returns the wait for that store to be made
    (``store.wait_aside``; nothing to wait for where none was started): a command's last step."""
    options = {arg.partition("=")[0] for arg in argv if arg.startswith("-")}
    if command_of(argv) != "analyze" or "--no-cache" not in options or options & _NO_STORE_HERE:
        return lambda: None
    from tracedoc.store import store

    store.premake_aside()
    return store.wait_aside


def on_first_step(step: Callable[[str], None], fmt: str) -> Callable[[str], None]:
    """``step`` (a command's progress), which at its first message (a trace about to be read, or a cached store
    about to be analysed) starts importing, on a helper thread, what the analysis and a report written as ``fmt``
    import."""
    started = False

    def first(message: str) -> None:
        nonlocal started
        if not started:
            started = True
            renderer = (RENDERERS.module(fmt),) if fmt in RENDERERS else ()  # the text renderer's brings Rich
            threading.Thread(target=_quietly, args=((*ANALYSIS_IMPORTS, *renderer),), name="tracedoc-warm",
                             daemon=True).start()
        step(message)

    return first


def _quietly(modules: tuple[str, ...]) -> None:
    """``import_all``, its errors left for the step that needs what failed to meet and report (no thread's
    traceback on standard error)."""
    with contextlib.suppress(Exception):  # the command imports the same itself, reporting what fails
        import_all(modules)
