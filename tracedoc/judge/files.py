"""Rule files as mappings: a folder's rule files, and one file read with the bases it ``extends`` merged in.

A file whose name starts with an underscore (``rules/_warp-stall.yaml``) is a base, never a rule: rules share it
with ``extends: _warp-stall``. The base's keys come first and the rule's own win, key by key (a whole ``evidence``
list or ``thresholds`` mapping is replaced, not merged); a base may extend another. A base is looked for beside
the rule, then among the built-in rules. A rule file is untrusted: a chain of bases deeper than MAX_EXTENDS, or a
file whose aliases expand to more than MAX_NODES values (a YAML alias bomb), is refused before anything reads
it. Imports nothing of tracedoc but its errors, so that the pages can read
the built-in rules' fields without the judge.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from tracedoc.errors import RuleError, first_line

BASE_PREFIX = "_"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
MAX_EXTENDS = 32  # bases in one chain (the built-in rules use one)
MAX_NODES = 100_000  # values in one rule file, each alias counted as often as it is used (a built-in has < 200)


def builtin_folder() -> Traversable:
    """The folder of the rules shipped with tracedoc (``rules/``, installed as ``tracedoc.builtin_rules``)."""
    return resources.files("tracedoc.builtin_rules")


def rule_files(folder: Traversable) -> list[Traversable]:
    """The rule files of a folder (``*.yaml``, bases left out), by name."""
    return sorted((f for f in folder.iterdir() if f.name.endswith(".yaml") and not f.name.startswith(BASE_PREFIX)),
                  key=lambda f: f.name)


def read_rule(path: Traversable) -> dict[str, Any]:
    """The rule file at ``path`` as a mapping, the bases it extends merged in; RuleError (one line, naming the
    file) when a file cannot be read, is not a mapping, or extends a base that is missing or extends it back."""
    return _merged(path, [])


def builtin_mappings(files: Sequence[Traversable], cache_dir: Path | None) -> list[dict[str, Any]]:
    """``read_rule`` of each built-in rule file, kept as JSON in ``cache_dir`` (None: not kept) between runs: the
    YAML parse of 59 rules took 50 ms of every run, the JSON 2 ms. Only mappings that come back from JSON
    unchanged are kept; a cache that cannot be read or written is passed by."""
    cached = _mappings_file(cache_dir)
    if cached is None:
        return [read_rule(f) for f in files]
    try:
        data = json.loads(cached.read_text(encoding="utf-8"))
        if isinstance(data, list) and len(data) == len(files) and all(isinstance(d, dict) for d in data):
            return data
    except (OSError, ValueError):
        pass
    data = [read_rule(f) for f in files]
    try:
        text = json.dumps(data)
        if json.loads(text) == data:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f"{cached.name}.{os.getpid()}")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, cached)
    except (OSError, TypeError, ValueError):
        pass
    return data


def _mappings_file(cache_dir: Path | None) -> Path | None:
    """Where ``builtin_mappings`` keeps the built-in rules: its name holds a digest of every built-in file's name,
    size and modification time, and of this module's, so that a changed rule or reader is parsed afresh. None
    without a cache folder, or when the built-in files are not plain files."""
    if cache_dir is None:
        return None
    try:
        stamps = [(f.name, os.stat(str(f))) for f in builtin_folder().iterdir()] + [(__file__, os.stat(__file__))]
    except OSError:
        return None
    key = repr(sorted((name, s.st_size, s.st_mtime_ns) for name, s in stamps))
    return cache_dir / f"rules-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _merged(path: Traversable, chain: list[str]) -> dict[str, Any]:
    data = _mapping(path)
    name = data.pop("extends", None)
    if name is None:
        return data
    if len(chain) >= MAX_EXTENDS:
        raise RuleError(f"{chain[0]}: extends goes deeper than {MAX_EXTENDS} bases")
    if not isinstance(name, str) or not _NAME.match(name):
        raise RuleError(f"{path}: extends names a base by its file name without .yaml (e.g. extends: _warp-stall)")
    base = _find(path, name)
    if base is None:
        raise RuleError(f"{path}: extends '{name}', but there is no {name}.yaml beside it or among the built-in "
                        "rules")
    here = [*chain, str(path)]
    if str(base) in here:
        circle = " → ".join(_stem(p) for p in [*here[here.index(str(base)):], str(base)])
        raise RuleError(f"{here[0]}: extends goes round in a circle ({circle})")
    return {**_merged(base, here), **data}


def _mapping(path: Traversable) -> dict[str, Any]:
    import yaml  # here: a run whose built-in rules come from the cache (builtin_mappings) parses no YAML

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there: 5x faster
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError) as exc:
        raise RuleError(f"{path}: cannot read rule ({first_line(exc)})") from None
    if not isinstance(data, dict):
        raise RuleError(f"{path}: a rule file must be a YAML mapping")
    if not _within(data, MAX_NODES):
        raise RuleError(f"{path}: a rule file of more than {MAX_NODES:,} values (with its aliases expanded)")
    return data


def _within(data: Any, limit: int) -> bool:
    """True when ``data`` (a loaded YAML document) holds at most ``limit`` values, a value reached through
    several aliases counted each time, as whatever reads it would walk it: at most ``limit`` steps, however
    the aliases nest or loop."""
    pending = [data]
    seen = 0
    while pending:
        seen += 1
        if seen > limit:
            return False
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return True


def _find(path: Traversable, name: str) -> Traversable | None:
    """The base ``name`` beside ``path``, else among the built-in rules; a rule extending its own name (a user's
    rule over the built-in one of that id) finds the built-in one."""
    beside = [path.parent] if hasattr(path, "parent") and name != Path(str(path)).stem else []
    folders: Sequence[Traversable] = (*beside, builtin_folder())
    for folder in folders:
        candidate = folder.joinpath(f"{name}.yaml")
        if candidate.is_file():
            return candidate
    return None


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".yaml")
