"""The renderer interface and registry: each format's name and file extension are held once, here."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from tracedoc.report import Report


class Renderer:
    """Turns a Report into one output document."""

    name: ClassVar[str]
    extension: ClassVar[str]

    def render(self, report: Report) -> str:
        raise NotImplementedError


RENDERERS: dict[str, type[Renderer]] = {}


def renderer_for_extension(suffix: str) -> type[Renderer] | None:
    """The renderer whose files end with ``suffix`` (e.g. '.md'), if any."""
    return next((r for r in RENDERERS.values() if r.extension == suffix.lower()), None)
