"""What a file's first bytes say it starts with (tracedoc.formats.CONTENTS), before any reader is asked.

Ingest offers a file only to the readers of formats whose ``content`` holds its own (``content_of``), so that
telling an allocator snapshot's format imports no SQLite, Parquet or CSV reader. The tests are those the readers'
own sniffs begin with: a JSON object or array after whitespace, a pickle's protocol opcode, SQLite's and Parquet's
magic bytes; anything else is OTHER_BYTES (an ncu CSV export, an Nsight Compute or Nsight Systems report).
"""

from __future__ import annotations

from tracedoc.formats import JSON, OTHER_BYTES, PARQUET, PICKLE, SQLITE
from tracedoc.ingest.nsys import SQLITE_MAGIC
from tracedoc.ingest.safe_pickle import PICKLE_MAGIC

PARQUET_MAGIC = b"PAR1"  # a Parquet file's first (and last) bytes


def content_of(head: bytes) -> str:
    """The content (one of CONTENTS) of a file whose first bytes, unpacked, are ``head``."""
    if head.lstrip()[:1] in (b"{", b"["):
        return JSON
    if PICKLE_MAGIC.match(head):
        return PICKLE
    if head.startswith(SQLITE_MAGIC):
        return SQLITE
    if head.startswith(PARQUET_MAGIC):
        return PARQUET
    return OTHER_BYTES
