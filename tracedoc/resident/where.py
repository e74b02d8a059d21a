"""Where this installation's resident process listens, told with the standard library's cheapest modules: the
command line asks it on every run, before it knows whether one runs."""

from __future__ import annotations

import os
import stat
import sys
import zlib
from pathlib import Path

ENV_SOCKET = "TRACEDOC_RESIDENT_SOCKET"  # the socket's path, instead of the one this installation gets
ENV_USE = "TRACEDOC_RESIDENT"  # '0': never hand a command to a resident process
COMMANDS = frozenset({"analyze", "diff"})  # what a resident process answers: the commands where start-up counts


def package_dir() -> str:
    """The folder tracedoc runs from: a resident process answers only commands of the same installation."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def socket_path() -> Path:
    """The socket of this installation's resident process (``$TRACEDOC_RESIDENT_SOCKET`` where set): in
    ``$XDG_RUNTIME_DIR``, else in a folder of the user's own under the temporary directory, named after the Python
    environment (``sys.prefix``) and the tracedoc it runs, so that two installations never answer each other's
    commands."""
    if given := os.environ.get(ENV_SOCKET):
        return Path(given)
    folder = os.environ.get("XDG_RUNTIME_DIR") or os.path.join(os.environ.get("TMPDIR") or "/tmp",
                                                                f"tracedoc-{os.getuid()}")
    install = zlib.crc32(f"{sys.prefix}\0{package_dir()}".encode())
    return Path(folder) / f"tracedoc-resident-{install:08x}.sock"


def private_folder(folder: Path) -> bool:
    """True when ``folder`` is this user's and no one else may enter it, and not a link: the socket in it is then the
    user's own (anyone else's process could otherwise stand in for it and be handed the caller's environment)."""
    try:
        info = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and info.st_mode & 0o077 == 0
