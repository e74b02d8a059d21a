"""Rule definitions: one YAML file per rule, file name = rule id.

Built-in rules ship in the top-level ``rules/`` folder (installed as ``tracedoc.builtin_rules``); users add
folders with ``--rules DIR``, and a user rule with a built-in's id replaces it. Fields:

    extends (optional: the file name, without .yaml, of a base whose fields the rule takes unless it gives them
    itself, key by key; a base is a file whose name starts with '_' (never a rule itself), looked for beside the
    rule, then among the built-in rules: tracedoc.judge.files), id, title, severity (critical|warning|info),
    reads (analysis module), view (its view or table),
    when (SQL condition on the view's columns; thresholds and params as $name, the rule's own id as $rule_id),
    thresholds ({name: number}, each overridable with --set), params (optional: {name: text or number}, fixed
    values its SQL names as $name, such as the stall reason of a rule that extends a shared base),
    impact_ms (SQL expression: estimated saving in ms), impact_bytes (optional, memory rules: the saving in bytes,
    with impact_ms 0; such findings are ranked among themselves, after the time findings), critical_above_pct
    (optional: severity becomes critical when the saving is at least this % of wall time), critical_unless
    (optional: a SQL condition on the row under which critical_above_pct does not apply),
    scope ({rank|device|stream|kernel|step|pg|seq: SQL}),
    evidence ([{name, value (SQL), unit}]), message (text with {column} placeholders; {x_ns:time} writes a duration
    in ns readably; [[...]] parts are left out when a field in them is NULL), fix, references (URLs), and
    references_when (optional: {URL of references: SQL condition on the row} — such a reference is given only where
    its condition holds, so a link about LLM decoding follows a decode step, a PyTorch one a PyTorch program), claims
    (optional: {causes: [attribution causes], details: [details]} — the time attribution the saving is drawn
    from, so that findings never claim the same time twice; see tracedoc.judge.savings), and absorbs
    (optional: {rule: id, when: SQL condition on the view's columns} — where the condition holds, the other rule's
    finding on the same rank is a link in this finding's causal chain: its saving joins this one's and it is shown
    as part of it, so one diagnosis carries one fix and one saving), and span (optional: {start_ms: SQL, dur_ms:
    SQL} — the time the finding is about on its rank's timeline, ms after the rank's first recorded activity and
    how long, evaluated like evidence and written into the finding; the timeline and the Perfetto trace place the
    finding there, else on the step it names or its rank's window).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from tracedoc.errors import RuleError
from tracedoc.judge.files import builtin_folder, builtin_mappings, read_rule, rule_files
from tracedoc.judge.savings import CAUSES, Claim
from tracedoc.judge.template import TemplateError, fill
from tracedoc.report import SEVERITIES, Finding

_REQUIRED = ("id", "title", "severity", "reads", "view", "when", "impact_ms", "message", "fix")
_SCOPE_KEYS = {"rank", "device", "stream", "kernel", "step", "pg", "seq"}
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_PARAM_NAME = re.compile(r"^[A-Za-z_]\w*$")
RULE_ID_PARAM = "rule_id"  # the rule's own id, as its SQL names it ($rule_id)


@dataclass
class EvidenceSpec:
    name: str
    value: str
    unit: str = ""


@dataclass(frozen=True)
class SpanSpec:
    """Where a finding lies on its rank's timeline, as SQL over the view's columns: ms after the rank's first
    recorded activity, and how long."""

    start_ms: str
    dur_ms: str


@dataclass(frozen=True)
class Absorbs:
    """Another rule whose finding on the same rank is part of this rule's diagnosis where ``when`` holds."""

    rule: str
    when: str


@dataclass
class Rule:
    """A rule as written in its file."""

    id: str
    title: str
    severity: str
    reads: str
    view: str
    when: str
    impact_ms: str
    message: str
    fix: str
    thresholds: dict[str, float] = field(default_factory=dict)
    params: dict[str, str | float] = field(default_factory=dict)
    critical_above_pct: float | None = None
    critical_unless: str | None = None  # a SQL condition on the row: when it holds, critical_above_pct does not apply
    scope: dict[str, str] = field(default_factory=dict)
    evidence: list[EvidenceSpec] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    references_when: dict[str, str] = field(default_factory=dict)  # a reference → the SQL condition it needs
    claims: Claim | None = None
    absorbs: Absorbs | None = None
    impact_bytes: str | None = None  # memory rules: the saving in bytes (their impact_ms is 0)
    span: SpanSpec | None = None
    source: str = "built-in"

    def expressions(self) -> dict[str, str]:
        """Every piece of SQL of the rule (the view it reads, its expressions), by the field that holds it
        (``evidence[2].value``)."""
        found = {"view": self.view, "when": self.when, "impact_ms": self.impact_ms}
        if self.impact_bytes is not None:
            found["impact_bytes"] = self.impact_bytes
        found.update({f"scope.{key}": expr for key, expr in self.scope.items()})
        found.update({f"evidence[{i}].value": e.value for i, e in enumerate(self.evidence)})
        if self.claims is not None and self.claims.fraction is not None:
            found["claims.fraction"] = self.claims.fraction
        if self.absorbs is not None:
            found["absorbs.when"] = self.absorbs.when
        if self.span is not None:
            found.update({"span.start_ms": self.span.start_ms, "span.dur_ms": self.span.dur_ms})
        found.update({f"references_when[{url}]": cond for url, cond in self.references_when.items()})
        return {field_name: str(expr) for field_name, expr in found.items()}

    def bindings(self, overrides: dict[str, dict[str, float]] | None = None) -> dict[str, str | float]:
        """What the rule's SQL may name as ``$name``: its id (``$rule_id``), its critical_above_pct (for its
        critical_unless), its params and its thresholds, as ``overrides`` (``--set``) set them."""
        critical = {} if self.critical_above_pct is None else {"critical_above_pct": self.critical_above_pct}
        return {RULE_ID_PARAM: self.id, **critical, **self.params, **self.thresholds,
                **(overrides or {}).get(self.id, {})}

    @classmethod
    def from_file(cls, path: Path | Traversable, source: str, data: dict[str, Any] | None = None) -> Rule:
        """Parse and validate one rule file (with the bases it extends; ``data``: that file as ``read_rule`` gave
        it already); a malformed one raises RuleError naming the file."""
        data = read_rule(path) if data is None else data
        missing = [k for k in _REQUIRED if data.get(k) in (None, "")]
        if missing:
            raise RuleError(f"{path}: rule is missing {', '.join(missing)}")
        if not _ID.match(str(data["id"])):
            raise RuleError(f"{path}: rule id '{data['id']}' must be kebab-case")
        if Path(str(path)).stem != data["id"]:
            raise RuleError(f"{path}: file name must be the rule id ('{data['id']}.yaml')")
        if data["severity"] not in SEVERITIES:
            raise RuleError(f"{path}: severity must be one of {', '.join(SEVERITIES)}")
        if not set(data.get("scope") or {}) <= _SCOPE_KEYS:
            raise RuleError(f"{path}: scope keys must be among {', '.join(sorted(_SCOPE_KEYS))}")
        for key in ("message", "fix"):
            try:
                fill(str(data[key]), {})  # balanced, unnested optional parts; fields read 'unknown' here
            except TemplateError as exc:
                raise RuleError(f"{path}: bad {key} template ({exc})") from None
        try:
            evidence = [EvidenceSpec(**e) for e in data.get("evidence") or []]
            thresholds = {str(k): float(v) for k, v in (data.get("thresholds") or {}).items()}
        except (TypeError, ValueError) as exc:
            raise RuleError(f"{path}: bad evidence or thresholds ({exc})") from None
        rule = cls(id=data["id"], title=data["title"], severity=data["severity"], reads=data["reads"],
                   view=data["view"], when=data["when"], impact_ms=str(data["impact_ms"]),
                   message=data["message"].strip(), fix=data["fix"].strip(), thresholds=thresholds,
                   params=_params(path, data.get("params"), thresholds),
                   critical_above_pct=data.get("critical_above_pct"),
                   critical_unless=None if data.get("critical_unless") is None else str(data["critical_unless"]),
                   claims=_claims(path, data.get("claims")),
                   absorbs=_absorbs(path, data.get("absorbs")), span=_span(path, data.get("span")),
                   scope=data.get("scope") or {},
                   impact_bytes=None if data.get("impact_bytes") is None else str(data["impact_bytes"]),
                   evidence=evidence, references=list(data.get("references") or []), source=source)
        rule.references_when = _references_when(path, data.get("references_when"), rule.references)
        for field_name, expr in rule.expressions().items():
            if _ends_a_statement(expr):
                raise RuleError(f"{path}: {field_name} must be one SQL expression or name, not statements "
                                "(it holds ';')")
        return rule


def _ends_a_statement(sql: str) -> bool:
    """True when ``sql`` holds a ';' outside its strings and comments: the end of one statement and the start of
    another (``true; COPY (SELECT 42) TO 'x.csv'; SELECT 1``), which the judge would run. Without a ';' at all
    there is none, and DuckDB's tokenizer is not needed (nor imported: a report read back from the cache judges
    nothing)."""
    if ";" not in sql:
        return False
    from tracedoc.store.engine import duckdb

    return any(kind == duckdb.token_type.operator and sql.startswith(";", offset)
               for offset, kind in duckdb.tokenize(sql))


def check_thresholds(rules: Sequence[Rule], overrides: dict[str, dict[str, float]]) -> None:
    """Raise RuleError when an override names no rule, or a threshold its rule does not have (which would otherwise
    change nothing, silently); the message lists what there is."""
    by_id = {r.id: r for r in rules}
    for rule_id, values in overrides.items():
        rule = by_id.get(rule_id)
        if rule is None:
            import difflib  # here: only a mistyped --set needs it

            close = difflib.get_close_matches(rule_id, by_id, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise RuleError(f"no rule '{rule_id}' ({hint}rules: {', '.join(sorted(by_id))})")
        unknown = sorted(set(values) - rule.thresholds.keys())
        if unknown:
            names = ", ".join(rule.thresholds) or "none"
            raise RuleError(f"rule {rule_id} has no threshold '{unknown[0]}' (its thresholds: {names})")


def _claims(path: Path | Any, spec: Any) -> Claim | None:
    """A rule's ``claims``: the attribution causes (and optionally details) its saving is drawn from."""
    if spec is None:
        return None
    causes = spec.get("causes") if isinstance(spec, dict) else None
    details = spec.get("details") or [] if isinstance(spec, dict) else []
    if not causes or not isinstance(causes, list) or not set(causes) <= set(CAUSES) or not isinstance(details, list):
        raise RuleError(f"{path}: claims needs causes among {', '.join(CAUSES)} (optionally a list of details and "
                        "a fraction)")
    fraction = spec.get("fraction")
    return Claim(tuple(causes), tuple(str(d) for d in details), None if fraction is None else str(fraction))


def _absorbs(path: Path | Any, spec: Any) -> Absorbs | None:
    """A rule's ``absorbs``: the rule whose finding is part of this one's where the condition holds."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or not _ID.match(str(spec.get("rule", ""))) or not spec.get("when"):
        raise RuleError(f"{path}: absorbs needs a rule id and a when condition")
    return Absorbs(str(spec["rule"]), str(spec["when"]))


def _references_when(path: Path | Any, spec: Any, references: list[str]) -> dict[str, str]:
    """A rule's ``references_when``: for some of its references, the SQL condition on the row under which each is
    given."""
    if spec is None:
        return {}
    if not isinstance(spec, dict) or any(not isinstance(v, str) or not v.strip() for v in spec.values()):
        raise RuleError(f"{path}: references_when needs a SQL condition for each reference it names")
    unknown = [str(url) for url in spec if url not in references]
    if unknown:
        raise RuleError(f"{path}: references_when names {unknown[0]}, which is not among its references")
    return {str(url): str(cond) for url, cond in spec.items()}


def _params(path: Path | Any, spec: Any, thresholds: dict[str, float]) -> dict[str, str | float]:
    """A rule's ``params``: fixed values its SQL names as ``$name``, beside its thresholds and ``$rule_id``."""
    if spec is None:
        return {}
    if not isinstance(spec, dict) or any(
            not isinstance(k, str) or not _PARAM_NAME.match(k) or isinstance(v, bool)
            or not isinstance(v, str | int | float) for k, v in spec.items()):
        raise RuleError(f"{path}: params needs names, each with a text or a number")
    taken = sorted(set(spec) & {*thresholds, RULE_ID_PARAM})
    if taken:
        raise RuleError(f"{path}: param '{taken[0]}' is already a threshold's name or the rule's id ($rule_id)")
    return {k: v if isinstance(v, str) else float(v) for k, v in spec.items()}


def _span(path: Path | Any, spec: Any) -> SpanSpec | None:
    """A rule's ``span``: SQL for where its finding starts (ms after the rank's first recorded activity) and how
    long it lasts."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or set(spec) != {"start_ms", "dur_ms"} or any(
            not isinstance(v, str | int | float) or isinstance(v, bool) or v == "" for v in spec.values()):
        raise RuleError(f"{path}: span needs start_ms and dur_ms, each a SQL expression")
    return SpanSpec(str(spec["start_ms"]), str(spec["dur_ms"]))


@functools.cache
def _builtin_rules() -> tuple[Rule, ...]:
    """The rules shipped with tracedoc, parsed once per process (the CLI and the API both ask for them), their
    files read from the cache between processes (files.builtin_mappings) and checked each time."""
    from tracedoc.store.cache import default_cache_dir  # here: the store imports DuckDB, which rules need not

    files = rule_files(builtin_folder())
    return tuple(Rule.from_file(f, "built-in", data)
                 for f, data in zip(files, builtin_mappings(files, default_cache_dir()), strict=True))


def mark_kinds(findings: Sequence[Finding], rules: Sequence[Rule]) -> None:
    """Set each finding's ``kind`` and ``across_ranks`` from its rule's analysis (``reads``) and its severity: a
    memory finding (a saving in bytes), a hang (its rule reads ``hang.*``), informational health (``health.*`` at
    severity info), else a saving; about ranks when its rule reads ``ranks.*``. A finding whose rule is not among
    ``rules`` is a saving."""
    reads = {rule.id: rule.reads for rule in rules}
    for finding in findings:
        group = reads.get(finding.rule, "")
        if finding.impact_bytes is not None:
            finding.kind = "memory"
        elif group.startswith("hang."):
            finding.kind = "hang"
        elif group.startswith("health.") and finding.severity == "info":
            finding.kind = "health"
        else:
            finding.kind = "saving"
        finding.across_ranks = group.startswith("ranks.")


def load_rules(user_dirs: tuple[Path, ...] | list[Path] = ()) -> list[Rule]:
    """Built-in rules, then each user folder's; a later rule with the same id replaces an earlier one."""
    rules = {rule.id: rule for rule in _builtin_rules()}
    for d in user_dirs:
        if not d.is_dir():
            raise RuleError(f"{d}: rules folder not found")
        files = rule_files(d)
        if not files:
            raise RuleError(f"{d}: no rule files (*.yaml) in this folder")
        for f in files:
            rule = Rule.from_file(f, str(d))
            rules[rule.id] = rule
    return list(rules.values())
