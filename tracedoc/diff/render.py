"""The diff's output formats and their file extensions: text, JSON (versioned, ``"kind": "diff"``), Markdown,
and HTML."""

from __future__ import annotations

from typing import Any

from tracedoc import strict_json
from tracedoc.diff.model import Diff

FORMATS = {"text": ".txt", "json": ".json", "md": ".md", "html": ".html"}
EXTENSIONS = {".txt": "text", ".json": "json", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}


def render(diff: Diff, fmt: str) -> str:
    """The diff as one document in ``fmt`` (one of FORMATS)."""
    if fmt == "json":
        return strict_json.dumps(diff.to_dict(), indent=2, default=_json_default) + "\n"
    if fmt == "md":
        from tracedoc.diff.markdown import render_markdown

        return render_markdown(diff)
    if fmt == "html":
        from tracedoc.diff.html import render_html

        return render_html(diff)
    from tracedoc.diff.text import render_text

    return render_text(diff)


def _json_default(value: Any) -> Any:
    """Numbers a store returns as Decimal or numpy types serialize as numbers."""
    if hasattr(value, "item"):
        return value.item()
    return float(value)
