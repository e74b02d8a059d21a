"""Making text from traces safe to show: kernel, NVTX, frame and file names are untrusted.

A trace can carry terminal escape sequences (clear the screen, OSC 8 hyperlinks, window titles), bidirectional
overrides that reorder what a reader sees, carriage returns that overwrite a line or end a Markdown table row,
and lone surrogates that cannot be encoded at all. ``terminal_text`` removes escape sequences whole and writes
every other control character visibly (``\\x07``), so nothing from a trace can act on the terminal; Rich markup
is not an issue once the text is passed as a ``rich.text.Text`` (never as a markup string). ``one_line`` also
folds line breaks, for table cells and headings. ``visible_text`` is for HTML, where nothing acts on a terminal
but a reader should see every character a name holds: it removes nothing and writes every such character visibly,
escape sequences' ESC included (``\\x1b[2J``); ``visible_strings`` does it to every string of a report's data
(and, for a saved report, folds line breaks too).
"""

from __future__ import annotations

import re
from typing import Any

# ANSI/ECMA-48 sequences: CSI (ESC [ … final byte), OSC (ESC ] … BEL or ST), and the other two-byte ESC forms;
# their 8-bit C1 spellings (CSI U+009B, OSC U+009D) too.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"          # CSI: cursor moves, clear screen, colours
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: hyperlinks, window titles (to BEL or ST)
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"   # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"                         # any other escape
)
# C0 and C1 controls except tab and newline, DEL, line/paragraph separators, bidi embeddings/overrides/isolates,
# and lone surrogates (text decoded with 'surrogatepass' or 'surrogateescape').
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"[\r\n\t]+")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if "\ud800" <= char <= "\udfff":
        return "\ufffd"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: object) -> str:
    """``text`` with escape sequences removed and other control characters written visibly; newlines and tabs
    kept."""
    return _UNSAFE.sub(_visible, _ESCAPE_SEQUENCE.sub("", str(text)))


def one_line(text: object) -> str:
    """``terminal_text`` on a single line: runs of line breaks and tabs become one space."""
    return terminal_text(_LINE_BREAKS.sub(" ", str(text)))


def visible_text(text: object) -> str:
    """``text`` with every control character (ESC, NUL, C1), bidirectional embedding, override or isolate and line
    or paragraph separator written visibly (``\\x1b``, ``\\u202e``) and lone surrogates as U+FFFD; newlines and
    tabs kept. Nothing is removed, so what a name holds stays readable."""
    return _UNSAFE.sub(_visible, str(text))


def visible_strings(value: Any, one_line: bool = False) -> Any:
    """``value`` (parsed JSON: dicts, lists, scalars) with every string, keys included, through visible_text; with
    ``one_line``, runs of line breaks and tabs first become one space (a string of a saved report, which must not
    start a Markdown heading or a table row of its own)."""
    if isinstance(value, str):
        if one_line and _LINE_BREAKS.search(value):
            value = _LINE_BREAKS.sub(" ", value)
        return visible_text(value) if _UNSAFE.search(value) else value
    if isinstance(value, dict):
        return {visible_strings(k, one_line): visible_strings(v, one_line) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [visible_strings(v, one_line) for v in value]
    return value
