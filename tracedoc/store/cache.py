"""Content-keyed store cache: the same input bytes are ingested once.

A store is built under a temporary name (``KEY.partial-PID.duckdb``), flushed to disk and renamed into place only
after ingestion completed, so an interrupted or failed ingest never leaves a file that a later run would take as
complete. What a killed run leaves behind (its partial store, the store's WAL and spill folder, its
``tracedoc-ingest-*`` work folder) is removed by the next run once its process is gone. A cached store damaged
from outside (truncated, overwritten) is noticed when opening or reading it fails, and rebuilt.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import xxhash

from tracedoc.errors import error_chain, first_line
from tracedoc.limits import Limits
from tracedoc.store.store import SCHEMA_VERSION, Store, reader_files, schema_files
from tracedoc.version import __version__

# KEY.partial-PID.duckdb, with DuckDB's write-ahead log (.wal) and spill folder (.tmp) beside it.
_PARTIAL = re.compile(r"^(?P<key>.+)\.partial-(?P<pid>\d+)\.duckdb(?:\.wal|\.tmp)?$")
# The work folder an ingest makes beside its store (tracedoc.ingest.load_all).
_INGEST_FOLDER = "tracedoc-ingest-"
# An ingest folder is only swept when this old (seconds since its last change) and no ingest is running here.
STALE_INGEST_S = 3600.0
# Errors (DuckDB's classes, by name) that mean the store file itself is unreadable (with DuckDB's own messages for a
# failed block checksum).
_DAMAGE_ERRORS = ("IOException", "SerializationException")
_HASH_CHUNK = 1 << 20
_DAMAGE_TEXT = ("Corrupt database file", "checksum")


def default_cache_dir() -> Path:
    """``$TRACEDOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracedoc``, else ``~/.cache/tracedoc``."""
    if env := os.environ.get("TRACEDOC_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tracedoc"


def store_location(cache_dir: Path | str | None, use_cache: bool = True) -> Path | None:
    """Where the store of a run goes: ``cache_dir`` (the default cache when None), or None without the cache (a store
    in memory, for this run only)."""
    if not use_cache:
        return None
    return Path(cache_dir) if cache_dir else default_cache_dir()


def file_digest(path: Path) -> str:
    """The file's size and the XXH3-128 hash of its bytes: a content key, not a security check (nothing is trusted
    because of it); about 4 times SHA-256's speed here."""
    digest = xxhash.xxh3_128()
    size = 0
    buffer = memoryview(bytearray(_HASH_CHUNK))
    with path.open("rb") as f:
        while n := f.readinto(buffer):
            digest.update(buffer[:n])
            size += n
    return f"{size}-{digest.hexdigest()}"


def content_key(digests: Sequence[str]) -> str:
    """The cache key of an input set: its files' digests, tracedoc's version and what builds a store from them (the
    schema's text and the readers' code: a store made before a reader learned a table is not reused)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"schema={SCHEMA_VERSION};tracedoc={__version__};ingest={ingest_digest()}".encode())
    for d in digests:
        h.update(d.encode())
    return h.hexdigest()


@functools.cache
def ingest_digest() -> str:
    """A digest of the store's schema files and the readers' modules (tracedoc.ingest), once per process."""
    h = hashlib.blake2b(digest_size=16)
    for schema in schema_files():
        h.update(schema.read_bytes())
    for name, file in reader_files():
        h.update(name.encode() + b"\0" + file.read_bytes())
    return h.hexdigest()


def reports_folder(store_path: Path) -> Path:
    """The folder of the reports kept for the store at ``store_path`` (``KEY.duckdb`` → ``KEY.reports``,
    tracedoc.report_cache): removed with the store."""
    return store_path.with_suffix(".reports")


def memory_store(build: Callable[[Store], None], limits: Limits = Limits()) -> Store:
    """A store in memory under ``limits``, built with ``build``: for one analysis that keeps nothing (no file, no
    flush)."""
    store = Store.create(None, limits)
    try:
        build(store)
        store.mark_complete()
    except BaseException:
        store.close()
        raise
    return store


def open_cached_store(key: str, cache_dir: Path, build: Callable[[Store], None],
                      limits: Limits = Limits()) -> tuple[Store, bool]:
    """Open the complete store for ``key`` under ``limits``, building it with ``build`` first when absent,
    incomplete or damaged.

    Returns the store (opened read-only) and whether it came from the cache. Sweeps what killed runs left first.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(cache_dir)
    final = cache_dir / f"{key}.duckdb"
    if final.exists() and (store := _open_complete(final, limits)) is not None:
        with contextlib.suppress(OSError):
            os.utime(final)  # its age in `tracedoc cache list` counts from the last use
        return store, True
    partial = cache_dir / f"{key}.partial-{os.getpid()}.duckdb"
    try:
        store = Store.create(partial, limits)
        try:
            build(store)
            store.mark_complete()
            store.con.execute("CHECKPOINT")
        finally:
            store.close()
        _fsync(partial)
        os.replace(partial, final)
        _fsync(cache_dir)
    finally:
        _remove_partial(partial)
    return Store.open(final, limits), False


def _open_complete(path: Path, limits: Limits) -> Store | None:
    """The store at ``path`` when it is complete and readable; otherwise remove it (saying so when damaged). Any
    other error (one of the connection, not of the file) is raised and leaves the store in the cache."""
    from tracedoc.store.engine import duckdb

    try:
        store = Store.open(path, limits)
    except duckdb.Error as exc:
        if not is_damage(exc, path):
            raise
        discard_damaged(path, exc)
        return None
    try:
        complete = store.is_complete()
    except duckdb.Error as exc:
        store.close()
        if not is_damage(exc, path):
            raise
        discard_damaged(path, exc)
        return None
    if complete:
        return store
    store.close()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return None


def is_damage(exc: BaseException, path: Path) -> bool:
    """True when ``exc`` (or an error it was raised from) says the store file at ``path`` cannot be read."""
    from tracedoc.store.engine import duckdb

    damage = tuple(getattr(duckdb, name) for name in _DAMAGE_ERRORS)
    return any(isinstance(e, duckdb.Error) and (isinstance(e, damage) or str(path) in str(e)
                                                  or any(t in str(e) for t in _DAMAGE_TEXT))
               for e in error_chain(exc))


def discard_damaged(path: Path, exc: BaseException) -> None:
    """Remove a damaged cached store, saying so in one line on stderr; the caller rebuilds it."""
    print(f"tracedoc: the cached store {path} is damaged ({first_line(exc)}); rebuilding it", file=sys.stderr)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _fsync(path: Path) -> None:
    """Flush a file's (or a directory's entries') data to disk: the store must be whole before it is renamed in,
    and the rename must last. Some file systems cannot sync a directory; that is not an error."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if path.is_dir():
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not path.is_dir():
            raise
    finally:
        os.close(fd)


def _remove_partial(partial: Path) -> None:
    """Remove a partial store with its write-ahead log and spill folder."""
    for leftover in (partial, partial.with_name(partial.name + ".wal")):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    shutil.rmtree(partial.with_name(partial.name + ".tmp"), ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """True when a process with this id runs on this machine (also one of another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    return True


@dataclass
class Leftover:
    """What an interrupted or killed run left in the cache folder."""

    path: Path
    size_bytes: int
    live: bool  # its run may still be going: never removed


def leftovers(cache_dir: Path, min_age_s: float = STALE_INGEST_S) -> list[Leftover]:
    """Partial stores (with their WAL and spill folder) and ingest work folders in ``cache_dir``.

    A partial store is live while its process runs; an ingest folder is live while any partial store here is, or
    while it changed less than ``min_age_s`` seconds ago (it holds no process id, but only an ingest into a
    partial store here makes one).
    """
    if not cache_dir.is_dir():
        return []
    found: list[Leftover] = []
    folders: list[Path] = []
    for entry in sorted(cache_dir.iterdir()):
        if m := _PARTIAL.match(entry.name):
            found.append(Leftover(entry, _size(entry), pid_alive(int(m["pid"]))))
        elif entry.name.startswith(_INGEST_FOLDER) and entry.is_dir():
            folders.append(entry)
    any_live = any(f.live for f in found)
    now = time.time()
    for folder in folders:
        recent = now - _last_change(folder) < min_age_s
        found.append(Leftover(folder, _size(folder), any_live or recent))
    return found


def sweep_leftovers(cache_dir: Path, min_age_s: float = STALE_INGEST_S) -> list[Leftover]:
    """Remove the leftovers of runs that are gone; returns what was removed."""
    removed = []
    for item in leftovers(cache_dir, min_age_s):
        if not item.live and _remove(item.path):
            removed.append(item)
    return removed


@dataclass
class CachedStore:
    """One finished store in the cache: its key, size, last use and the inputs it was made from."""

    path: Path
    size_bytes: int
    used: float  # when it was made or last reused (seconds since the epoch)
    inputs: list[str]
    error: str | None = None  # why its inputs could not be read (a damaged store)

    @property
    def key(self) -> str:
        return self.path.stem


def cached_stores(cache_dir: Path) -> list[CachedStore]:
    """The finished stores in ``cache_dir``, most recently used first, each with the inputs it was made from."""
    if not cache_dir.is_dir():
        return []
    stores = [_describe(p) for p in cache_dir.glob("*.duckdb") if not _PARTIAL.match(p.name) and p.is_file()]
    return sorted(stores, key=lambda s: -s.used)


def _describe(path: Path) -> CachedStore:
    """A store's size (with the reports kept for it), age and input paths (read from its sources table,
    read-only)."""
    from tracedoc.store.engine import duckdb

    info = path.stat()
    size = info.st_size + _size(reports_folder(path))
    try:
        with Store.open(path) as store:
            inputs = [r["path"] for r in store.query("SELECT path FROM sources ORDER BY source_id")]
        return CachedStore(path, size, info.st_mtime, inputs)
    except duckdb.Error as exc:
        return CachedStore(path, size, info.st_mtime, [], first_line(exc))


def clear_cache(cache_dir: Path, older_than_s: float | None = None) -> tuple[list[Path], int]:
    """Remove the stores (those unused for ``older_than_s`` seconds, when given) and every leftover whose run is
    gone; returns what was removed and the bytes freed."""
    now = time.time()
    removed: list[Path] = []
    freed = 0
    for store in cached_stores(cache_dir):
        if (older_than_s is None or now - store.used >= older_than_s) and _remove(store.path):
            removed.append(store.path)
            freed += store.size_bytes
            _remove(reports_folder(store.path))
    for item in sweep_leftovers(cache_dir, min_age_s=0.0):
        removed.append(item.path)
        freed += item.size_bytes
    return removed, freed


def _remove(path: Path) -> bool:
    """Remove a file or folder; False when it is already gone or cannot be removed."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError:
        return False
    return True


def _walk(path: Path) -> Iterator[os.stat_result]:
    """The stat of ``path`` and, for a folder, of everything in it (vanishing files skipped)."""
    with contextlib.suppress(FileNotFoundError):
        yield path.lstat()
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                with contextlib.suppress(FileNotFoundError):
                    yield (Path(root) / name).lstat()


def _size(path: Path) -> int:
    """Bytes of a file, or of the files in a folder."""
    return sum(s.st_size for s in _walk(path) if stat.S_ISREG(s.st_mode))


def _last_change(path: Path) -> float:
    """The newest modification time of a folder and what it holds."""
    return max((s.st_mtime for s in _walk(path)), default=0.0)
