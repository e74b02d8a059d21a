"""Run rules against a store: each rule is one SQL query over the analysis view it reads."""

from __future__ import annotations

import math
import re
from typing import Any

import duckdb

from tracedoc.errors import RuleError, first_line
from tracedoc.judge.rule import Rule
from tracedoc.judge.template import TemplateError
from tracedoc.judge.template import fill as template_fill
from tracedoc.report import Evidence, Finding, Scope
from tracedoc.store import Store

_PARAM = re.compile(r"\$([A-Za-z_]\w*)")


def judge(store: Store, rules: list[Rule], wall_ms: float,
          overrides: dict[str, dict[str, float]] | None = None) -> list[Finding]:
    """Evaluate every rule; return the findings ranked by estimated saving (largest first)."""
    findings: list[Finding] = []
    for rule in rules:
        thresholds = {**rule.thresholds, **(overrides or {}).get(rule.id, {})}
        for row in _matching_rows(store, rule, thresholds):
            findings.append(_finding(rule, row, wall_ms))
    findings.sort(key=_rank_key)
    return findings


def _rank_key(finding: Finding) -> tuple[Any, ...]:
    """Largest saving first; equal savings in a fixed order (rule, then where), whatever order SQL returned."""
    s = finding.scope
    numbers = tuple((v is None, v or 0) for v in (s.rank, s.device, s.stream, s.step, s.seq))
    names = tuple((v is None, str(v or "")) for v in (s.pg, s.kernel))
    return (-finding.impact_ms, finding.rule, numbers, names, finding.message)


def _matching_rows(store: Store, rule: Rule, thresholds: dict[str, float]) -> list[dict[str, Any]]:
    """The rows of the rule's view that meet its condition, with impact, scope and evidence computed."""
    store.include(rule.reads)
    selects = [f"({rule.impact_ms}) AS __impact_ms"]
    selects += [f"({expr}) AS __scope_{key}" for key, expr in rule.scope.items()]
    selects += [f"({e.value}) AS __evidence_{i}" for i, e in enumerate(rule.evidence)]
    sql = f"SELECT *, {', '.join(selects)} FROM {rule.view} WHERE {rule.when}"
    names = set(_PARAM.findall(sql))
    unknown = names - thresholds.keys()
    if unknown:
        raise RuleError(f"rule {rule.id}: no threshold named {', '.join(sorted(unknown))}")
    try:
        return store.query(sql, {n: thresholds[n] for n in names} if names else None)
    except duckdb.Error as exc:
        raise RuleError(f"rule {rule.id} ({rule.source}): {first_line(exc)}") from None


def _finding(rule: Rule, row: dict[str, Any], wall_ms: float) -> Finding:
    impact_ms = _number(row.pop("__impact_ms")) or 0.0
    impact_pct = 100.0 * impact_ms / wall_ms if wall_ms else 0.0
    scope = Scope(**{key: row.pop(f"__scope_{key}") for key in rule.scope})
    values = [_rounded(row.pop(f"__evidence_{i}")) for i in range(len(rule.evidence))]
    evidence = [Evidence(spec.name, value, spec.unit)  # a number the trace cannot give is left out
                for spec, value in zip(rule.evidence, values) if value is not None]
    values = {k: _rounded(v) for k, v in row.items()}
    values.update({"impact_ms": impact_ms, "impact_pct": impact_pct})
    severity = rule.severity
    if rule.critical_above_pct is not None and impact_pct >= rule.critical_above_pct:
        severity = "critical"
    return Finding(rule=rule.id, severity=severity, title=rule.title, message=_fill(rule, rule.message, values),
                   impact_ms=round(impact_ms, 3), impact_pct=round(impact_pct, 2), scope=scope,
                   evidence=evidence, fix=_fill(rule, rule.fix, values), references=rule.references)


def _fill(rule: Rule, template: str, values: dict[str, Any]) -> str:
    """Fill the rule's message or fix from the row (tracedoc.judge.template: optional parts, NULL fields)."""
    try:
        return template_fill(template, values)
    except TemplateError as exc:
        raise RuleError(f"rule {rule.id}: bad message template ({exc})") from None


def _number(value: Any) -> float | None:
    if value is None:
        return None
    f = float(value)
    return None if math.isnan(f) else f


def _rounded(value: Any) -> Any:
    """Floats to 3 decimals for reports; other values as they are."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 3)
    if hasattr(value, "as_integer_ratio") and not isinstance(value, int):
        return round(float(value), 3)
    return value
