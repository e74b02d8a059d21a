"""Judge: rules read analysis views and turn what they measured into ranked findings."""

from tracedoc.judge.engine import judge
from tracedoc.judge.rule import Rule, load_rules

__all__ = ["Rule", "judge", "load_rules"]
