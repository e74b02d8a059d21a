"""Making text from traces safe to show: kernel, NVTX, frame and file names are untrusted.

A trace can carry terminal escape sequences (clear the screen, OSC 8 hyperlinks, window titles), bidirectional
overrides that reorder what a reader sees, carriage returns that overwrite a line or end a Markdown table row,
and lone surrogates that cannot be encoded at all. ``terminal_text`` removes escape sequences whole and writes
every other control character visibly (``\\x07``), so nothing from a trace can act on the terminal; Rich markup
is not an issue once the text is passed as a ``rich.text.Text`` (never as a markup string). ``one_line`` also
folds line breaks, for table cells and headings.
"""

from __future__ import annotations

import re

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
