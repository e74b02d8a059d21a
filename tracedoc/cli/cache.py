"""`tracedoc cache`: what the store cache holds, how big it is, and clearing it."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from tracedoc.cli.errors import one_line_errors
from tracedoc.cli.options import FiniteFloatRange, cache_dir_option
from tracedoc.cli.terminal import table_console
from tracedoc.store.cache import cached_stores, clear_cache, default_cache_dir, leftovers


@click.group("cache")
def cache_command() -> None:
    """The cache of ingested stores: one DuckDB file per set of inputs, keyed by their content, so a second
    `tracedoc analyze` of the same traces skips ingestion. It lives in --cache-dir, else $TRACEDOC_CACHE_DIR,
    else ~/.cache/tracedoc.

    Example:

        tracedoc cache list

        tracedoc cache size

        tracedoc cache clear --older-than 30
    """


@cache_command.command("list")
@cache_dir_option
@one_line_errors
def list_command(cache_dir: Path | None) -> None:
    """List the cached stores, most recently used first: key, size, age (since made or last used) and the inputs
    each was made from.

    Example:

        tracedoc cache list
    """
    directory = cache_dir or default_cache_dir()
    stores = cached_stores(directory)
    console = table_console(markup=False)
    if not stores:
        console.print(f"no stores in {directory}")
        return
    table = Table("key", "size", "age", "inputs", box=None, header_style="bold", pad_edge=False)
    now = time.time()
    for store in stores:
        inputs = f"damaged: {store.error}" if store.error else "\n".join(store.inputs) or "none"
        table.add_row(store.key, fmt_bytes(store.size_bytes), fmt_age(now - store.used), inputs)
    console.print(table)


@cache_command.command("size")
@cache_dir_option
@one_line_errors
def size_command(cache_dir: Path | None) -> None:
    """Print how much disk the cache takes: its stores, and what interrupted runs left behind.

    Example:

        tracedoc cache size
    """
    directory = cache_dir or default_cache_dir()
    stores = cached_stores(directory)
    left = leftovers(directory)
    total = sum(s.size_bytes for s in stores) + sum(item.size_bytes for item in left)
    line = f"{fmt_bytes(total)} in {directory}: {len(stores)} store(s)"
    if left:
        line += f", {fmt_bytes(sum(item.size_bytes for item in left))} in {len(left)} leftover(s) of interrupted runs"
    click.echo(line)


@cache_command.command("clear")
@cache_dir_option
@click.option("--older-than", type=FiniteFloatRange(min=0), default=None, metavar="DAYS",
              help="Only remove stores not used for this many days.")
@one_line_errors
def clear_command(cache_dir: Path | None, older_than: float | None) -> None:
    """Remove the cached stores, and whatever interrupted runs left behind (the files of a run still going are
    kept).

    Example:

        tracedoc cache clear

        tracedoc cache clear --older-than 30
    """
    directory = cache_dir or default_cache_dir()
    removed, freed = clear_cache(directory, older_than * 86400 if older_than is not None else None)
    click.echo(f"removed {len(removed)} item(s), {fmt_bytes(freed)}, from {directory}")


def fmt_bytes(size: float) -> str:
    """A size in bytes, readably: '512 B', '2.4 MB', '1.1 GB'."""
    units = ("B", "kB", "MB", "GB", "TB")
    power = 0
    while size >= 1000 and power < len(units) - 1:
        size /= 1000
        power += 1
    return f"{size:.0f} B" if power == 0 else f"{size:.1f} {units[power]}"


def fmt_age(seconds: float) -> str:
    """An age, readably: '40 s', '12 min', '5 h', '3 d'."""
    for limit, unit, scale in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{max(seconds, 0) / scale:.0f} {unit}"
    return f"{seconds / 86400:.0f} d"
