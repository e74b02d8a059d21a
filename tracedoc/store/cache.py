"""Content-keyed store cache: the same input bytes are ingested once.

A store is built under a temporary name and renamed into place only after ingestion completed, so an
interrupted or failed ingest never leaves a file that a later run would take as complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from tracedoc import __version__
from tracedoc.store.store import SCHEMA_VERSION, Store, schema_files


def default_cache_dir() -> Path:
    """``$TRACEDOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracedoc``, else ``~/.cache/tracedoc``."""
    if env := os.environ.get("TRACEDOC_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tracedoc"


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (the fastest full-content hash here: about 1.4 GB/s with CPU SHA extensions)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:32]


def content_key(digests: Sequence[str]) -> str:
    """The cache key of an input set: its files' digests, the store schema (its text) and tracedoc's version."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"schema={SCHEMA_VERSION};tracedoc={__version__}".encode())
    for schema in schema_files():
        h.update(schema.read_bytes())
    for d in digests:
        h.update(d.encode())
    return h.hexdigest()


def open_cached_store(key: str, cache_dir: Path, build: Callable[[Store], None]) -> tuple[Store, bool]:
    """Open the complete store for ``key``, building it with ``build`` first when absent.

    Returns the store (opened read-only) and whether it came from the cache.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / f"{key}.duckdb"
    if final.exists():
        store = Store.open(final)
        if store.is_complete():
            return store, True
        store.close()
        final.unlink()
    partial = cache_dir / f"{key}.partial-{os.getpid()}.duckdb"
    try:
        store = Store.create(partial)
        try:
            build(store)
            store.mark_complete()
            store.con.execute("CHECKPOINT")
        finally:
            store.close()
        os.replace(partial, final)
    finally:
        for leftover in (partial, partial.with_name(partial.name + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return Store.open(final), False
