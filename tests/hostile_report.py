"""A copy of a real saved report whose every string carries terminal escapes, BEL, bidi overrides and a line
break that would start a Markdown heading: what a saved report edited by someone else may hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

SOURCE = ROOT / "reports" / "ddp-straggler.json"
HOSTILE_TAIL = "\x1b[2J\x1b]8;;http://x\x07link\x1b]8;;\x07\x07\u202e\x9b31m\r\n# injected heading\n"
# Values the report's contract names (a severity, an input's format): left as they are so the report still reads.
_KEPT = {"severity", "format", "basis", "unit"}


def _poisoned(value: Any, key: str | None = None) -> Any:
    if isinstance(value, str):
        return value if key in _KEPT else value + HOSTILE_TAIL
    if isinstance(value, dict):
        return {k: _poisoned(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_poisoned(v, key) for v in value]
    return value


def hostile_report(path: Path) -> Path:
    """reports/ddp-straggler.json with HOSTILE_TAIL appended to every string but the contract's enumerations."""
    doc = json.loads(SOURCE.read_text())
    path.write_text(json.dumps(_poisoned(doc)))
    return path
