"""Hostile rule files, each a copy of the built-in rules/launch-bound.yaml under another id with one thing
changed: a field holding several statements, SQL that reads a file, a YAML alias bomb, a chain of bases 1,000
deep."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

SOURCE = ROOT / "rules" / "launch-bound.yaml"


def _rule(rule_id: str) -> str:
    text = SOURCE.read_text()
    assert text.startswith("id: launch-bound\n")
    return text.replace("id: launch-bound", f"id: {rule_id}", 1)


def with_field(folder: Path, rule_id: str, key: str, value: str) -> Path:
    """A folder holding launch-bound as ``rule_id``, its top-level ``key`` (a one-line or folded value) set to
    ``value`` (YAML text)."""
    folder.mkdir(parents=True, exist_ok=True)
    text, count = re.subn(rf"^{key}: .*?(?=^\w)", f"{key}: {value}\n", _rule(rule_id), count=1,
                          flags=re.S | re.M)
    assert count == 1, key
    (folder / f"{rule_id}.yaml").write_text(text)
    return folder


def alias_bomb(folder: Path, levels: int = 9) -> Path:
    """A folder holding launch-bound as bomb-rule, whose references are an alias of an alias ... ``levels``
    deep, each list holding the one below ten times: 10**levels strings once expanded, a few hundred bytes on
    disk."""
    folder.mkdir(parents=True, exist_ok=True)
    anchors = ["  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    anchors += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    text = _rule("bomb-rule").replace("\nreferences:", "\nx-references:")
    (folder / "bomb-rule.yaml").write_text("x-anchors:\n" + "\n".join(anchors) + f"\nreferences: *a{levels - 1}\n"
                                          + text)
    return folder


def deep_extends(folder: Path, depth: int = 1000) -> Path:
    """A folder holding deep-rule, which extends _b0, which extends _b1, ... _b{depth-1}: launch-bound's fields."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deep-rule.yaml").write_text("extends: _b0\nid: deep-rule\n")
    for i in range(depth):
        body = f"extends: _b{i + 1}\n" if i < depth - 1 else _rule("deep-rule")
        (folder / f"_b{i}.yaml").write_text(body)
    return folder
