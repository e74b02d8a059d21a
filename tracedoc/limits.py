"""The limits of one run, as a value: the memory DuckDB may hold and the bytes a compressed input (or standard
input) may unpack to.

They travel with the call (``api.analyze(limits=...)``) into every store and reader of the run, and into the
tasks a distributed run sends to its workers, local or remote. The environment variables that set them
(``TRACEDOC_MEMORY_LIMIT``, ``TRACEDOC_MAX_INFLATE_BYTES``) are read here alone, by ``Limits.from_env``, at the
edge: the command line and the API's entry points when no limits are given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from tracedoc.errors import TracedocError
from tracedoc.units import parse_size

MEMORY_LIMIT_ENV_VAR = "TRACEDOC_MEMORY_LIMIT"
MAX_INFLATE_ENV_VAR = "TRACEDOC_MAX_INFLATE_BYTES"


@dataclass(frozen=True)
class Limits:
    """``memory_bytes``: DuckDB's memory cap for a store and its analyses (None: DuckDB's default, 80 % of RAM);
    beyond it DuckDB spills to disk. ``max_inflate_bytes``: the most bytes a compressed input or standard input
    may unpack to (None: a multiple of the compressed size; tracedoc.ingest.compressed)."""

    memory_bytes: int | None = None
    max_inflate_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "max_inflate_bytes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise TracedocError(f"{name} must be a positive byte count, not {value}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, memory_bytes: int | None = None,
                 max_inflate_bytes: int | None = None) -> Limits:
        """The limits the environment sets ($TRACEDOC_MEMORY_LIMIT, $TRACEDOC_MAX_INFLATE_BYTES, e.g. 2G), where
        they are not given here (the command line's options: a value given wins, and its variable is not read); a
        value that is not a byte count is a TracedocError naming the variable."""
        env = os.environ if environ is None else environ
        return cls(memory_bytes=memory_bytes if memory_bytes is not None else _size(env, MEMORY_LIMIT_ENV_VAR),
                   max_inflate_bytes=(max_inflate_bytes if max_inflate_bytes is not None
                                      else _size(env, MAX_INFLATE_ENV_VAR)))


def _size(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "").strip()
    return parse_size(text, name) if text else None
