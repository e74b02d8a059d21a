"""The command line's side of a resident process: hand it `tracedoc analyze` or `tracedoc diff` when one serves this
installation, and wait for its exit code. Ctrl-C and the other signals that end a command are passed on to the
process running it (the signals this process ignores, that one ignores too). Standard library only, imported
before the command line."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from tracedoc.resident import where

if TYPE_CHECKING:
    import socket

INTERNAL_ERROR = 3  # tracedoc.cli.errors: an error nobody anticipated
INTERRUPTED = 130
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_CONNECT_S = 2.0  # a resident process accepts at once: one that does not is stopped, or its machine is stalled
_STARTED_S = 30.0  # until it answers that the command started (or refused): it answers its callers one by one


def command_of(argv: list[str]) -> str | None:
    """The command ``argv`` (the arguments after `tracedoc`) runs: its first argument that is not an option."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def wanted(argv: list[str]) -> bool:
    """True when ``argv`` (the arguments after `tracedoc`) runs a command a resident process answers, and the user
    has not turned resident processes off (``TRACEDOC_RESIDENT=0``)."""
    if os.environ.get(where.ENV_USE, "1") == "0" or sys.platform == "win32":
        return False
    return command_of(argv) in where.COMMANDS


def run(argv: list[str]) -> int | None:
    """Run `tracedoc ARGV` on this installation's resident process and return its exit code; None where there is
    none, it is not this user's, or it did not start the command (which then runs here)."""
    if not wanted(argv) or not _standard_streams_open():
        return None
    path = where.socket_path()
    if not path.exists():
        return None  # what every run asks where none runs: a stat, nothing imported
    from tracedoc.resident import wire

    sock = wire.connect(path, _CONNECT_S)
    if sock is None:
        return None
    with sock:
        return Handed(sock).run(argv)


def _standard_streams_open() -> bool:
    """True when this process has its standard input, output and error: a closed one is run here, as a process of
    its own has it (the socket would otherwise take its number, and be handed over as that stream)."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


class _Stopped(Exception):
    """A signal that ends this process came before the command started."""


class Handed:
    """One command handed to the resident process on ``sock``: the signals that would end this process are passed
    to the one running the command, once it has started."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.child: int | None = None
        self.caught: list[int] = []  # before the command started, or passed on since

    def run(self, argv: list[str]) -> int | None:
        """Send the request and wait for the exit code (None: the command did not start there)."""
        from tracedoc.resident import wire

        handled = [signum for signum in _FORWARDED if signal.getsignal(signum) is not signal.SIG_IGN]
        before = {signum: signal.signal(signum, self._forward) for signum in handled}
        try:
            try:
                wire.send(self.sock, request(argv), [0, 1, 2])
                started, _ = wire.receive(self.sock, within_s=_STARTED_S)
            except (OSError, _Stopped):
                return self._not_started()
            if started is not None and isinstance(started.get("exit"), int):
                return int(started["exit"])  # it failed before the command started, and said so
            if started is None or not isinstance(started.get("pid"), int):
                return self._not_started()  # refused, or gone before starting it
            self.child = started["pid"]
            for signum in self.caught:
                self._kill(signum)
            done, _ = wire.receive(self.sock)
        finally:
            for signum, handler in before.items():
                signal.signal(signum, handler)
        if done is not None and isinstance(done.get("exit"), int):
            return int(done["exit"])
        ended_by = next((s for s in self.caught if s != signal.SIGINT), None)
        if ended_by is not None:  # ended by the signal passed on: end as a process of its own would
            signal.signal(ended_by, signal.SIG_DFL)
            os.kill(os.getpid(), ended_by)
        sys.stderr.write("internal error: the command ended on the resident process without an exit code (killed, "
                         "or out of memory?)\n")
        return INTERNAL_ERROR

    def _not_started(self) -> int | None:
        """Where the command did not start there: run it here, unless this process was told to stop meanwhile."""
        if not self.caught:
            return None
        if self.caught[0] == signal.SIGINT:
            sys.stderr.write("interrupted\n")
            return INTERRUPTED
        signal.signal(self.caught[0], signal.SIG_DFL)
        os.kill(os.getpid(), self.caught[0])
        return INTERRUPTED

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.caught.append(signum)
        if self.child is None:
            raise _Stopped  # before the command started: stop waiting for it (it will not start once we are gone)
        self._kill(signum)

    def _kill(self, signum: int) -> None:
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):  # it has just ended: its exit code is on the way
                os.kill(self.child, signum)


def request(argv: list[str]) -> dict[str, Any]:
    """What the command needs of this process: its arguments and program name, folder, environment, umask, CPUs,
    resource limits (ulimit), the signals it ignores and the encodings of its standard streams."""
    import resource  # here: Unix only, as resident processes are (``wanted``)

    from tracedoc.resident import wire

    umask = os.umask(0)
    os.umask(umask)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    streams = {name: [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
               for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))}
    return {"ask": "run", "protocol": wire.PROTOCOL, "prefix": sys.prefix, "package": where.package_dir(),
            "argv": argv, "prog": program_name(), "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask,
            "cpus": cpus, "limits": {name: resource.getrlimit(getattr(resource, name)) for name in wire.LIMITS
                                     if hasattr(resource, name)},
            "ignored": [int(s) for s in _FORWARDED if signal.getsignal(s) is signal.SIG_IGN], "streams": streams}


def program_name() -> str:
    """The command's name as click would give it in this process: `python -m tracedoc` or the script's name."""
    main = sys.modules.get("__main__")
    if getattr(main, "__package__", None):
        return "python -m tracedoc"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "tracedoc"
