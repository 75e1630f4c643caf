"""Issue 28 item 4: a stability LP that GLOP cannot solve is retried, its true status is
reported, and an undecided structure never hides the violations found elsewhere.

``data/stability/dense_heap_abnormal.json`` is a seeded dense heap (10 parts on a 25 mm
lattice, edges 0.05-0.1 mm apart; /tmp search over 600 heaps: 49 were undecided on main
a9a49c7, every one GLOP's dual simplex returning ABNORMAL at once) in the benchmark's cell
(``tests/structure_families.py``). Its LPs carry lever arms of 5.6e-17 m (float round-off
of exact zeros): with them GLOP returns ABNORMAL; dropped (``TINY``) or retried another
way, every LP is decided.
"""

from __future__ import annotations

import json

import pytest
from conftest import DATA, write_cell
from structure_families import cell_text, load_cell_variant

from cellspec.cli import main
from cellspec.core.status import Reason
from cellspec.layout import layout_from_obj, load_layout
from cellspec.solver import stability as stab
from cellspec.solver import stability_lp as lp
from cellspec.solver.instance import build_instance
from cellspec.solver.verify import check

HEAP = DATA / "stability" / "dense_heap_abnormal.json"
HEAP_VIOLATIONS = [("support_order", ("p5", "p1")), ("support_order", ("p7", "p5")),
                   ("stability", ("p3",)), ("stability", ("p4",)), ("stability", ("p6",)),
                   ("stability", ("p8",)), ("stability_stages", ("p1",))]


@pytest.fixture(scope="module")
def cell():
    return load_cell_variant()


def _found(v) -> list[tuple[str, tuple[str, ...]]]:
    return [(x.rule, x.parts) for x in v.violations]


def test_heap_is_decided(cell):
    """Main said unknown (grounding limit) with no violation; now every LP is decided."""
    v = check(cell, load_layout(HEAP))
    assert v.verdict == "fail" and v.reason_code is None
    assert _found(v) == HEAP_VIOLATIONS
    assert not any("undecided" in n for n in v.notes)


def test_abnormal_is_retried(cell, monkeypatch):
    """With the round-off coefficients kept, GLOP's first solve returns ABNORMAL; a retry
    (GLOP with presolve) decides, and the verdict is the one without them."""
    monkeypatch.setattr(lp, "TINY", 0.0)
    before = lp.ATTEMPTS[0]
    v = check(cell, load_layout(HEAP))
    assert lp.ATTEMPTS[0] > before  # some LP needed a retry
    assert v.verdict == "fail" and _found(v) == HEAP_VIOLATIONS
    assert not any("undecided" in n for n in v.notes)


def test_same_verdict_with_highs(cell, monkeypatch):
    """A differential check of the LP: HiGHS first gives the same violations."""
    monkeypatch.setattr(lp, "SOLVER", "highs")
    assert _found(check(cell, load_layout(HEAP))) == HEAP_VIOLATIONS


def test_abnormal_status_and_reason(cell, monkeypatch):
    """No retry and the round-off kept: the structure's limit names ABNORMAL and its code
    is a solver failure (it was 'did not finish within 2 s', grounding limit)."""
    monkeypatch.setattr(lp, "TINY", 0.0)
    monkeypatch.setattr(lp, "RETRIES", ())
    with pytest.raises(stab.StabilityLimit) as exc:
        stab.report(build_instance(cell, load_layout(HEAP)))
    assert exc.value.reason is Reason.SOLVER_FAILURE
    assert "the LP solver returned ABNORMAL (GLOP dual simplex)" in str(exc.value)
    assert "did not finish" not in str(exc.value)


def test_undecided_structure_keeps_the_violations(cell, monkeypatch):
    """The same undecided structure in check: fail with every violation found and a note
    naming the structure and the solver's status."""
    monkeypatch.setattr(lp, "TINY", 0.0)
    monkeypatch.setattr(lp, "RETRIES", ())
    v = check(cell, load_layout(HEAP))
    assert v.verdict == "fail" and _found(v) == HEAP_VIOLATIONS
    notes = [n for n in v.notes if "undecided" in n]
    assert notes == ["stability: the stability of the structure of p0, p1, p3, p4, p5, p6 "
                     "(6 parts) after step 7 is undecided: the stability LP of a structure "
                     "of 6 parts could not be solved: the LP solver returned ABNORMAL (GLOP "
                     "dual simplex); the violations listed hold whatever it does"]


# A beam on two pillars (one LP structure) and, in the five-cube variant, a cube floating
# 5 cm above the table: issue 28's case. The LP's time limit forced to a nanosecond makes
# the structure undecided through a real solver limit.
BRIDGE = [{"id": "pl", "type": "cube", "pos": [0.40, 0.275, 0.025]},
          {"id": "pr", "type": "cube", "pos": [0.50, 0.275, 0.025]},
          {"id": "beam", "type": "beam15", "pos": [0.45, 0.275, 0.06]},
          {"id": "top", "type": "cube", "pos": [0.45, 0.275, 0.095]}]
FLOAT = {"id": "fl", "type": "cube", "pos": [0.30, 0.15, 0.075]}


def _layout(parts: list[dict]):
    obj = {"units": "m", "parts": [{**p, "gripper": "vacuum"} for p in parts]}
    return layout_from_obj(obj, "<bridge>")


def test_time_limit_alone_is_unknown(cell, monkeypatch):
    monkeypatch.setattr(stab, "LP_TIME_LIMIT_S", 1e-9)
    v = check(cell, _layout(BRIDGE))
    assert v.verdict == "unknown" and v.reason_code == Reason.TIME_LIMIT
    assert v.violations == ()
    assert v.reason == ("stability limit: the stability of the structure of pl, pr, beam, "
                        "top (4 parts) is undecided: the stability LP of a structure of 4 "
                        "parts did not finish within 1e-09 s (GLOP dual simplex NOT_SOLVED)")
    monkeypatch.setattr(stab, "LP_TIME_LIMIT_S", 2.0)
    assert check(cell, _layout(BRIDGE)).verdict == "pass"  # decided, it stands


def test_floating_cube_fails_beside_an_undecided_structure(cell, monkeypatch, tmp_path_factory,
                                                           capsys):
    """Five cubes, one floating 5 cm: fail (exit 1) with gravity(fl) and the note."""
    monkeypatch.setattr(stab, "LP_TIME_LIMIT_S", 1e-9)
    v = check(cell, _layout([*BRIDGE, FLOAT]))
    assert v.verdict == "fail" and v.reason_code is None
    assert _found(v) == [("gravity", ("fl",))]
    assert any(n.startswith("stability: the stability of the structure of pl, pr, beam, top "
                            "(4 parts) is undecided") for n in v.notes)
    cell_file = write_cell(tmp_path_factory, cell_text(), "physics_agreement.cell")
    lay = tmp_path_factory.mktemp("lay") / "five.json"
    lay.write_text(json.dumps({"units": "m", "parts": [{**p, "gripper": "vacuum"}
                                                       for p in [*BRIDGE, FLOAT]]}))
    capsys.readouterr()
    assert main(["check", str(cell_file), str(lay), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "fail" and [x["rule"] for x in out["violations"]] == ["gravity"]
    assert any("undecided" in n for n in out["notes"])


def test_rule_reading_not_stable_claims_only_what_is_certain(monkeypatch, tmp_path_factory):
    """A rule violated by parts that stand: for the undecided bridge that is not known, so
    it is not claimed; for the floating cube (held fixed: stable) it is."""
    from cellspec.dsl.parser import load_cell

    text = cell_text() + '\nrule all_fall "{p} stands" :\n    forall p: not stable(p)\n'
    cell = load_cell(write_cell(tmp_path_factory, text, "physics_agreement.cell"))
    monkeypatch.setattr(stab, "LP_TIME_LIMIT_S", 1e-9)
    v = check(cell, _layout([*BRIDGE, FLOAT]))
    assert v.verdict == "fail" and sorted(_found(v)) == [("all_fall", ("fl",)),
                                                         ("gravity", ("fl",))]
    monkeypatch.setattr(stab, "LP_TIME_LIMIT_S", 2.0)
    assert len(check(cell, _layout([*BRIDGE, FLOAT])).violations) == 6  # decided: all stand
