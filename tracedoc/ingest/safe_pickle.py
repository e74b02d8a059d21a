"""Reading untrusted pickles (allocator snapshots, NCCL flight-recorder dumps) within bounds: what both readers
share.

- ``PICKLE_MAGIC``: the start of a pickle of protocol 2 to 5.
- ``env_limit``: a positive whole-number limit from an environment variable (``_`` between digits allowed, ASCII
  digits only: ``str.isdigit`` would take '²', which ``int`` refuses); a bad value is one line, exit 2.
- ``Budget``: counts the values a reader builds from one file; past its limit the file is refused in one line
  naming the variable that raises it.
- ``check_nesting``: refuses a value nested deeper than a limit, looking at each container once (keys and values),
  optionally spending a budget on their elements.
- ``load_plain``: ``pickle`` with every request for a class or function refused (``find_class``), so only dicts,
  lists, tuples, sets, strings, bytes and numbers can be built and nothing in the file runs; for small files read
  whole (flight-recorder dumps). Allocator snapshots, which run to gigabytes, go through the streaming opcode reader
  of ``snapshot_pickle`` instead, which refuses the same opcodes before they run.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from pathlib import Path
from typing import Any

from tracedoc.errors import InputError, first_line

PICKLE_MAGIC = re.compile(rb"\A\x80[\x02-\x05]")
_ASCII_DIGITS = re.compile(r"[0-9]{1,18}")


def env_limit(var: str, default: int) -> int:
    """A positive integer limit from the environment variable ``var``, else ``default``."""
    raw = os.environ.get(var, "").strip().replace("_", "")
    if not raw:
        return default
    if not _ASCII_DIGITS.fullmatch(raw) or int(raw) <= 0:
        raise InputError(f"{var}={os.environ[var][:40]!r} is not a positive whole number")
    return int(raw)


class Budget:
    """Counts the values a reader builds from one file; past ``limit`` the file is refused.

    ``what`` names the file ('the allocator snapshot'), ``counted`` says how shared values count, and ``var`` is
    the environment variable that raises the limit."""

    def __init__(self, path: Path, limit: int, var: str, what: str, counted: str) -> None:
        self.path, self.limit, self.var, self.what, self.counted = path, limit, var, what, counted
        self.left = limit

    def grow_to(self, limit: int) -> None:
        """Raise the limit to ``limit`` (a file read as it unpacks: its size known only as it comes)."""
        if limit > self.limit:
            self.left += limit - self.limit
            self.limit = limit

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise InputError(f"{self.path}: {self.what} would make the reader build over {self.limit:,} values "
                             f"({self.counted}; set {self.var} to read more)")


def check_nesting(value: Any, path: Path, max_depth: int, what: str, budget: Budget | None = None) -> None:
    """Refuse ``value`` nested deeper than ``max_depth`` as not ``what`` ('an allocator snapshot'); each container is
    looked at once, and with a ``budget`` its elements (a dict's keys and values) are spent from it."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen: set[int] = set()
    while stack:
        item, depth = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if depth > max_depth:
            raise InputError(f"{path}: nested more than {max_depth} levels deep: not {what}")
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        if budget is not None:
            budget.spend(len(children))
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple) and id(c) not in seen)


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only plain containers and scalars: every request for a class or function is refused."""

    def __init__(self, data: bytes, path: Path, what: str) -> None:
        super().__init__(io.BytesIO(data))
        self._path, self._what = path, what

    def find_class(self, module: str, name: str) -> Any:
        raise InputError(f"{self._path}: refused: the pickle asks for {module[:80]}.{name[:80]}, but {self._what} "
                         "holds only plain data (nothing in the file was run)")


def load_plain(raw: bytes, path: Path, what: str, kind: str) -> Any:
    """The plain data pickled in ``raw``; a pickle that asks for a class or function is refused, a truncated or
    corrupt one is 'truncated or corrupt ``kind``'; both one line."""
    try:
        return _PlainDataUnpickler(raw, path, what).load()
    except InputError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            MemoryError, RecursionError, UnicodeDecodeError, OverflowError) as exc:
        raise InputError(f"{path}: truncated or corrupt {kind} ({first_line(exc)[:120]})") from None
