"""`tracedoc rules`: list the rules, or show one in full."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from tracedoc.cli.errors import BadInput, one_line_errors
from tracedoc.cli.options import parse_settings, rules_option, set_option
from tracedoc.cli.terminal import table_console
from tracedoc.judge import Rule, load_rules
from tracedoc.judge.template import fields


@click.command("rules")
@click.argument("rule_id", required=False)
@rules_option
@set_option()
@one_line_errors
def rules_command(rule_id: str | None, rules_dirs: tuple[Path, ...], settings: tuple[str, ...]) -> None:
    """List the rules tracedoc applies, or show one rule's thresholds (with --set: as they would be), when it
    becomes critical, its fix and references.

    Example:

        tracedoc rules

        tracedoc rules launch-bound --set launch-bound.min_idle_pct=25
    """
    rules = load_rules(rules_dirs)
    overrides = parse_settings(settings, rules)
    console = table_console()
    if rule_id is None:
        table = Table("rule", "severity", "title", "reads", "source", box=None, header_style="bold")
        for r in sorted(rules, key=lambda r: r.id):
            table.add_row(r.id, r.severity, r.title, r.reads, r.source)
        console.print(table)
        return
    rule = next((r for r in rules if r.id == rule_id), None)
    if rule is None:
        raise BadInput(f"no rule '{rule_id}' (see `tracedoc rules`)")
    console.print(f"[bold]{rule.id}[/bold] ({rule.severity}, {rule.source}): {rule.title}")
    console.print(f"reads: {rule.reads} → {rule.view}")
    console.print(f"fires when: {rule.when}")
    for name, fixed in rule.params.items():
        console.print(f"  param {name} = {fixed!r}" if isinstance(fixed, str) else f"  param {name} = {fixed:g}")
    set_here = overrides.get(rule.id, {})
    for name, value in rule.thresholds.items():
        if name in set_here:
            console.print(f"  threshold {name} = {set_here[name]:g}  (set; default {value:g})")
        else:
            console.print(f"  threshold {name} = {value:g}  (override: --set {rule.id}.{name}=…)")
    if rule.critical_above_pct is not None:
        unless = f", unless {rule.critical_unless}" if rule.critical_unless else ""
        console.print(f"severity: {rule.severity}; critical when the saving is at least "
                      f"{rule.critical_above_pct:g} % of wall time{unless}")
    console.print(f"estimated saving (ms): {rule.impact_ms}")
    for line in fix_lines(rule):
        console.print(line, markup=False, highlight=False)
    for ref in rule.references:
        when = f"  (where {rule.references_when[ref]})" if ref in rule.references_when else ""
        console.print(f"  see {ref}{when}", markup=False, highlight=False)


def fix_lines(rule: Rule) -> list[str]:
    """A rule's fix as `tracedoc rules` shows it: the text, or, where the trace fills it in (a ``{column}`` of the
    rule's view), what fills it, since no trace is at hand to fill it from."""
    names = sorted(fields(rule.fix))
    if not names:
        return [f"fix: {rule.fix}"]
    source = f"{rule.view}, in tracedoc/analyses/{rule.reads.replace('.', '/')}.sql"
    if rule.fix.strip() in {f"{{{name}}}" for name in names}:
        return [f"fix: written for each finding from what the trace shows: the column {names[0]} of {source}"]
    return [f"fix: {rule.fix}", *(f"  {{{name}}} is filled from the trace: the column {name} of {source}"
                                   for name in names)]
