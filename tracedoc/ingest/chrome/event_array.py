"""Where a chrome trace's event array lies in its bytes, found without parsing the events.

A chrome trace is either an object whose ``traceEvents`` member holds the events, in any position among members of
any kind (Kineto writes ``INFO``/``ERROR`` log arrays after it, re-serialised traces put ``deviceProperties``
there), or a bare array of events (the "JSON Array Format", whose closing ']' may be missing). The array's start is
found with a regular expression in the head; its end by walking the document's last members backwards from the
closing '}', matching brackets and skipping strings, so the bytes after the array are never mistaken for part of it.
"""

from __future__ import annotations

import json
import re

EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_ARRAY_START = re.compile(rb"\s*(\[)\s*")
_WHITESPACE = b" \t\r\n"
_SPECIAL = (b'"', b"[", b"]", b"{", b"}")  # what matters when matching brackets backwards
_NEAR = 4096
_SCALAR_CHARS = frozenset(b"0123456789+-.eEtrufalsn")
_OPENER = {ord("]"): ord("["), ord("}"): ord("{")}


def array_format_start(head: bytes) -> int | None:
    """The offset just past the '[' of a trace in the JSON Array Format (a top-level array whose first element is an
    event: an object with a "ph" member); None for anything else."""
    m = _ARRAY_START.match(head)
    if m is None or head[m.end():m.end() + 1] != b"{":
        return None
    try:
        first, _ = json.JSONDecoder().raw_decode(head.decode("utf-8", "replace"), m.end())
    except ValueError:
        return None
    return m.end(1) if isinstance(first, dict) and "ph" in first else None


def array_format_end(tail: bytes) -> int:
    """Where the events of a JSON Array Format trace end in ``tail`` (its last bytes): before the closing ']' and
    any comma after the last event (the format allows both to be missing, and writers leave the comma)."""
    end = len(tail.rstrip(_WHITESPACE))
    if end and tail[end - 1] == ord("]"):
        end = len(tail[:end - 1].rstrip(_WHITESPACE))
    if end and tail[end - 1] == ord(","):
        end = len(tail[:end - 1].rstrip(_WHITESPACE))
    return end


def events_end(tail: bytes) -> int | None:
    """The offset in ``tail`` (the document's last bytes, all after the events array's '[') of the ']' that closes
    ``traceEvents``; None when the document does not end like a JSON object holding it.

    The top-level members after the array are walked backwards. A member whose value is an array is the events
    array when its last element is an event (an object with "ph"), or when its '[' lies before ``tail``: only the
    events array may be that long. Any other array (log lines, device properties) is a later member, stepped over.
    """
    scan = _Backwards(tail)
    i = scan.skip_space(len(tail))
    if i == 0 or tail[i - 1] != ord("}"):
        return None
    at: int | None = i - 1
    while at is not None:
        at = scan.skip_space(at)
        if at == 0:
            return None
        if tail[at - 1] == ord("]"):
            close = at - 1
            if scan.ends_with_event(close):
                return close
            at = scan.opening(close)
            if at is None:
                return close
        else:
            at = scan.value_start(at)
        at = scan.member_start(at) if at is not None else None
    return None


class _Backwards:
    """Steps backwards through JSON text: over whitespace, strings, scalars and bracketed values."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def skip_space(self, i: int) -> int:
        """The offset just past the last non-whitespace byte before ``i``."""
        while i > 0 and self.data[i - 1] in _WHITESPACE:
            i -= 1
        return i

    def value_start(self, end: int) -> int | None:
        """Where the value (not an array) that ends just before ``end`` starts; None when it is not one."""
        last = self.data[end - 1]
        if last == ord("}"):
            return self.opening(end - 1)
        if last == ord('"'):
            return self.string_start(end - 1)
        i = end
        while i > 0 and self.data[i - 1] in _SCALAR_CHARS:
            i -= 1
        return i if i < end else None

    def member_start(self, value_start: int) -> int | None:
        """Given where a member's value starts, step back over ``"key":`` and the ',' before it; the offset to go
        on from, or None when the document's opening '{' (or anything not JSON) comes first."""
        i = self.skip_space(value_start)
        if i == 0 or self.data[i - 1] != ord(":"):
            return None
        i = self.skip_space(i - 1)
        key = self.string_start(i - 1) if i > 0 and self.data[i - 1] == ord('"') else None
        if key is None:
            return None
        i = self.skip_space(key)
        return i - 1 if i > 0 and self.data[i - 1] == ord(",") else None

    def string_start(self, close: int) -> int | None:
        """The offset of the '"' that opens the string whose closing '"' is at ``close``: the previous quote not
        escaped (an odd number of backslashes before a quote escapes it)."""
        i = close
        while (i := self.data.rfind(b'"', 0, i)) >= 0:
            j = i
            while j > 0 and self.data[j - 1] == ord("\\"):
                j -= 1
            if (i - j) % 2 == 0:
                return i
        return None

    def opening(self, close: int) -> int | None:
        """The offset of the bracket that opens the one at ``close`` (']' or '}'), strings skipped; None when it
        lies before the data or the brackets do not match."""
        expected = [_OPENER[self.data[close]]]
        i: int | None = close
        while expected and i is not None:
            i = self._previous_bracket(i)
            if i is None:
                return None
            c = self.data[i]
            if c == ord('"'):
                i = self.string_start(i)
            elif c in _OPENER:
                expected.append(_OPENER[c])
            elif expected.pop() != c:
                return None
        return i

    def ends_with_event(self, close: int) -> bool:
        """Whether the array closed at ``close`` ends with an event: an object with a "ph" member."""
        end = self.skip_space(close)
        start = self.opening(end - 1) if end > 0 and self.data[end - 1] == ord("}") else None
        if start is None:
            return False
        try:
            last = json.loads(self.data[start:end])
        except (ValueError, RecursionError):
            return False
        return isinstance(last, dict) and "ph" in last

    def _previous_bracket(self, i: int) -> int | None:
        """The offset of the last bracket or quote before ``i``: looked for in the 4 KiB before it (JSON text holds
        one every few bytes), then in all the data before it."""
        near = max(0, i - _NEAR)
        found = max(self.data.rfind(char, near, i) for char in _SPECIAL)
        if found < 0 and near > 0:
            found = max(self.data.rfind(char, 0, near) for char in _SPECIAL)
        return found if found >= 0 else None
