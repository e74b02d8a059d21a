"""Rule files as data: a finding's span (where its rule places it on the timeline), written into the report and
read back; rules that extend a shared base, and the values the engine binds in their SQL ($rule_id, params)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import ROOT, SAMPLES
from tracedoc import analyze
from tracedoc.cli import cli
from tracedoc.errors import InputError, RuleError
from tracedoc.judge import load_rules
from tracedoc.judge.files import builtin_folder, builtin_mappings, read_rule, rule_files
from tracedoc.report import Report
from tracedoc.saved import read_report
from tracedoc.words.findings import finding_span

NSYS = SAMPLES / "nsys-torch-h100"
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "no_instruction",
                 "short_scoreboard", "sleeping", "tex_throttle", "wait")


def _write_rule(folder: Path, data: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _gpu_gaps() -> dict[str, object]:
    data = yaml.safe_load((ROOT / "rules" / "gpu-gaps.yaml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def nsys_report() -> Report:
    return analyze([NSYS])


def test_a_finding_lies_where_its_rule_says_whatever_its_evidence_is_called(nsys_report: Report,
                                                                            tmp_path: Path) -> None:
    """nsys-torch-h100's gpu-gaps finding: its span is the longest gap (652 ms, 1,634 ms into the trace). Its
    evidence reworded, it lies there still; its rule without a span, it falls back to its rank's window."""
    (gaps,) = [f for f in nsys_report.findings if f.rule == "gpu-gaps"]
    assert gaps.span is not None
    assert (gaps.span.start_ms, gaps.span.dur_ms) == pytest.approx((1633.704, 652.404))
    window = (100.0, 5000.0)
    assert finding_span(gaps, window, {}, 1.0, 0.0) == pytest.approx((1633.704, 1633.704 + 652.404))

    reworded = _gpu_gaps()
    reworded["evidence"] = [{**e, "name": f"the {e['name']}"} for e in reworded["evidence"]]
    _write_rule(tmp_path / "reworded", reworded)
    (again,) = [f for f in analyze([NSYS], rules_dirs=[tmp_path / "reworded"]).findings if f.rule == "gpu-gaps"]
    assert again.span == gaps.span and "longest gap starts after" not in {e.name for e in again.evidence}

    unplaced = {k: v for k, v in _gpu_gaps().items() if k != "span"}
    _write_rule(tmp_path / "unplaced", unplaced)
    (bare,) = [f for f in analyze([NSYS], rules_dirs=[tmp_path / "unplaced"]).findings if f.rule == "gpu-gaps"]
    assert bare.span is None and bare.evidence == gaps.evidence
    assert finding_span(bare, window, {}, 1.0, 0.0) == window


def test_the_span_is_part_of_the_json_report(nsys_report: Report, tmp_path: Path) -> None:
    """Only findings whose rules declare a span carry one; a saved report reads it back, and a span lacking an
    end is refused as bad input."""
    data = json.loads(nsys_report.to_json())
    spans = {f["rule"]: f.get("span") for f in data["findings"]}
    assert spans["gpu-gaps"] == {"start_ms": 1633.704, "dur_ms": 652.404}
    assert all(span is None for rule, span in spans.items() if rule != "gpu-gaps")
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(data))
    assert [f.span for f in read_report(saved).findings] == [f.span for f in nsys_report.findings]
    gaps = next(f for f in data["findings"] if f["rule"] == "gpu-gaps")
    gaps["span"] = {"start_ms": 1.0}
    saved.write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"findings\[\d+\]\.span\.dur_ms"):
        read_report(saved)


@pytest.mark.parametrize("span", [{"start_ms": "ts_ns / 1e6"}, "ts_ns", {"start_ms": "a", "dur_ms": ""},
                                  {"start_ms": "a", "dur_ms": "b", "end_ms": "c"}])
def test_a_malformed_span_is_refused(tmp_path: Path, span: object) -> None:
    _write_rule(tmp_path, {**_gpu_gaps(), "span": span})
    with pytest.raises(RuleError, match=r"gpu-gaps\.yaml: span needs start_ms and dur_ms"):
        load_rules([tmp_path])


def test_the_warp_stall_rules_share_one_base() -> None:
    """Each warp-stall-<reason> file gives its id, reason, title, message and fix and takes the rest from
    rules/_warp-stall.yaml, which is no rule itself; the ids, a public contract, are as before."""
    rules = {r.id: r for r in load_rules()}
    stalls = [r for r in rules.values() if r.id.startswith("warp-stall-")]
    assert sorted(r.id for r in stalls) == [f"warp-stall-{reason.replace('_', '-')}" for reason in STALL_REASONS]
    assert not any(r.id.startswith("_") for r in rules.values())
    assert {r.id: r.params for r in stalls} == {
        f"warp-stall-{reason.replace('_', '-')}": {"reason": reason} for reason in STALL_REASONS}
    base = yaml.safe_load((ROOT / "rules" / "_warp-stall.yaml").read_text())
    for rule in stalls:
        assert (rule.view, rule.when, rule.thresholds, rule.scope) == (base["view"], base["when"],
                                                                       base["thresholds"], base["scope"])
        assert [e.value for e in rule.evidence] == [e["value"] for e in base["evidence"]]
        assert len({rule.title, rule.message, rule.fix} & {r.title for r in stalls if r is not rule}) == 0
    assert not any(f"'{r.id}'" in " ".join([r.view, r.when, *(e.value for e in r.evidence)])
                   for r in rules.values())  # no rule spells its own id in its SQL
    shown = CliRunner().invoke(cli, ["rules", "warp-stall-long-scoreboard"]).output
    assert "fires when: reason = $reason AND" in shown and "param reason = 'long_scoreboard'" in shown


def test_an_extending_rule_binds_its_own_id_and_params(tmp_path: Path) -> None:
    """nsys-torch-h100: a user rule extending gpu-gaps fires where it does, over the same span, with its own
    evidence (the child's keys win) naming its own id ($rule_id) and its param ($why)."""
    folder = tmp_path / "rules"
    _write_rule(folder, {"extends": "gpu-gaps", "id": "long-stops", "params": {"why": "checkpoint"},
                         "evidence": [{"name": "judged by", "value": "$rule_id"},
                                      {"name": "because of", "value": "$why"}]})
    rule = next(r for r in load_rules([folder]) if r.id == "long-stops")
    assert rule.thresholds == {"min_gap_ms": 500} and rule.title == "The GPU stops for long stretches"
    findings = analyze([NSYS], rules_dirs=[folder]).findings
    (ours,) = [f for f in findings if f.rule == "long-stops"]
    (theirs,) = [f for f in findings if f.rule == "gpu-gaps"]
    assert [(e.name, e.value) for e in ours.evidence] == [("judged by", "long-stops"), ("because of", "checkpoint")]
    assert (ours.span, ours.scope, ours.message) == (theirs.span, theirs.scope, theirs.message)


def test_a_base_in_a_user_folder_is_no_rule(tmp_path: Path) -> None:
    """A user base (leading underscore) is merged into the rules that extend it, key by key, and never loaded as a
    rule; a folder holding only bases holds no rules."""
    gaps = _gpu_gaps()
    (tmp_path / "_gaps.yaml").write_text(yaml.safe_dump({k: v for k, v in gaps.items() if k not in ("id", "title")}))
    _write_rule(tmp_path, {"extends": "_gaps", "id": "long-stops", "title": "Long stops",
                           "thresholds": {"min_gap_ms": 100}})
    loaded = {r.id: r for r in load_rules([tmp_path]) if r.source == str(tmp_path)}
    assert set(loaded) == {"long-stops"}
    assert loaded["long-stops"].thresholds == {"min_gap_ms": 100}
    assert loaded["long-stops"].evidence == next(r for r in load_rules() if r.id == "gpu-gaps").evidence
    (tmp_path / "long-stops.yaml").unlink()
    with pytest.raises(RuleError, match="no rule files"):
        load_rules([tmp_path])


def test_a_user_rule_extends_the_built_in_rule_of_its_own_id(tmp_path: Path) -> None:
    """A user's gpu-gaps.yaml with `extends: gpu-gaps` takes the built-in rule and changes what it gives: the way to
    adjust a built-in rule without copying it."""
    _write_rule(tmp_path, {"extends": "gpu-gaps", "id": "gpu-gaps", "severity": "critical"})
    built_in = next(r for r in load_rules() if r.id == "gpu-gaps")
    mine = next(r for r in load_rules([tmp_path]) if r.id == "gpu-gaps")
    assert (mine.source, mine.severity) == (str(tmp_path), "critical") and built_in.severity != "critical"
    assert (mine.when, mine.evidence, mine.thresholds) == (built_in.when, built_in.evidence, built_in.thresholds)


@pytest.mark.parametrize(("references_when", "message"), [
    ({"https://example.org/other": "true"}, r"references_when names https://example\.org/other, which is not among"),
    ({"https://example.org/a": ""}, r"references_when needs a SQL condition for each reference"),
    ({"https://example.org/a": "true; SELECT 1"}, r"references_when\[https://example\.org/a\] must be one SQL"),
])
def test_a_malformed_references_when_is_refused(tmp_path: Path, references_when: dict[str, str],
                                                message: str) -> None:
    """A reference's condition names one of the rule's references and is one SQL expression."""
    _write_rule(tmp_path, {"extends": "gpu-gaps", "id": "gpu-gaps", "references": ["https://example.org/a"],
                           "references_when": references_when})
    with pytest.raises(RuleError, match=message):
        load_rules([tmp_path])


def test_a_bad_message_template_is_refused_when_the_rule_loads(tmp_path: Path) -> None:
    _write_rule(tmp_path, {"extends": "gpu-gaps", "id": "gpu-gaps", "message": "Gap[[ of {gap_ms}[[ ms]]]]"})
    with pytest.raises(RuleError, match=r"gpu-gaps\.yaml: bad message template \(optional parts"):
        load_rules([tmp_path])


@pytest.mark.parametrize(("files", "message"), [
    ({"odd-one": {"extends": "_nowhere", "id": "odd-one"}},
     r"odd-one\.yaml: extends '_nowhere', but there is no _nowhere\.yaml beside it or among the built-in rules"),
    ({"odd-one": {"extends": "_b", "id": "odd-one"}, "_b": {"extends": "odd-one"}},
     r"odd-one\.yaml: extends goes round in a circle \(odd-one → _b → odd-one\)"),
    ({"odd-one": {"extends": "odd-one", "id": "odd-one"}},
     r"odd-one\.yaml: extends 'odd-one', but there is no odd-one\.yaml beside it or among the built-in rules"),
    ({"odd-one": {"extends": ["_b"], "id": "odd-one"}}, r"odd-one\.yaml: extends names a base by its file name"),
])
def test_a_missing_base_or_a_circle_is_one_line(tmp_path: Path, files: dict[str, dict[str, object]],
                                                message: str) -> None:
    for name, data in files.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(RuleError, match=message):
        load_rules([tmp_path])
    result = CliRunner().invoke(cli, ["analyze", str(NSYS), "--rules", str(tmp_path)])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "extends" in result.stderr


@pytest.mark.parametrize(("params", "message"), [
    ({"min_gap_ms": 3}, r"param 'min_gap_ms' is already a threshold's name"),
    ({"rule_id": "x"}, r"param 'rule_id' is already a threshold's name or the rule's id"),
    ({"reason": True}, r"params needs names, each with a text or a number"),
    (["reason"], r"params needs names, each with a text or a number"),
])
def test_params_may_not_hide_a_threshold_or_the_id(tmp_path: Path, params: object, message: str) -> None:
    _write_rule(tmp_path, {**_gpu_gaps(), "params": params})
    with pytest.raises(RuleError, match=message):
        load_rules([tmp_path])


def test_the_engine_binds_the_id_params_and_thresholds() -> None:
    """What a rule's SQL may name: its id, its params and its thresholds as --set leaves them."""
    rule = next(r for r in load_rules() if r.id == "warp-stall-wait")
    assert rule.bindings({"warp-stall-wait": {"max_rank": 3}, "gpu-gaps": {"min_gap_ms": 1}}) == {
        "rule_id": "warp-stall-wait", "reason": "wait", "min_share_pct": 25.0, "max_rank": 3}


def test_a_count_reads_singular_or_plural_and_one_full_stop_ends_a_sentence() -> None:
    """`{n:plural one|many}` writes '1 launch' and '1,204 launches' (no 'launch(es)'); a value that ends with its
    own full stop before the template's leaves one ('steps.', not 'steps..'), while an ellipsis and '../' stay."""
    from tracedoc.judge.template import fill
    template = "{n:plural profiled launch|profiled launches}; stops {m:plural time|times}. {why}. See ../x ..."
    assert fill(template, {"n": 1, "m": 1204, "why": "over 3 steps."}) == \
        "1 profiled launch; stops 1,204 times. over 3 steps. See ../x ..."
    assert fill("{n:plural launch|launches}", {"n": 2}) == "2 launches"


def test_rules_command_describes_a_fix_the_trace_fills_in() -> None:
    """launch-bound's fix is `{fix_text}`, written per trace by gpu.launch: `tracedoc rules launch-bound` says where
    it comes from instead of printing the placeholder; sync-memset's fix keeps its text and names its field."""
    from click.testing import CliRunner

    from tracedoc.cli import cli
    out = CliRunner().invoke(cli, ["rules", "launch-bound"], env={"COLUMNS": "300"}).output
    assert "{fix_text}" not in out
    assert ("fix: written for each finding from what the trace shows: the column fix_text of gpu_launch_overhead, "
            "in tracedoc/analyses/gpu/launch.sql") in out
    out = CliRunner().invoke(cli, ["rules", "sync-memset"], env={"COLUMNS": "300"}).output
    assert "fix: Use cudaMemsetAsync on a stream" in out
    assert "{pytorch_note} is filled from the trace: the column pytorch_note of host_blocking_by_rank" in out


def test_the_built_in_rules_are_kept_between_runs_as_read(tmp_path: Path) -> None:
    """The built-in rules come back from the cache as their YAML reads; a damaged cache file is read past and
    written anew."""
    files = rule_files(builtin_folder())
    fresh = [read_rule(f) for f in files]
    assert builtin_mappings(files, tmp_path) == fresh
    [kept] = tmp_path.glob("rules-*.json")
    assert json.loads(kept.read_text()) == fresh
    assert builtin_mappings(files, tmp_path) == fresh
    kept.write_text('[{"id": "cut')
    assert builtin_mappings(files, tmp_path) == fresh and json.loads(kept.read_text()) == fresh
    assert builtin_mappings(files, None) == fresh
