"""The resident process: tracedoc imported and its files read once, then a fork per command handed to it.

Forking is what makes it safe to keep one process: each command runs in a child of its own, with the caller's
streams, folder, environment, umask, CPUs, limits and ignored signals, and ends as a process of its own would (its
exit handlers run, its memory goes back); nothing a command does stays for the next one. The parent holds one
thread when it forks (it refuses to serve otherwise: a fork copies only the thread that calls it) and runs no
analysis itself.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import locale
import os
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from tracedoc import interrupts
from tracedoc.errors import TracedocError
from tracedoc.resident import where, wire

INTERNAL_ERROR = 3
INTERRUPTED = 130
_REQUEST_S = 2.0  # how long a connection may take to send its whole request
# Imported before serving: what `analyze` and `diff` import on their way (the command line, the store, the
# analyses' modules, the renderers of text, JSON and Markdown with Rich). The HTML report's charts (Bokeh) and
# the dashboard are not: an HTML report imports 566 modules more, and leaves a thread running, which a process that
# forks must not hold.
_WARM_MODULES = (
    "tracedoc.cli", "tracedoc.cli.analyze", "tracedoc.cli.diff", "tracedoc.pipeline", "tracedoc.store.modules",
    "tracedoc.store.pool", "tracedoc.ingest.chrome.chrome_trace", "tracedoc.render.text",
    "tracedoc.render.jsonrender", "tracedoc.render.markdown", "tracedoc.cli.terminal", "rich.console",
    "statistics", "decimal",
)


def warm() -> None:
    """Import and read now what a command would on each run: the modules above and what every analysis reads
    (tracedoc.warm), and the digest of tracedoc's code (a changed installation is told by it); and make the empty
    store in memory that the command's store starts from (``store.premake``)."""
    from tracedoc import warm as ahead
    from tracedoc.report_cache import code_digest
    from tracedoc.store import store

    ahead.warm(_WARM_MODULES)
    code_digest()
    store.premake()


def threads() -> int:
    """The threads of this process, the operating system's own count where it tells (Python's otherwise)."""
    with contextlib.suppress(OSError):
        return len(os.listdir("/proc/self/task"))
    return threading.active_count()


class Server:
    """Answers commands on ``path`` until stopped, or idle for ``idle_s`` seconds."""

    def __init__(self, path: Path, idle_s: float, say: Callable[[str], None]) -> None:
        from tracedoc.report_cache import code_digest

        self.path = path.absolute()
        self.idle_s = idle_s
        self.say = say
        self.digest = code_digest()
        self.started = time.time()
        self.answered = 0
        self.owner = os.getpid()
        self.inode = 0  # the socket's, once bound
        self._listener: socket.socket | None = None  # made by ``_listen``, which serving starts with
        self._lock = -1  # the lock file held while serving: one server at a time at ``path``

    def serve(self) -> None:
        """Listen, and answer each connection in turn; the socket is removed when the server stops."""
        listener = self._listener = self._listen()
        os.chdir("/")  # hold no caller's folder: each command takes its caller's
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children are reaped by the system
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGHUP, _stop)
        gc.collect()
        gc.freeze()  # what was loaded stays shared with the children, not copied by their collector
        self.say(f"resident process {os.getpid()} serving {self.path}")
        try:
            while True:
                listener.settimeout(self.idle_s)
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    self.say(f"idle for {self.idle_s / 60:g} minutes: stopped")
                    return
                with conn:
                    try:
                        if not self._answer(conn):
                            return
                    except Exception as exc:  # noqa: BLE001 - one caller's failure is not the next one's
                        self.say(f"a connection failed: {type(exc).__name__}: {exc}")
        finally:
            if os.getpid() == self.owner:
                listener.close()
                os.close(self._lock)
                with contextlib.suppress(OSError):
                    if self.path.stat().st_ino == self.inode:  # not the socket of a server started since
                        self.path.unlink()

    def _listen(self) -> socket.socket:
        """The listening socket at ``path``, in a folder of this user's alone, with the lock beside it held: refused
        where another server holds it."""
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not where.private_folder(folder):
            raise TracedocError(f"{folder}: the resident process's folder must be this user's alone (mode 700)")
        self._lock = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock)
            raise TracedocError(f"a resident process already serves {self.path}") from None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by a server that was killed (a running one holds the lock)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            self.inode = self.path.stat().st_ino
            listener.listen(64)
        except BaseException:
            listener.close()
            os.close(self._lock)
            raise
        return listener

    def _answer(self, conn: socket.socket) -> bool:
        """Answer one connection; False once the server is to stop."""
        if not wire.same_user(conn):
            return True
        message, fds = wire.receive(conn, max_fds=3, within_s=_REQUEST_S)  # one at a time: each caller briefly
        try:
            ask = message.get("ask") if message else None
            if ask == "status":
                wire.send(conn, self.status())
                return True
            if ask == "stop":
                wire.send(conn, {"stopping": os.getpid()})
                self.say("stopped on request")
                return False
            if ask != "run" or message is None or len(fds) != 3:
                return True
            if (refused := self.refusal(message)) is not None:
                wire.send(conn, {"refused": refused})
                self.say(f"refused a command: {refused}")
                return not refused.endswith("it stops")
            if _hung_up(conn):
                return True  # the caller went away (it gave up waiting): nothing to run for it
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                assert self._listener is not None  # answering means serving
                self._listener.close()  # the child never answers callers: a killed server's socket then refuses
                os.close(self._lock)
                run_child(conn, message, fds)
            self.answered += 1
            return True
        finally:
            for fd in fds:
                os.close(fd)

    def refusal(self, message: dict[str, Any]) -> str | None:
        """Why this server does not run the command ``message`` asks for (None: it does)."""
        from tracedoc.report_cache import code_digest

        if message.get("protocol") != wire.PROTOCOL:
            return "another version of tracedoc asked"
        if message.get("prefix") != sys.prefix or message.get("package") != where.package_dir():
            return "another installation asked"
        if code_digest.__wrapped__() != self.digest:
            return "tracedoc's code changed since the resident process started: it stops"
        if (count := threads()) != 1:
            return f"the resident process holds {count} threads, and cannot fork safely: it stops"
        return None

    def status(self) -> dict[str, Any]:
        """What `tracedoc resident status` shows."""
        from tracedoc.version import __version__

        return {"server": os.getpid(), "since": self.started, "answered": self.answered,
                "idle_minutes": self.idle_s / 60, "version": __version__, "package": where.package_dir()}


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def run_child(conn: socket.socket, message: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked child: become the caller's process, run its command, hand back the exit code, and end. Where
    the caller goes away first (killed), the command ends with it, as it would in the caller's own process."""
    code = INTERNAL_ERROR
    try:
        conn.settimeout(None)
        take_over(message, fds)
        wire.send(conn, {"pid": os.getpid()})
        threading.Thread(target=_end_with_caller, args=(conn,), daemon=True).start()
        code = run_command([str(arg) for arg in message["argv"]], str(message.get("prog") or "tracedoc"))
    except KeyboardInterrupt:  # Ctrl-C passed on before the command line took it over
        code = INTERRUPTED
        with contextlib.suppress(BaseException):
            sys.stderr.write("interrupted\n")
    except BaseException as exc:  # noqa: BLE001 - the child must hand back a code whatever happened
        with contextlib.suppress(BaseException):
            sys.stderr.write(f"internal error in the resident process: {type(exc).__name__}: {exc}\n")
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # as the end of a process of its own: temporary folders go, files close
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(BaseException):
            wire.send(conn, {"exit": code})
        os._exit(code)


def _end_with_caller(conn: socket.socket) -> None:
    """Wait until the caller closes its end (it sends nothing more), then end this process: a caller that was
    killed leaves no command running on its behalf (the work folders it leaves are swept by the next run)."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    os.kill(os.getpid(), signal.SIGKILL)


def _hung_up(conn: socket.socket) -> bool:
    """True when the caller has closed its end of ``conn`` (it sends nothing after its request)."""
    conn.setblocking(False)
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        conn.setblocking(True)


def take_over(message: dict[str, Any], fds: list[int]) -> None:
    """Take the caller's standard streams (``fds``), folder, environment, umask, CPUs, resource limits and
    arguments."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, interrupts.handler)  # as tracedoc.console sets it
    for signum in message.get("ignored") or ():  # as the caller's: `nohup`, a background job without Ctrl-C
        if signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in message["env"].items()})
    time.tzset()  # the caller's TZ, and its locale's character type, as a process started with them reads them
    with contextlib.suppress(locale.Error):
        locale.setlocale(locale.LC_CTYPE, "")
    os.umask(int(message["umask"]))
    if message.get("cpus") and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(0, message["cpus"])
    for name, (soft, hard) in (message.get("limits") or {}).items():
        if name in wire.LIMITS and hasattr(resource, name):
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(getattr(resource, name), (soft, hard))
    streams = message.get("streams") or {}
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = _stream(0, "r", streams.get("stdin"), False)
    sys.stdout = _stream(1, "w", streams.get("stdout"), unbuffered or os.isatty(1))
    sys.stderr = _stream(2, "w", streams.get("stderr"), True)
    sys.argv = [str(message.get("prog") or "tracedoc"), *message["argv"]]


def _stream(fd: int, mode: str, encoding: list[str | None] | None, line: bool) -> Any:
    """A text stream on ``fd`` as Python opens its standard ones: the caller's encoding and error handling, line
    buffered where ``line``."""
    name, errors = encoding if encoding else (None, None)
    return open(fd, mode, buffering=1 if line and "w" in mode else -1, encoding=name or "utf-8",  # noqa: SIM115
                errors=errors or "strict", newline="\n", closefd=False)


def run_command(argv: list[str], prog: str) -> int:
    """`tracedoc ARGV` as ``tracedoc.console`` runs it (``prog``: the name the caller was run by); its exit code."""
    from tracedoc.cli import cli

    try:
        cli(args=argv, prog_name=prog)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        sys.stderr.write(f"{exc.code}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return INTERRUPTED
    return 0


def serve(path: Path, idle_minutes: float, say: Callable[[str], None]) -> None:
    """Warm up, check that one thread remains, and serve on ``path`` until stopped or idle."""
    warm()
    if (count := threads()) != 1:
        raise TracedocError(f"the resident process holds {count} threads after importing tracedoc: it cannot fork "
                            "safely")
    Server(path, idle_minutes * 60, say).serve()
