"""The diff's output formats and their file extensions: text, JSON (versioned, ``"kind": "diff"``), Markdown,
and HTML."""

from __future__ import annotations

from tracedoc import strict_json
from tracedoc.diff.model import Diff

# Format name: the extension of its files (.markdown and .htm are read as md and html too: cli.options).
FORMATS = {"text": ".txt", "json": ".json", "md": ".md", "html": ".html"}


def render(diff: Diff, fmt: str) -> str:
    """The diff as one document in ``fmt`` (one of FORMATS)."""
    if fmt == "json":
        return strict_json.dumps(diff.to_dict(), indent=2, default=strict_json.plain_number) + "\n"
    if fmt == "md":
        from tracedoc.diff.markdown import render_markdown

        return render_markdown(diff)
    if fmt == "html":
        from tracedoc.diff.html import render_html

        return render_html(diff)
    from tracedoc.diff.text import render_text

    return render_text(diff)

