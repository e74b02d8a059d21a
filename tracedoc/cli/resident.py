"""`tracedoc resident`: keep a process that answers `tracedoc analyze` and `tracedoc diff` without Python's start-up
and tracedoc's imports on every command (tracedoc.resident)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.cli.options import FiniteFloatRange
from tracedoc.resident import client, where, wire

_START_WAIT_S = 60.0
_ASK_S = 10.0  # for the resident process's answer to status or stop
_IDLE_HELP = "Stop after this many minutes without a command."


@click.group("resident")
def resident_command() -> None:
    """A resident process for this installation: `tracedoc analyze` and `tracedoc diff` are then run by a fork of
    a process that has tracedoc imported already, instead of a new Python process each time (a small trace's
    answer about a sixth sooner). Each command still runs as a process of its own, with your folder, environment
    and streams; where none is running, or it was started before tracedoc's code changed, commands run as
    always. TRACEDOC_RESIDENT=0 keeps a command off it.

    Example:

        tracedoc resident start

        tracedoc resident status

        tracedoc resident stop
    """


@resident_command.command("start")
@click.option("--idle-minutes", type=FiniteFloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help=_IDLE_HELP)
@one_line_errors
def start_command(idle_minutes: float) -> None:
    """Start the resident process in the background (nothing to do where one runs already); what it says goes to
    a log beside its socket.

    Example:

        tracedoc resident start --idle-minutes 240
    """
    path = socket_path()
    if (running := ask(path, "status")) is not None:
        click.echo(f"resident process {running['server']} serves {path} already")
        return
    log = path.with_name(path.name + ".log")  # what the process says: started, refused, stopped
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not where.private_folder(path.parent):
        raise BadInput(f"{path.parent}: the resident process's folder must be this user's alone (mode 700)")
    with open(log, "ab") as said:
        start = said.tell()
        process = subprocess.Popen(
            [sys.executable, "-m", "tracedoc", "resident", "run", "--idle-minutes", str(idle_minutes)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=said, start_new_session=True)
    deadline = time.monotonic() + _START_WAIT_S
    while (running := ask(path, "status")) is None:
        if process.poll() is not None:
            lines = log.read_bytes()[start:].decode(errors="replace").strip().splitlines()
            raise BadInput(f"the resident process did not start: {lines[-1] if lines else 'no reason given'}")
        if time.monotonic() > deadline:
            process.terminate()
            raise BadInput(f"the resident process did not answer within {_START_WAIT_S:g} s (its log: {log})")
        time.sleep(0.05)
    click.echo(f"resident process {running['server']} serving {path}")


@resident_command.command("run")
@click.option("--idle-minutes", type=FiniteFloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help=_IDLE_HELP)
@one_line_errors
def run_command(idle_minutes: float) -> None:
    """Run the resident process here, in the foreground, until Ctrl-C, `tracedoc resident stop` or the idle time
    (for a service manager; `start` runs this in the background).

    Example:

        tracedoc resident run
    """
    from tracedoc.resident.server import serve

    serve(socket_path(), idle_minutes, lambda line: click.echo(line, err=True))


@resident_command.command("status")
@one_line_errors
def status_command() -> None:
    """Say whether a resident process serves this installation: its process id, since when, and how many commands
    it answered (exit code 0 either way).

    Example:

        tracedoc resident status
    """
    path = socket_path()
    running = ask(path, "status")
    if running is None:
        click.echo(f"no resident process serves {path}")
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(running["since"]))
    off = f" ({where.ENV_USE}=0: commands in this environment do not use it)" if not client.wanted(["analyze"]) else ""
    click.echo(f"resident process {running['server']} serving {path} since {since}: {running['answered']} "
               f"commands answered, stops after {running['idle_minutes']:g} idle minutes{off}")


@resident_command.command("stop")
@one_line_errors
def stop_command() -> None:
    """Stop the resident process (commands then run as processes of their own again).

    Example:

        tracedoc resident stop
    """
    path = socket_path()
    stopped = ask(path, "stop")
    click.echo(f"resident process {stopped['stopping']} stopped" if stopped else f"no resident process serves {path}")


def socket_path() -> Path:
    """This installation's socket; refused where there are no Unix sockets to pass standard streams over."""
    if sys.platform == "win32":
        raise BadInput("a resident process needs Unix sockets: not on Windows")
    return where.socket_path()


def ask(path: Path, what: str) -> dict[str, Any] | None:
    """The resident process's answer to ``what`` ('status', 'stop'); None where none answers at ``path`` (or one
    that is not this user's)."""
    sock = wire.connect(path, _ASK_S)
    if sock is None:
        return None
    with sock:
        try:
            wire.send(sock, {"ask": what})
        except OSError:
            return None
        return wire.receive(sock)[0]
