"""Exports: documents written from the analysed store itself (its events), beside the report, where a renderer
writes from the report alone. ``EXPORTS`` holds each one's name, file extension and writer; `--out` and
``tracedoc.api.analyze`` read it beside the renderers (tracedoc.render.RENDERERS)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracedoc.export import perfetto
from tracedoc.report import Report
from tracedoc.store import Store


@dataclass(frozen=True)
class Exporter:
    """One export: its format ``name`` (--format), the ``extension`` of its files, a ``title`` for messages ('the
    Perfetto trace written to …') and ``write(store, report, path)``, which writes it from an analysed store."""

    name: str
    extension: str
    title: str
    write: Callable[[Store, Report, Path], None]


EXPORTS: dict[str, Exporter] = {e.name: e for e in (
    Exporter(perfetto.NAME, perfetto.EXTENSION, perfetto.TITLE, perfetto.write),
)}

__all__ = ["EXPORTS", "Exporter"]
