"""The word enums of rule severities, diff relations, the baseline gate, lint findings and
clingo's preference bound: each member is its old word, so JSON, text and JUnit outputs are
the same bytes as with the plain strings they replace."""

from __future__ import annotations

import json

import pytest

from cellspec import load_cell
from cellspec.core.severity import Severity
from cellspec.core.status import Status
from cellspec.solver.asp.prefer import Bound
from cellspec.solver.formal.diff import RELATIONS, DiffRelation, RuleDiff, SideState
from cellspec.solver.result import Violation
from cellspec.solver.smt.result import FindingKind, LintFinding
from cellspec.testing.baseline import (
    Baseline,
    BaselineFinding,
    FileBaseline,
    FileOutcome,
    Gate,
    pretty,
    with_junit,
)

CELL = """
cell c {
    units m
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.1, 0.1, 0.1) mass 0.1
}
rule e "e" : forall p: p.x <= 0.9
rule w "w" severity warning : forall p: p.x <= 0.8
rule p "p" severity preference weight 2 : forall p: p.x <= 0.5
"""

WORDS = {Severity: ["error", "warning", "preference"],
         DiffRelation: ["equivalent", "stricter", "looser", "incomparable", "unknown"],
         SideState: ["found", "none", "unknown"],
         Gate: ["ok", "allowed", "fail", "unknown"],
         FileOutcome: ["passed", "failed", "unknown", "new", "library", "not comparable"],
         FindingKind: ["inconsistent", "never_fires", "implied", "unknown",
                       "preference_never_met", "preference_conflict"]}


@pytest.mark.parametrize("enum", list(WORDS), ids=lambda e: e.__name__)
def test_every_member_is_its_word(enum: type) -> None:
    assert [m.value for m in enum] == WORDS[enum]
    for m in enum:
        assert str(m) == f"{m}" == format(m) == m.value and json.dumps(m) == f'"{m.value}"'
        assert m == m.value and hash(m) == hash(m.value) and enum(m.value) is m


def test_diff_relations_keep_their_order() -> None:
    assert RELATIONS == ("equivalent", "stricter", "looser", "incomparable", "unknown")


def test_rule_and_violation_severities_are_the_enum(tmp_path) -> None:
    f = tmp_path / "c.cell"
    f.write_text(CELL)
    cell = load_cell(str(f))
    assert [r.severity for r in cell.rules] == [Severity.ERROR, Severity.WARNING,
                                                Severity.PREFERENCE]
    assert all(type(r.severity) is Severity for r in cell.rules)
    v = Violation(rule="w", parts=("cube1",), message="m", source="s", severity="warning")
    assert v.severity is Severity.WARNING
    assert json.loads(v.model_dump_json())["severity"] == "warning"
    assert Violation(rule="e", parts=(), message="m", source="s").severity is Severity.ERROR


def test_rule_diff_json_has_the_words() -> None:
    d = RuleDiff("r", relation=DiffRelation.LOOSER, severity=(Severity.ERROR, Severity.WARNING))
    assert json.dumps(d.to_json()) == json.dumps(
        RuleDiff("r", relation="looser", severity=("error", "warning")).to_json())  # old words
    assert d.old_only.state is SideState.NONE


def test_bound_json_has_the_status_word() -> None:
    b = Bound(Status.OPTIMAL, violated=1, total=3)
    assert json.dumps(b.to_json()) == ('{"status": "optimal", "step_m": 0.0, "positions": 0, '
                                       '"total": 3, "violated": 1, "met": 2}')


def test_lint_finding_kind_is_coerced_and_dumped() -> None:
    f = LintFinding(kind="implied", message="m")  # pydantic coerces the word
    assert f.kind is FindingKind.IMPLIED and f.to_json()["kind"] == "implied"
    assert json.dumps(f.to_json()) == '{"kind": "implied", "message": "m", "rules": []}'


def _baseline(words: bool) -> Baseline:
    """The same baseline with enum members (``words`` False) or the plain old strings."""
    w = (lambda e: e.value) if words else (lambda e: e)
    fin = BaselineFinding("r", w(DiffRelation.LOOSER), w(Gate.FAIL), "rule r is looser")
    files = [FileBaseline("a.cell", w(FileOutcome.FAILED), w(DiffRelation.LOOSER), [fin]),
             FileBaseline("b.cell", w(FileOutcome.UNKNOWN), w(DiffRelation.UNKNOWN),
                          [BaselineFinding("*", "unknown", w(Gate.UNKNOWN), "not decided")]),
             FileBaseline("c.cell", w(FileOutcome.PASSED), w(DiffRelation.STRICTER)),
             FileBaseline("d.cell", w(FileOutcome.NOT_COMPARABLE)),
             FileBaseline("e.cell", w(FileOutcome.FAILED))]
    return Baseline("HEAD", 3, files, 1)


def test_baseline_outputs_are_the_same_bytes() -> None:
    new, old = _baseline(False), _baseline(True)
    assert new.failed and new.unknown
    assert pretty(new) == pretty(old)
    assert json.dumps(new.to_json()) == json.dumps(old.to_json())
    xml = '<?xml version="1.0"?>\n<testsuites><testsuite name="t"/></testsuites>'
    assert with_junit(xml, new) == with_junit(xml, old)
    assert 'message="failed"' in with_junit(xml, new)  # a file without findings: its outcome
