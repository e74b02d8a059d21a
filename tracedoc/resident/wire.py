"""How the command line and a resident process talk: length-prefixed JSON messages over a Unix socket, the caller's
standard streams passed with the first one. Standard library only: the command line imports this once it found
the socket (``where``)."""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

from tracedoc.resident import where

PROTOCOL = 1
# The caller's resource limits (ulimit) a command runs under: its CPU time, memory, file sizes and open files.
LIMITS = ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_RSS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
MAX_MESSAGE = 16 << 20  # a request holds the arguments and the environment
_LENGTH = struct.Struct(">I")


def connect(path: Path, timeout_s: float) -> socket.socket | None:
    """A connection to the resident process at ``path``; None where none answers there, or where it may not be this
    user's: its folder not private (``where.private_folder``), or the process at the other end another user's."""
    if not where.private_folder(path.parent):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        if same_user(sock):
            return sock
    except OSError:
        pass
    sock.close()
    return None


def same_user(sock: socket.socket) -> bool:
    """True when the process at the other end of ``sock`` runs as this user (Linux says so; elsewhere the private
    folder is the check)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return bool(uid == os.getuid())


def encode(message: dict[str, Any]) -> bytes:
    """One message: its length, then its JSON."""
    body = json.dumps(message).encode()
    return _LENGTH.pack(len(body)) + body


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send ``message`` on ``sock``, with the file descriptors ``fds`` passed along."""
    data = encode(message)
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    sock.sendall(data)


def receive(sock: socket.socket, max_fds: int = 0, within_s: float | None = None
            ) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message on ``sock`` and the descriptors passed with it (read exactly: a message after it stays for
    the next call); None when the other end closed first, sent something else, or not all of it ``within_s``."""
    deadline = None if within_s is None else time.monotonic() + within_s
    fds: list[int] = []
    try:
        head = bytearray()
        if max_fds:
            sock.settimeout(within_s)
            first, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, max_fds)
            head += first
        head += _exactly(sock, _LENGTH.size - len(head), deadline)
        size = _LENGTH.unpack_from(head)[0]
        if size > MAX_MESSAGE:
            return None, fds
        message = json.loads(_exactly(sock, size, deadline))
    except (ValueError, RecursionError, OSError, EOFError):  # RecursionError: JSON nested beyond Python's stack
        return None, fds
    return (message if isinstance(message, dict) else None), fds


def _exactly(sock: socket.socket, count: int, deadline: float | None) -> bytes:
    """``count`` bytes from ``sock``, by ``deadline`` (time.monotonic; None: however long it takes)."""
    data = bytearray()
    while len(data) < count:
        sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
        more = sock.recv(count - len(data))
        if not more:
            raise EOFError
        data += more
    return bytes(data)
