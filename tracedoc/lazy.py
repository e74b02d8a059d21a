"""Objects named as "module:attribute", imported when first used: a registry lists what it holds without importing
it, so that a run imports only the parts it uses (the command line's commands, the report's renderers)."""

from __future__ import annotations

import importlib
from typing import Any


def load(target: str) -> Any:
    """The object ``target`` ("module:attribute") names, its module imported now if it was not yet."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
