"""What the two Nsight Compute readers (``.ncu-rep`` and CSV) produce: profiled launches with their metrics."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Metric:
    """One metric of one launch, in ncu's base unit; text metrics carry ``text`` and no value."""

    name: str
    value: float | None
    unit: str
    text: str | None


@dataclass
class RuleResult:
    """One message of ncu's own guided analysis, as stored in the report."""

    rule_id: str
    rule_name: str
    section: str
    type: str
    title: str
    message: str
    speedup_pct: float | None
    speedup_type: str | None


@dataclass
class Launch:
    """One profiled kernel launch."""

    launch_id: int
    name: str
    demangled_name: str
    device: int | None
    compute_capability: str | None
    context: int | None
    stream: int | None
    grid: str | None
    block: str | None
    metrics: list[Metric] = field(default_factory=list)
    rules: list[RuleResult] = field(default_factory=list)


_ANONYMOUS = re.compile(r"\((anonymous namespace|unnamed namespace)\)")


def short_name(demangled: str) -> str:
    """The bare function name of a demangled kernel signature.

    'void at::<unnamed>::foo_kernel<float, 4>(int, T3)' → 'foo_kernel'; 'nvjet_sm90_tst_…' stays as it is.
    Template arguments and parameter lists are skipped by bracket depth, so nested lambdas and '>>' do not confuse it.
    """
    text = _ANONYMOUS.sub("anonymous", demangled.strip())
    top, depth = [], 0
    for ch in text:
        if ch == "(" and depth == 0 and top and "".join(top).strip():
            break  # the parameter list of the function itself
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth > 0:
            depth -= 1
        elif depth == 0:
            top.append(ch)
    words = "".join(top).split()
    name = words[-1].split("::")[-1] if words else ""
    return name or demangled[:200]
