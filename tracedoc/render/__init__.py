"""Renderers: one class per output format, each turning the same Report into text (what is written from the
store's events instead, the Perfetto trace, is an export: tracedoc.export). ``RENDERERS`` imports a format's
renderer when that format is used."""

from tracedoc.render.base import RENDERERS, Renderer, renderer_for_extension

__all__ = ["RENDERERS", "Renderer", "renderer_for_extension"]
