"""The literals the clingo backend leaves to the numpy kernel (asp/pushdown.py, decide.py):
selections (a pair relation with the comparisons and order literals on its two parts),
projections (exists q: R(q, p)) and one-part conjunctions must mean what the reference
says, on random layouts; the standard rules must reach clingo without box/7 or one atom
per part."""

from __future__ import annotations

import pytest
from conftest import FEATURES
from hypothesis import given, settings
from test_differential import SETTINGS, assert_same, layouts, to_obj

import cellspec
from cellspec.solver.asp.compile import compile_rules

RULES = '''
rule held "{p} rests on nothing" : forall p: grounded(p) or exists q: supports(q, p)
rule lower_first "{p} {q}" : forall p, q: contact(p, q) and p.bottom < q.bottom implies before(p, q)
rule taller_near "{p}" :
    forall p: (exists q: near(q, p, 0.002) and q.top > p.top + 0.01) implies p.type == cube
rule stable_in "{p}" : forall p: not stable(p) or inside(p, workspace) or p.gripper == vacuum
rule few_over "{p}" : forall p: count(q: supports(p, q) and q.z > p.z) <= 1
rule covered "{p}" : forall p: (exists q: above(q, p)) implies not on(p, table)
rule leaning "{p}" : forall p: exists q: supports(q, p) or overlaps(p, q)
rule early "{p}" : forall p: p.top <= 0.2 or exists q: contact(p, q) and before(q, p)
rule stages_grounded "{p}" : forall p: placed_stable(p) or not grounded(p)
rule shown "{p} {q}" :
    forall p, q: contact(p, q) implies (exists r: supports(r, p)) or p.bottom > q.bottom
rule apart_x "{p} {q}" : forall p, q: p.x - q.x < 0.3
'''


def _cell(tmp_path):
    text = FEATURES.read_text().split("\nrule ", 1)[0] + "\n" + RULES
    path = tmp_path / "pushdown.cell"
    path.write_text(text)
    return cellspec.load_cell(str(path))


@pytest.fixture(scope="module")
def pushdown_cell(tmp_path_factory):
    return _cell(tmp_path_factory.mktemp("pushdown"))


def test_each_path_is_taken(pushdown_cell):
    """Each rule above goes the way it is meant to (else the differential test below
    would not exercise what it is named for)."""
    rules = {r.name: r for r in pushdown_cell.rules}
    names = list(rules)
    prog = compile_rules(tuple(rules.values()), 2, 140)
    text = {r.name: r.text for r in prog.rules}
    assert "usel_" in text["held"] and "supports" not in text["held"]
    assert "sel_" in text["lower_first"] and "box(" not in text["lower_first"]
    assert "usel_" in text["taller_near"] and "usel_" in text["early"]
    assert "sel_" in text["few_over"] and "#count" in text["few_over"]
    assert "not_stable" not in text["stable_in"] and "usel_" in text["stable_in"]
    assert any(p.startswith(f"aux_{names.index('shown')}_") for p in prog.shown_projections)
    assert "box(" in text["apart_x"]  # two parts joined by nothing: the comparison stays
    assert prog.needs_box


def test_standard_rules_reach_clingo_as_few_atoms(pushdown_cell):
    """The standard physical rules read no box/7 and no fact per part."""
    std = tuple(r for r in pushdown_cell.rules if r.source.file.endswith("physical.cell"))
    assert {r.name for r in std} >= {"workspace", "gravity", "support_order", "stability"}
    prog = compile_rules(std, 2, 140)
    assert not prog.needs_box
    assert all(" part(" not in r.text and ":- part(" not in r.text for r in prog.rules)


@settings(max_examples=250, **SETTINGS)
@given(layouts())
def test_pushdown_agrees_with_reference(pushdown_cell, case):
    parts, order = case
    assert_same(pushdown_cell, to_obj(parts, order))
