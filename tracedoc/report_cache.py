"""Reports kept beside their cached store, so that analysing the same inputs again the same way is read, not run.

A report is a function of the store (its key: the inputs' contents, the readers' code), tracedoc's analysis code and
rules, and what the run was given (the rules with the user's, thresholds, step range, peaks, the input paths as
named). ``report_key`` hashes all of them; a report cached under ``<cache>/<store key>.reports/<report key>.json``
is read back only for that key, so a change to any of them (a rule edited, a tracedoc upgraded or a source file of
it changed) analyses again. The store stays the cache's unit: `tracedoc cache clear` removes its reports with it,
and a report is read only while its store is there.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from tracedoc import strict_json
from tracedoc.report import Report
from tracedoc.store.cache import reports_folder, sweep_leftovers
from tracedoc.version import __version__

# The package's files that decide a report: its code, analyses and rules (not the dashboard's static assets).
_CODE_SUFFIXES = (".py", ".sql", ".yaml", ".yml", ".json")


def report_key(store_key: str, *given: Any) -> str:
    """The key of the report of the store ``store_key`` analysed with ``given`` (the rules, thresholds, step range,
    peaks and paths: anything whose ``repr`` changes when what it asks for does) by this tracedoc."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{store_key};{code_digest()}".encode())
    for value in given:
        h.update(b"\0" + repr(value).encode())
    return h.hexdigest()


@functools.cache
def code_digest() -> str:
    """A digest of tracedoc's version and of its code, analyses and built-in rules, once per process: each file's
    name, size and modification time (as Python's own bytecode cache tells a changed source), or its bytes where
    the package is not in plain files."""
    h = hashlib.blake2b(digest_size=16)
    h.update(__version__.encode())
    for engine in ("_duckdb", "duckdb", "pyarrow"):  # a report made by another engine is made again
        h.update(f"\0{engine} {_installed(engine)}".encode())
    for root in (resources.files("tracedoc"), resources.files("tracedoc.builtin_rules")):
        if isinstance(root, Path):
            for folder, dirs, files in sorted(os.walk(root)):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in sorted(f for f in files if f.endswith(_CODE_SUFFIXES)):
                    info = os.stat(os.path.join(folder, name))
                    h.update(f"{os.path.relpath(folder, root)}/{name}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
        else:
            for name, item in sorted(_code_files(root, ""), key=lambda found: found[0]):
                h.update(name.encode() + b"\0" + item.read_bytes())
    return h.hexdigest()


def _code_files(folder: Traversable, prefix: str) -> list[tuple[str, Traversable]]:
    """The files under ``folder`` (a package not in plain files) that decide a report, with their paths below it."""
    found = []
    for item in folder.iterdir():
        if item.is_dir():
            if item.name != "__pycache__":
                found += _code_files(item, f"{prefix}{item.name}/")
        elif item.name.endswith(_CODE_SUFFIXES):
            found.append((prefix + item.name, item))
    return found


def cached_report(store_path: Path, key: str) -> Report | None:
    """The report cached under ``key`` for the store at ``store_path``; None when there is none, its store is gone,
    or it cannot be read (it is then analysed again and written anew)."""
    data = _cached(store_path, f"{key}.json")
    try:
        return None if data is None else Report.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def cached_rows(store_path: Path, key: str, name: str) -> list[dict[str, Any]] | None:
    """The rows of the table ``name`` kept with the report ``key`` (``keep_rows``): what a reader of the report
    also needs from the analysed store (the kernels a diff compares); None when they are not kept."""
    rows = _cached(store_path, f"{key}.{name}.json")
    return rows if isinstance(rows, list) and all(isinstance(row, dict) for row in rows) else None


def _cached(store_path: Path, file_name: str) -> Any:
    """The JSON of the file ``file_name`` kept beside the store at ``store_path``; None when there is none, its
    store is gone, or it cannot be read."""
    sweep_leftovers(store_path.parent)  # what killed runs left, as opening the store would
    path = reports_folder(store_path) / file_name
    if not store_path.is_file() or not path.is_file():
        return None
    try:
        data = strict_json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    with contextlib.suppress(OSError):
        os.utime(store_path)  # its age in `tracedoc cache list` counts from the last use, as a store reused does
    return data


def keep_report(store_path: Path, key: str, report: Report) -> None:
    """Write ``report`` under ``key`` beside its store (atomically: a reader sees the whole file or none). A cache
    that cannot be written is left as it is: the report was made all the same."""
    _keep(store_path, f"{key}.json", report.to_json(indent=None))


def keep_rows(store_path: Path, key: str, name: str, rows: list[dict[str, Any]]) -> None:
    """Write the rows of the table ``name`` beside the report ``key`` (``cached_rows`` reads them back), as
    ``keep_report`` writes it."""
    _keep(store_path, f"{key}.{name}.json", strict_json.dumps(rows, default=strict_json.plain_number))


def _keep(store_path: Path, file_name: str, text: str) -> None:
    """Write ``text`` as the file ``file_name`` beside the store at ``store_path``, atomically; left unwritten when
    the cache cannot be written."""
    folder = reports_folder(store_path)
    partial = folder / f"{file_name.removesuffix('.json')}.partial-{os.getpid()}.json"
    with contextlib.suppress(OSError):
        folder.mkdir(exist_ok=True)
        partial.write_text(text)
        os.replace(partial, folder / file_name)
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)


def _installed(module: str) -> str:
    """Which install of the top-level ``module`` this is, without importing it or reading its package metadata (the
    email parser that reads it cost a cached run about 0.03 s): its file's path, size and modification time, as for
    tracedoc's own files; '' if none is installed."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ""
    with contextlib.suppress(OSError):
        info = os.stat(spec.origin)
        return f"{spec.origin}\0{info.st_size}\0{info.st_mtime_ns}"
    return spec.origin
