"""Run rules against a store: each rule is one SQL query over the analysis view it reads."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from tracedoc.errors import RuleError, first_line
from tracedoc.judge.rule import Rule, mark_kinds
from tracedoc.judge.savings import allocate, empty_claim_owners, facet_owners
from tracedoc.judge.template import TemplateError
from tracedoc.judge.template import fill as template_fill
from tracedoc.report import Evidence, Finding, Scope, Span
from tracedoc.store import Store
from tracedoc.units import report_number

_PARAM = re.compile(r"\$([A-Za-z_]\w*)")


def judge(store: Store, rules: list[Rule], wall_ms: float, overrides: dict[str, dict[str, float]] | None = None,
          rows: Sequence[list[dict[str, Any]]] | None = None) -> list[Finding]:
    """Evaluate every rule that reads an analysis of the store's kinds of input (``applicable``); return the
    findings ranked by estimated saving (largest first). ``rows``: each applicable rule's matching rows, read
    already by its ``rule_reads`` (None: read here)."""
    rules = applicable(store, rules)
    if rows is None:
        rows = store.in_turn(rule_reads(store, rules, overrides))
    judged: list[tuple[Finding, Rule, float]] = []
    absorbing: list[tuple[Finding, str]] = []
    never_critical: set[int] = set()  # findings whose row meets their rule's critical_unless
    for rule, matching in zip(rules, rows, strict=True):
        for row in matching:
            fraction = _number(row.pop("__claim_fraction", 1.0))
            absorbs = row.pop("__absorbs", None)
            held_back = row.pop("__critical_unless", False)
            finding = _finding(rule, row, wall_ms)
            if held_back:
                never_critical.add(id(finding))
            judged.append((finding, rule, 1.0 if fraction is None else fraction))
            if rule.absorbs is not None and absorbs:
                absorbing.append((finding, rule.absorbs.rule))
    owners = _draw_savings(store, judged)
    owners.update(_absorb(absorbing, [f for f, _, _ in judged]))
    for finding, rule, _ in judged:
        _set_saving(finding, rule, wall_ms, id(finding) not in never_critical)
    # findings that save nothing of their own say which finding counts their time: a kernel's facets its primary,
    # a claiming rule with nothing left to claim the finding that took its rank's time
    owners = {**facet_owners([f for f, _, _ in judged]),
              **empty_claim_owners([f for f, rule, _ in judged if rule.claims is not None]), **owners}
    findings = sorted((f for f, _, _ in judged), key=_rank_key)
    number = {id(f): i for i, f in enumerate(findings, 1)}
    for f in findings:
        if id(f) in owners:
            f.part_of = number[owners[id(f)]]
    mark_kinds(findings, [rule for _, rule, _ in judged])
    return findings


def applicable(store: Store, rules: list[Rule]) -> list[Rule]:
    """The rules that read an analysis of the store's kinds of input (Store.applies), in their order."""
    return [rule for rule in rules if store.applies(rule.reads)]


def rule_reads(store: Store, rules: list[Rule], overrides: dict[str, dict[str, float]] | None = None,
               ) -> list[tuple[str, Callable[[], list[dict[str, Any]]]]]:
    """Each rule's read of its analysis (``Store.in_turn``): the module it reads, and the query of the rows that
    meet its condition."""
    return [(rule.reads, functools.partial(_matching_rows, store, rule, rule.bindings(overrides))) for rule in rules]


def _draw_savings(store: Store, judged: list[tuple[Finding, Rule, float]]) -> dict[int, int]:
    """Draw the savings of findings whose rules claim attribution causes from that attribution (judge.savings)."""
    candidates = [(f, rule.claims, fraction) for f, rule, fraction in judged if rule.claims is not None]
    if not candidates:
        return {}
    store.include("efficiency.floor")
    pools = store.query(_POOLS_SQL)
    return allocate(candidates, pools)


# The attribution summed over steps, less the GPU floor (efficiency.floor) on each device's compute kernels: ms is
# what findings may claim, floor_ms what no fix removes.
_POOLS_SQL = """
SELECT a.rank, a.device, a.cause, a.detail,
       (sum(a.ns) - coalesce(any_value(f.floor_ns), 0)) / 1e6 AS ms,
       coalesce(any_value(f.floor_ns), 0) / 1e6 AS floor_ms
FROM attribution_slices a
LEFT JOIN efficiency_floor f ON a.cause = 'gpu_compute' AND a.detail = 'kernels'
     AND f.source_id = a.source_id AND f.device = a.device
GROUP BY a.source_id, a.rank, a.device, a.cause, a.detail
"""


def _absorb(absorbing: list[tuple[Finding, str]], findings: list[Finding]) -> dict[int, int]:
    """Fold each absorbed finding (a link in an absorbing finding's causal chain, on the same rank) into its owner:
    the owner's saving gains the link's (drawn from other causes, so the sum still holds) and the link keeps none.
    Returns ``{id(link): id(owner)}``."""
    folded: dict[int, int] = {}
    for owner, rule_id in absorbing:
        for link in findings:
            if link.rule == rule_id and link.scope.rank == owner.scope.rank and id(link) not in folded:
                owner.impact_ms = round(owner.impact_ms + link.impact_ms, 3)
                owner.drawn_from.extend(c for c in link.drawn_from if c not in owner.drawn_from)
                link.impact_ms = 0.0
                folded[id(link)] = id(owner)
    return folded


def _set_saving(finding: Finding, rule: Rule, wall_ms: float, may_be_critical: bool = True) -> None:
    """The saving's share of the wall time, and the severity it earns (critical_above_pct, unless the rule's
    critical_unless held for the finding's row)."""
    finding.impact_pct = round(100.0 * finding.impact_ms / wall_ms, 2) if wall_ms else 0.0
    finding.severity = rule.severity
    if may_be_critical and rule.critical_above_pct is not None and finding.impact_pct >= rule.critical_above_pct:
        finding.severity = "critical"


def _rank_key(finding: Finding) -> tuple[Any, ...]:
    """Largest saving first; equal savings in a fixed order (rule, then where), whatever order SQL returned. Savings
    in bytes (memory findings) are ranked among themselves, after every saving in time."""
    s = finding.scope
    numbers = tuple((v is None, v or 0) for v in (s.rank, s.device, s.stream, s.step, s.seq))
    names = tuple((v is None, str(v or "")) for v in (s.pg, s.kernel))
    in_bytes = finding.impact_bytes is not None
    return (in_bytes, -finding.impact_ms, -(finding.impact_bytes or 0), finding.rule, numbers, names,
            finding.message)


def _matching_rows(store: Store, rule: Rule, bindings: dict[str, str | float]) -> list[dict[str, Any]]:
    """The rows of the rule's view that meet its condition, with impact, scope and evidence computed; ``$name``
    in its SQL is bound from ``bindings`` (Rule.bindings: its id, params and thresholds)."""
    store.include(rule.reads)
    selects = [f"({rule.impact_ms}) AS __impact_ms"]
    if rule.impact_bytes is not None:
        selects.append(f"({rule.impact_bytes}) AS __impact_bytes")
    selects += [f"({expr}) AS __scope_{key}" for key, expr in rule.scope.items()]
    selects += [f"({e.value}) AS __evidence_{i}" for i, e in enumerate(rule.evidence)]
    if rule.claims is not None and rule.claims.fraction is not None:
        selects.append(f"({rule.claims.fraction}) AS __claim_fraction")
    if rule.absorbs is not None:
        selects.append(f"coalesce(({rule.absorbs.when}), false) AS __absorbs")
    if rule.critical_unless is not None:
        selects.append(f"coalesce(({rule.critical_unless}), false) AS __critical_unless")
    if rule.span is not None:
        selects += [f"({rule.span.start_ms}) AS __span_start_ms", f"({rule.span.dur_ms}) AS __span_dur_ms"]
    selects += [f"coalesce(({cond}), false) AS __reference_{i}" for i, cond in enumerate(rule.references_when.values())]
    sql = f"SELECT *, {', '.join(selects)} FROM {rule.view} WHERE {rule.when}"
    names = set(_PARAM.findall(sql))
    unknown = names - bindings.keys()
    if unknown:
        raise RuleError(f"rule {rule.id}: no threshold or param named {', '.join(sorted(unknown))}")
    from tracedoc.store.engine import duckdb
    try:
        return store.query(sql, {n: bindings[n] for n in names} if names else None)
    except duckdb.Error as exc:
        raise RuleError(f"rule {rule.id} ({rule.source}): {first_line(exc)}") from None


def _finding(rule: Rule, row: dict[str, Any], wall_ms: float) -> Finding:
    """A finding from a matching row, with the rule's own estimate of its saving (drawn later, _draw_savings)."""
    impact_ms = _number(row.pop("__impact_ms")) or 0.0
    impact_bytes = None
    if rule.impact_bytes is not None:
        impact_bytes, impact_ms = max(0, int(_number(row.pop("__impact_bytes")) or 0)), 0.0
    impact_pct = 100.0 * impact_ms / wall_ms if wall_ms else 0.0
    scope = Scope(**{key: row.pop(f"__scope_{key}") for key in rule.scope})
    measured = [report_number(row.pop(f"__evidence_{i}")) for i in range(len(rule.evidence))]
    evidence = [Evidence(spec.name, value, spec.unit)  # a number the trace cannot give is left out
                for spec, value in zip(rule.evidence, measured) if value is not None]
    span = _span(row) if rule.span is not None else None
    references = _references(rule, row)
    values = {k: report_number(v) for k, v in row.items()}
    values.update({"impact_ms": impact_ms, "impact_pct": impact_pct})
    return Finding(rule=rule.id, severity=rule.severity, title=rule.title, message=_fill(rule, rule.message, values),
                   impact_ms=round(impact_ms, 3), impact_pct=round(impact_pct, 2), scope=scope,
                   evidence=evidence, fix=_fill(rule, rule.fix, values), references=references,
                   impact_bytes=impact_bytes, span=span)


def _references(rule: Rule, row: dict[str, Any]) -> list[str]:
    """The rule's references, less those whose condition (``references_when``) does not hold on the row."""
    given = {url for i, url in enumerate(rule.references_when) if row.pop(f"__reference_{i}")}
    return [url for url in rule.references if url not in rule.references_when or url in given]


def _span(row: dict[str, Any]) -> Span | None:
    """The finding's span from its row (rounded as evidence is); None when the trace cannot give both ends or they
    make no span (a negative duration from a user's rule)."""
    start, dur = (report_number(row.pop(f"__span_{end}_ms")) for end in ("start", "dur"))
    if not isinstance(start, int | float) or not isinstance(dur, int | float) or dur < 0:
        return None
    return Span(start, dur)


def _fill(rule: Rule, template: str, values: dict[str, Any]) -> str:
    """Fill the rule's message or fix from the row (tracedoc.judge.template: optional parts, NULL fields)."""
    try:
        return template_fill(template, values)
    except TemplateError as exc:
        raise RuleError(f"rule {rule.id}: bad message template ({exc})") from None


def _number(value: Any) -> float | None:
    """A finite float, or None (NULL, NaN, ±inf)."""
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


