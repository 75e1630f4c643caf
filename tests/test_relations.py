"""The table of built-in relations (cellspec/core/relations.py) is the one place every
backend, the IR, the rounding analysis and the docs read: these tests hold the places that
cannot import it (builtins.lp, docs/language.md) to it, and pin what is derived from it."""

from __future__ import annotations

import re
from fractions import Fraction
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


# --- every backend dispatches every family it declares --------------------------------


def _dispatch_tables() -> dict[str, dict]:
    from cellspec.solver import reference
    from cellspec.solver.asp import compile as asp_compile
    from cellspec.solver.smt import ground

    return {"reference": reference.FAMILY, "clingo": asp_compile.FAMILY, "z3": ground.FAMILY}


@pytest.mark.parametrize("backend", ["reference", "clingo", "z3"])
def test_every_backend_dispatches_every_family_it_declares(backend):
    """A relation a backend declares it decides (its capabilities) has its family's case in
    that backend's one dispatch table, so a new family fails here, naming both, and not
    with a KeyError at run time."""
    from cellspec.solver import reference
    from cellspec.solver.asp import compile as asp_compile

    table = _dispatch_tables()[backend]
    declared = [r for r in R.values() if r.name in checkers.get(backend).capabilities]
    assert declared, backend
    for r in declared:
        assert r.family in table, \
            f"the {backend} backend declares {r.name} but has no case for family {r.family}"
        if r.lp:  # the stability LP's relations are keyed by name
            assert r.name in reference.STABILITY and r.name in asp_compile.COMPLEMENT, r.name
        if backend == "z3" and r.two_parts and r.param != "axis":
            assert r.z3 is not None, f"{r.name} has no Z3 encoding (Relation.z3)"
    assert set(table) <= set(relations.FAMILIES), backend


def test_pair_relations_name_their_footprint_test():
    from cellspec.solver.smt.shapes import FOOTPRINT

    for r in R.values():
        if r.two_parts and r.param != "axis":
            assert r.footprint in FOOTPRINT, r.name


# --- a relation added at run time, in one place: its Relation entry ---------------------

LEFT_OF_LP = """#program left_of.
% left_of(I,J): I touches J from the left (contact, and I's max x within eps of J's min x)
left_of(I,J) :- cand(I,J), box(I,AX0,AX1,AY0,AY1,AZ0,AZ1), box(J,BX0,BX1,BY0,BY1,BZ0,BZ1),
    AX1-BX0 >= -eps, BX1-AX0 >= -eps, AY1-BY0 >= -eps, BY1-AY0 >= -eps,
    AZ1-BZ0 >= -eps, BZ1-AZ0 >= -eps, AX1-BX0 <= eps.
left_of(J,I) :- cand(I,J), box(I,AX0,AX1,AY0,AY1,AZ0,AZ1), box(J,BX0,BX1,BY0,BY1,BZ0,BZ1),
    AX1-BX0 >= -eps, BX1-AX0 >= -eps, AY1-BY0 >= -eps, BY1-AY0 >= -eps,
    AZ1-BZ0 >= -eps, BZ1-AZ0 >= -eps, BX1-AX0 <= eps.
"""


def _left_of() -> relations.Relation:
    """left_of(p, q): p touches q from the left: contact, and p's max x is at most q's min
    x + eps (a pair relation: it holds within the broad phase's margin)."""
    from cellspec.core import geometry as g
    from cellspec.core import shapes as sh

    def grid(a, b, d):
        return g.contact(a, b, d) & (a[..., 1] <= b[..., 0] + d)

    def shape(s, i, j, d):  # the enclosing boxes' x extents are the shapes' own
        return sh.contact(s, i, j, d) & (s.box[i, 1] <= s.box[j, 0] + d)

    def z3(E, d):
        return E.all((E.all(E.olap(a, -d) for a in range(3)), E.ge(E.j[0], E.i[1], -d)))

    return relations.Relation(
        "left_of", ("part", "part"), "left_of(p, q): p touches q from the left", "pair",
        grid, shape, asp="left_of", asp_text=LEFT_OF_LP, pushdown=True,
        rounding=("contact",), z3=z3, footprint="meets")


def _left_rules():
    from cellspec.dsl.model import Rule, Source

    p, q = ir.VarArg("p"), ir.VarArg("q")
    src = Source(file="<test>", line=1, col=1)
    left = ir.Rel("left_of", (p, q))
    top = ir.Cmp(">=", ir.Lin(((ir.Attr("p", "top"), Fraction(1)),
                               (ir.Attr("q", "top"), Fraction(-1))), Fraction(0)))
    return [
        Rule(name="no_left", message="{p} touches {q} from the left", severity="error",
             body=ir.Quant("forall", ("p", "q"), "part", False, ir.Not(left)), source=src),
        # with a comparison the clingo backend absorbs into a numpy selection
        Rule(name="left_lower", message="{p} left of {q} is lower", severity="error",
             body=ir.Quant("forall", ("p", "q"), "part", False, ir.Or((ir.Not(left), top))),
             source=src),
        # nested: exists q (a projection numpy decides)
        Rule(name="has_left", message="{p} has nothing on its left", severity="warning",
             body=ir.Quant("forall", ("p",), "part", False,
                           ir.Quant("exists", ("q",), "part", False, ir.Rel("left_of", (q, p)))),
             source=src),
    ]


def _left_layouts() -> list[dict]:
    c = {"id": "a", "type": "cube", "pos": [0.30, 0.20, 0.025]}
    row = [c, {"id": "b", "type": "cube", "pos": [0.35, 0.20, 0.025]},  # touches a
           {"id": "c", "type": "cube", "pos": [0.4005, 0.21, 0.0255]},  # b, within eps
           {"id": "d", "type": "cube", "pos": [0.40, 0.30, 0.025]},  # alone
           {"id": "e", "type": "slab", "pos": [0.36, 0.20, 0.06]}]  # on b, not beside
    yawed = [dict(c), {"id": "b", "type": "cube", "pos": [0.3604, 0.20, 0.025], "yaw": 45.0},
             {"id": "c", "type": "can", "pos": [0.4306, 0.20, 0.03]},
             {"id": "d", "type": "cube", "pos": [0.25, 0.20, 0.025], "yaw": 90.0},
             # its enclosing box touches a from the right, its corner passes 10 mm above
             {"id": "f", "type": "cube", "pos": [0.3605, 0.24, 0.025], "yaw": 45.0}]
    return [{"units": "m", "parts": row}, {"units": "m", "parts": row[:3]},
            {"units": "m", "parts": yawed}]


@pytest.fixture(scope="module")
def shapes_cell(tmp_path_factory):
    from conftest import FEATURES

    import cellspec

    extra = "    part can cylinder radius 0.03 height 0.06\n    stability off\n"
    text = FEATURES.read_text().replace("    tolerance contact 0.001\n",
                                        "    tolerance contact 0.001\n" + extra)
    f = tmp_path_factory.mktemp("rel") / "features_shapes.cell"
    f.write_text(text)
    return cellspec.load_cell(f)


def test_a_relation_registered_at_run_time_is_decided_alike_by_every_backend(shapes_cell):
    """left_of, one Relation entry (grid and shape functions, ASP part, Z3 encoding) and
    nothing else: the reference, clingo and Z3 report the same violations of rules using it,
    on plain and on yawed and cylinder layouts; the registration is undone after."""
    from cellspec.layout import layout_from_obj
    from cellspec.solver.instance import build_instance
    from cellspec.solver.smt.backend import smt_violations

    rules = _left_rules()
    seen = set()
    with relations.registered(_left_of()):
        for obj in _left_layouts():
            inst = build_instance(shapes_cell, layout_from_obj(obj, "<test>"))
            got = {}
            for name in ("reference", "clingo", "z3"):
                res = checkers.get(name).violations(inst, tuple(rules), None)
                got[name] = sorted(res.violations)
            got["z3 naive"] = smt_violations(inst, rules, prune=False)
            assert got["clingo"] == got["reference"] == got["z3"] == got["z3 naive"], (obj, got)
            seen |= {k for k, _ in got["reference"]}
            ids = [inst.ids[b[0]] + inst.ids[b[1]] for k, b in got["reference"] if k == 0]
            if len(obj["parts"]) == 5 and "e" in inst.ids:
                assert sorted(ids) == ["ab", "bc"], ids
            if "f" in inst.ids:  # decided on the shapes, not on the enclosing boxes
                assert sorted(ids) == ["ab", "da"], ids
                a, f = inst.ids.index("a"), inst.ids.index("f")
                assert R["left_of"].grid(inst.boxes[a], inst.boxes[f], inst.eps)
        assert seen == {0, 1, 2}, seen
    assert "left_of" not in R


def test_a_registered_relations_asp_part_means_its_grid_function():
    """The ASP part the entry carries, grounded by clingo on box/7 and cand/2 facts, holds
    exactly where its grid function does (the clingo backend adds it to builtins.lp)."""
    import clingo
    import numpy as np

    from cellspec.core import geometry as g
    from cellspec.solver.asp.backend import _builtins

    rel = _left_of()
    boxes = np.array([[0, 100, 0, 100, 0, 100], [101, 200, 0, 100, 0, 100],
                      [203, 300, 50, 150, 0, 100], [300, 400, 0, 100, 101, 200],
                      [-100, 1, 99, 200, 100, 150]], dtype=np.int64)
    eps = 2
    with relations.registered(rel):
        assert LEFT_OF_LP in _builtins()
        i, j = g.broad_phase(boxes, eps)
        facts = [f"#const eps={eps}."]
        facts += [f"box({k},{','.join(map(str, b))})." for k, b in enumerate(boxes.tolist())]
        facts += [f"cand({a},{b})." for a, b in zip(i.tolist(), j.tolist(), strict=True)]
        ctl = clingo.Control()
        ctl.add("base", [], "\n".join(facts) + "\n" + rel.asp_text + "\n#show left_of/2.")
        ctl.ground([("base", []), ("left_of", [])])
        with ctl.solve(yield_=True) as h:
            atoms = {(s.arguments[0].number, s.arguments[1].number)
                     for s in next(iter(h)).symbols(shown=True)}
    dense = rel.grid(boxes[:, None, :], boxes[None, :, :], eps)
    np.fill_diagonal(dense, False)
    assert atoms == set(zip(*np.nonzero(dense), strict=True)) and len(atoms) >= 2, atoms
    assert "left_of" not in R
