"""Renderers: one class per output format, each turning the same Report into text (what is written from the
store's events instead, the Perfetto trace, is an export: tracedoc.export)."""

from tracedoc.render.base import RENDERERS, Renderer, renderer_for_extension
from tracedoc.render.html import HtmlRenderer
from tracedoc.render.jsonrender import JsonRenderer
from tracedoc.render.markdown import MarkdownRenderer
from tracedoc.render.text import TextRenderer

for _cls in (TextRenderer, JsonRenderer, MarkdownRenderer, HtmlRenderer):
    RENDERERS[_cls.name] = _cls

__all__ = ["RENDERERS", "Renderer", "renderer_for_extension"]
