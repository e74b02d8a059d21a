"""The `tracedoc` command's entry point: Ctrl-C is one line and exit code 130 from the start, imports included.

The command line imports click, DuckDB, Arrow and Rich before it can catch anything (about half a second), and a
SIGINT in that time would end in a KeyboardInterrupt traceback. So this module, which imports nothing heavy,
answers SIGINT itself until the command line is imported (one line, exit 130, nothing to clean up yet); from then
on the command line's own handling applies (``tracedoc.cli.errors``).

When the command is done, the objects left are frozen out of Python's cyclic garbage collector (``gc.freeze``):
the interpreter's shutdown then frees them by their reference counts alone instead of searching them all for
cycles first, which took about 25 ms of every run's CPU (a third of the time left once a cached report is read
back). Exit handlers, files and connections still close as before; only objects in reference cycles, which Python
never promises to finalize at exit, are left to the operating system.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from types import FrameType

INTERRUPTED = 130


def _interrupted_while_starting(signum: int, frame: FrameType | None) -> None:
    """SIGINT before the command line is ready: say so and leave at once (nothing is open or written yet)."""
    os.write(2, b"interrupted\n")
    os._exit(INTERRUPTED)


def main() -> None:
    """Hand the command to this installation's resident process where one runs (tracedoc.resident), else import
    and run the command line here (an analysis without the cache having its store made meanwhile on a helper
    thread: ``warm.store_ahead``); Ctrl-C being 'interrupted' and exit 130 at any point."""
    guarded = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not when SIGINT is ignored
    if guarded:
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    from tracedoc import interrupts
    from tracedoc.resident import client

    if (code := client.run(sys.argv[1:])) is not None:
        sys.exit(code)
    from tracedoc.warm import store_ahead

    wait_for_store = store_ahead(sys.argv[1:])
    try:
        from tracedoc.cli import cli
    finally:
        if guarded:
            signal.signal(signal.SIGINT, interrupts.handler)
    try:
        cli()
    except KeyboardInterrupt:  # between the handlers: before the command line's own try
        sys.stderr.write("interrupted\n")
        sys.exit(INTERRUPTED)
    finally:
        wait_for_store()  # the store made aside, if not taken: the interpreter's exit waits too, but Ctrl-C cuts that
        gc.freeze()  # the process ends here (click exits even when the command returns): see the module's note
