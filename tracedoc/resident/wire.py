"""How the command line and a resident process talk: length-prefixed JSON messages over a Unix socket, the caller's
standard streams passed with the first one. Standard library only: the command line imports this once it found
the socket (``where``)."""

from __future__ import annotations

import json
import os
import socket
import struct
from typing import Any

PROTOCOL = 1
# The caller's resource limits (ulimit) a command runs under: its CPU time, memory, file sizes and open files.
LIMITS = ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_RSS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
MAX_MESSAGE = 16 << 20  # a request holds the arguments and the environment
_LENGTH = struct.Struct(">I")


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


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """The next message on ``sock`` and the descriptors passed with it; None when the other end closed first."""
    if max_fds:
        first, fds, _, _ = socket.recv_fds(sock, 1 << 16, max_fds)
    else:
        first, fds = sock.recv(1 << 16), []
    data = bytearray(first)
    try:
        while len(data) < _LENGTH.size or len(data) < _LENGTH.size + _LENGTH.unpack_from(data)[0]:
            if len(data) >= _LENGTH.size and _LENGTH.unpack_from(data)[0] > MAX_MESSAGE:
                return None, fds
            more = sock.recv(1 << 16)
            if not more:
                return None, fds
            data += more
        size = _LENGTH.unpack_from(data)[0]
        message = json.loads(data[_LENGTH.size:_LENGTH.size + size])
    except (ValueError, OSError):
        return None, fds
    return (message if isinstance(message, dict) else None), fds
