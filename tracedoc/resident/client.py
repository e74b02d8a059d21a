"""The command line's side of a resident process: hand it `tracedoc analyze` or `tracedoc diff` when one serves this
installation, and wait for its exit code. Ctrl-C and the other signals that end a command are passed on to the
process running it. Standard library only, imported before the command line."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING

from tracedoc.resident import where

if TYPE_CHECKING:
    import socket

INTERNAL_ERROR = 3  # tracedoc.cli.errors: an error nobody anticipated
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def wanted(argv: list[str]) -> bool:
    """True when ``argv`` (the arguments after `tracedoc`) runs a command a resident process answers, and the user
    has not turned resident processes off (``TRACEDOC_RESIDENT=0``)."""
    if os.environ.get(where.ENV_USE, "1") == "0" or sys.platform == "win32":
        return False
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    return command in where.COMMANDS


def run(argv: list[str]) -> int | None:
    """Run `tracedoc ARGV` on this installation's resident process and return its exit code; None where there is
    none, it is not this user's, or it refused (the command then runs here)."""
    if not wanted(argv):
        return None
    path = where.socket_path()
    if not path.exists() or not where.private_folder(path.parent):
        return None  # what every run asks where none runs: a stat or two, nothing imported
    import socket

    from tracedoc.resident import wire

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        if not wire.same_user(sock):
            return None
        return _handed(sock, argv)
    except OSError:
        return None
    finally:
        sock.close()


def _handed(sock: socket.socket, argv: list[str]) -> int | None:
    """Send the request, then pass signals on until the command's exit code comes back (None: refused)."""
    from tracedoc.resident import wire

    child: list[int] = []
    caught: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if child:
            os.kill(child[0], signum)
        else:
            caught.append(signum)

    before = {signum: signal.signal(signum, forward) for signum in _FORWARDED}
    try:
        wire.send(sock, request(argv), [0, 1, 2])
        started, _ = wire.receive(sock)
        if started is None or not isinstance(started.get("pid"), int):
            return None  # refused, or gone: run here
        child.append(started["pid"])
        for signum in caught:
            os.kill(child[0], signum)
        done, _ = wire.receive(sock)
        if done is None or not isinstance(done.get("exit"), int):
            sys.stderr.write("internal error: the resident process ended without an exit code "
                             "(stop it with `tracedoc resident stop`)\n")
            return INTERNAL_ERROR
        return int(done["exit"])
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def request(argv: list[str]) -> dict[str, object]:
    """What the command needs of this process: its arguments, folder, environment, umask, CPUs, resource limits
    (ulimit) and the encodings of its standard streams."""
    import resource  # here: Unix only, as resident processes are (``wanted``)

    umask = os.umask(0)
    os.umask(umask)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    streams = {name: [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
               for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))}
    from tracedoc.resident import wire

    return {"ask": "run", "protocol": wire.PROTOCOL, "executable": sys.executable, "package": where.package_dir(),
            "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask, "cpus": cpus,
            "limits": {name: resource.getrlimit(getattr(resource, name)) for name in wire.LIMITS
                       if hasattr(resource, name)},
            "streams": streams}
