"""The renderer interface and registry: each format's name and file extension are held once, here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, ClassVar

from tracedoc.lazy import load

if TYPE_CHECKING:
    from tracedoc.report import Report


class Renderer:
    """Turns a Report into one output document."""

    name: ClassVar[str]

    def render(self, report: Report) -> str:
        raise NotImplementedError


class Renderers(Mapping[str, type[Renderer]]):
    """The renderers by format name, each imported from its module when its format is first used (a JSON report
    imports none of the text renderer's Rich, nor the HTML renderer's pages); each format's file extension is known
    without importing its renderer."""

    def __init__(self, formats: dict[str, tuple[str, str]]) -> None:
        self._formats = formats  # name: (extension, "module:Class")
        self._loaded: dict[str, type[Renderer]] = {}

    def __getitem__(self, name: str) -> type[Renderer]:
        if name not in self._loaded:
            self._loaded[name] = load(self._formats[name][1])
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is a format, known without importing its renderer (Mapping's own asks for the item)."""
        return name in self._formats

    def __iter__(self) -> Iterator[str]:
        return iter(self._formats)

    def __len__(self) -> int:
        return len(self._formats)

    def module(self, name: str) -> str:
        """The module of format ``name``'s renderer, named without importing it."""
        return self._formats[name][1].partition(":")[0]

    def extensions(self) -> dict[str, str]:
        """Each format's name and the extension of its files ('.md')."""
        return {name: extension for name, (extension, _) in self._formats.items()}


RENDERERS = Renderers({
    "text": (".txt", "tracedoc.render.text:TextRenderer"),
    "json": (".json", "tracedoc.render.jsonrender:JsonRenderer"),
    "md": (".md", "tracedoc.render.markdown:MarkdownRenderer"),
    "html": (".html", "tracedoc.render.html:HtmlRenderer"),
})


def renderer_for_extension(suffix: str) -> type[Renderer] | None:
    """The renderer whose files end with ``suffix`` (e.g. '.md'), if any."""
    name = next((name for name, extension in RENDERERS.extensions().items() if extension == suffix.lower()), None)
    return None if name is None else RENDERERS[name]
