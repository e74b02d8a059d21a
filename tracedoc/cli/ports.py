"""The port `tracedoc serve` listens on, checked before anything is printed or loaded: a port another program holds
is one line and exit 2 when the user named it, and another, free port when they did not."""

from __future__ import annotations

import socket

from tracedoc.cli.errors import BadInput

DEFAULT_PORT = 5006


def _addresses(host: str, port: int) -> list[tuple]:
    """The addresses a server on ``host`` binds (every one the name resolves to, as Tornado binds them)."""
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BadInput(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    return list(dict.fromkeys((family, address) for family, _, _, _, address in infos))


def bind_error(host: str, port: int) -> OSError | None:
    """Why a server cannot listen on ``host``:``port`` now (None when it can): binds it the way Tornado does
    (SO_REUSEADDR, so a port in TIME_WAIT is free) and lets it go at once."""
    for family, address in _addresses(host, port):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(address)
            except OSError as exc:
                return exc
    return None


def listen_port(host: str, port: int | None) -> int:
    """The port to serve on: ``port`` when it is free (else BadInput); without one, DEFAULT_PORT, or a free port
    the system picks when DEFAULT_PORT is taken."""
    if port is not None:
        if (error := bind_error(host, port)) is not None:
            raise BadInput(f"--port {port}: cannot listen on {host}:{port} ({error.strerror or error}); "
                           "choose another port, or leave --port out to take a free one")
        return port
    if bind_error(host, DEFAULT_PORT) is None:
        return DEFAULT_PORT
    family, address = _addresses(host, 0)[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind(address)
        except OSError as exc:
            raise BadInput(f"--host {host}: cannot listen there ({exc.strerror or exc})") from None
        return int(s.getsockname()[1])
