"""The table of built-in relations (cellspec/core/relations.py) is the one place every
backend, the IR, the rounding analysis and the docs read: these tests hold the places that
cannot import it (builtins.lp, docs/language.md) to it, and pin what is derived from it."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from cellspec.core import ir, relations
from cellspec.solver import checkers
from cellspec.solver.asp import pushdown
from cellspec.solver.formal import common
from cellspec.solver.rounding import ROUNDING_RELATIONS
from cellspec.solver.smt import backend as smt

REPO = Path(__file__).resolve().parent.parent
LP = resources.files("cellspec.solver.asp").joinpath("builtins.lp").read_text("utf-8")
R = relations.BUILTINS


def _program_parts(text: str) -> dict[str, str]:
    """``#program NAME(args).`` -> the text of that part."""
    out: dict[str, str] = {}
    pieces = re.split(r"^#program\s+(\w+)[^.]*\.\s*$", text, flags=re.M)
    for name, body in zip(pieces[1::2], pieces[2::2], strict=True):
        out[name] = body
    return out


def test_every_asp_part_is_named_by_a_relation_and_defines_it():
    parts = _program_parts(LP)
    named = {r.asp for r in R.values() if r.asp}
    assert named == set(parts), "builtins.lp's #program parts and the relations' asp differ"
    for r in R.values():
        if not r.asp:
            continue
        head = "on_surface" if r.name == "on" else r.name  # on(p, s) reads on_surface/2
        assert re.search(rf"^{head}\(", parts[r.asp], re.M), \
            f"#program {r.asp} of builtins.lp defines no {head}/{r.arity} rule"


def test_relations_without_asp_part_are_decided_elsewhere():
    no_part = {r.name for r in R.values() if not r.asp}
    assert no_part == {"before", "stable", "placed_stable", "reachable"}
    assert all(R[n].lp or R[n].reads_order or R[n].grid is not None for n in no_part)


@pytest.mark.parametrize("name", list(R))
def test_meaning_on_the_grid_and_on_shapes(name):
    r = R[name]
    assert r.family in relations.FAMILIES
    assert r.arity == len(ir.RELATIONS[name]) and r.doc == ir.RELATION_DOCS[name]
    if r.family in ("pair", "column", "zone", "surface"):
        assert r.grid is not None and r.shape is not None, name
    if r.family == "zone":
        assert r.half is not None
    if r.lp:
        assert r.grid is None and not r.smt


def test_backends_declare_what_they_support_from_the_table():
    assert smt.RELATIONS == relations.names(lambda r: r.smt)
    assert {n for n in R if n not in smt.RELATIONS} == {"stable", "placed_stable"}
    z3 = checkers.get("z3")
    assert {n for n in R if n not in z3.capabilities} == {"stable", "placed_stable"}
    for name in ("clingo", "reference"):
        assert set(R) <= checkers.get(name).capabilities
    assert common.STABILITY_RELATIONS == {"stable", "placed_stable"}
    assert common.FIXED_ONLY_RELATIONS == {"reachable"}
    assert set(pushdown.PAIR_RELATIONS) == {"contact", "overlaps", "supports", "above", "near"}
    assert set(pushdown.UNARY_RELATIONS) == {"grounded", "stable", "placed_stable", "on",
                                             "inside", "intersects"}
    assert ir.PAIR_RELATIONS == {"contact", "overlaps", "supports", "near", "flanks"}
    assert ir.COLUMN_RELATIONS == {"above"} and ir.ORDER_RELATIONS == {"before",
                                                                       "placed_stable"}


def test_pair_relations_are_decided_in_numpy_and_have_their_own_rounding_check():
    from cellspec.solver.asp.backend import DECIDED

    for r in R.values():
        if r.two_parts:
            assert r.name in DECIDED and r.name in r.rounding, r.name
    assert {r.name for r in R.values() if r.symmetric} == {"contact", "overlaps", "near"}
    assert R["near"].param == "length" and R["flanks"].param == "axis"
    assert R["contact"].param is None and not R["on"].two_parts


def test_rounding_sensitivity_is_the_relations_own():
    stab = {"stable", "placed_stable"}
    assert ROUNDING_RELATIONS == {
        "contact": {"contact"}, "overlaps": {"overlaps"},
        "supports": {"supports", "on", *stab}, "workspace": {"inside"},
        "reachable": {"reachable"}, "near": {"near"},
        "footprint": {"supports", "above", "on", *stab}, "above": {"above"},
        "flanks": {"flanks"}, "inside": {"inside"}, "intersects": {"intersects"},
        "on": {"on", "grounded", *stab}, "comparison": {"<cmp>"}}


def test_moving_refusal_names_the_relation_and_why():
    rule = type("R", (), {"name": "reach", "source": "x.cell:3:1",
                          "body": ir.Rel("reachable", (ir.VarArg("p"), ir.NameArg("arm")))})()
    msg = common.moving_refusal([rule], "robust")
    assert msg == ("unsupported: robust cannot decide rule 'reach' (x.cell:3:1): it uses "
                   "reachable(p, r), whose distance to the robot's base is not linear in the "
                   "parts' positions (check the layout itself with `cellspec check`)")


def test_language_docs_name_every_relation():
    text = (REPO / "docs" / "language.md").read_text(encoding="utf-8")
    missing = [n for n in R if f"{n}(" not in text]
    assert not missing, f"docs/language.md does not describe {missing}"
