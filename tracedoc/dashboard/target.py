"""What `tracedoc serve` is asked to show, resolved before anything else: traces (files or directories, as for
`tracedoc analyze`), a cached store (``*.duckdb``) or a saved JSON report. Problems the user can fix (a missing
path, an unknown format, a file that is no store) are raised here as InputError, before the server and the
dashboard's libraries start, which take several times as long as reading a small trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracedoc.ingest import InputFile, discover
from tracedoc.report import Report
from tracedoc.saved import looks_like_report, open_complete_store, read_report


@dataclass
class Target:
    """Exactly one of: traces to ingest, a cached store, a saved report."""

    inputs: list[InputFile] = field(default_factory=list)
    store_path: Path | None = None
    report: Report | None = None


def resolve(paths: Sequence[Path]) -> Target:
    """Decide what the paths are; raises InputError for what cannot be served."""
    if len(paths) == 1 and paths[0].is_file():
        path = paths[0]
        if path.suffix == ".duckdb":
            open_complete_store(path).close()  # refused here, before the server starts
            return Target(store_path=path)
        if path.suffix == ".json" and looks_like_report(path):
            return Target(report=read_report(path))
    return Target(inputs=discover(list(paths)))
