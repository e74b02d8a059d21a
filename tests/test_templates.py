"""Rule message templates (tracedoc/judge/template.py): optional parts are dropped whole when a field is NULL, and
a template whose parts nest or do not close is refused, for every built-in rule and for a made-up one."""

from __future__ import annotations

import pytest

from tracedoc.judge import load_rules
from tracedoc.judge.template import TemplateError, fields, fill


def test_an_optional_part_is_dropped_whole_when_a_field_is_null() -> None:
    template = "Peak {peak:bytes}[[ in step {step}]][[, inside {op}]]."
    assert fill(template, {"peak": 1 << 20, "step": 3, "op": None}) == "Peak 1.0 MiB in step 3."
    assert fill(template, {"peak": 1 << 20, "step": None, "op": "aten::mm"}) == "Peak 1.0 MiB, inside aten::mm."


@pytest.mark.parametrize("template", ["a[[ b[[ {c}]] d]] e", "a[[ {b}", "a {b}]] c"])
def test_nested_or_unclosed_optional_parts_are_refused(template: str) -> None:
    with pytest.raises(TemplateError, match="cannot nest"):
        fill(template, {"b": 1, "c": 2})


def test_every_built_in_template_fills_with_its_fields_missing() -> None:
    for rule in load_rules(()):
        for template in (rule.message, rule.fix):
            filled = fill(template, dict.fromkeys(fields(template)))
            assert "[[" not in filled and "]]" not in filled, (rule.id, filled)
