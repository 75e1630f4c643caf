"""The table of built-in relations (cellspec/core/relations.py) is the one place every
backend, the IR, the rounding analysis and the docs read: these tests hold the places that
cannot import it (builtins.lp, docs/language.md) to it, and pin what is derived from it."""

from __future__ import annotations

import re
from contextlib import ExitStack
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


def test_one_part_families_read_their_encoding_and_facts_from_the_entry():
    """Z3 encodes every zone and surface relation it declares by the entry's ``z3``; the
    stability LP's relations name their clingo complement and their LP; the clingo facts
    have a case for every one-part family numpy decides."""
    from cellspec.solver import reference
    from cellspec.solver.asp import backend
    from cellspec.solver.asp import compile as asp_compile

    for r in R.values():
        if r.family in ("zone", "surface") and r.smt:
            assert r.z3 is not None, r.name
        if r.lp:
            assert r.complement and r.name in reference.STABILITY, r.name
            assert asp_compile.COMPLEMENT[r.name] == r.complement
        if r.family in ("zone", "surface", "robot"):
            assert r.family in backend.PART_FACTS and r.grid is not None, r.name
    assert R["inside"].complement == "outside" and not R["intersects"].complement
    assert set(reference.STABILITY) == {r.name for r in R.values() if r.lp}


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


# --- a zone relation added at run time: its Relation entry ------------------------------

CLEAR_OF_LP = """#program clear_of.
% clear_of(P,K): P's box does not enter zone K by more than eps (not intersects)
clear_enters(P,K) :- zuse(clear_of,K), part(P), zbox(K,KX0,KX1,KY0,KY1,KZ0,KZ1),
    box(P,X0,X1,Y0,Y1,Z0,Z1),
    X1-KX0 > eps, KX1-X0 > eps, X1-X0 > eps, KX1-KX0 > eps,
    Y1-KY0 > eps, KY1-Y0 > eps, Y1-Y0 > eps, KY1-KY0 > eps,
    Z1-KZ0 > eps, KZ1-Z0 > eps, Z1-Z0 > eps, KZ1-KZ0 > eps.
clear_enters(P,K) :- zuse(clear_of,K), hext(P,K,_,H), zhalf(K,_,_,_,gt,R), hslack(K,S), H-S > R.
clear_enters(P,K) :- zuse(clear_of,K), hext(P,K,L,_), zhalf(K,_,_,_,lt,R), hslack(K,S), L+S < R.
clear_of(P,K) :- zuse(clear_of,K), part(P), not clear_enters(P,K).
"""


def _clear_of(z3: bool = True) -> relations.Relation:
    """clear_of(p, z): p does not enter zone z by more than eps (the negation of
    intersects, on boxes and on shapes, for a box zone and for a half-space)."""
    from cellspec.core import geometry as g
    from cellspec.core import shapes as sh

    def grid(b, lo, hi, e):
        return ~g.intersects_box(b, lo, hi, e)

    def shape(s, idx, lo, hi, e):
        return ~sh.intersects_box(s, idx, lo, hi, e)

    def half_grid(b, h, e):
        return ~g.intersects_half(b, h, e)

    def half_shape(s, idx, h, e):
        return ~sh.intersects_half(s, idx, h, e)

    def enc(Z, d):
        return Z.not_(Z.enters(d))

    return relations.Relation(
        "clear_of", ("part", "zone"), "clear_of(p, z): p does not enter zone z", "zone",
        grid, shape, (half_grid, half_shape), asp="clear_of", asp_text=CLEAR_OF_LP,
        pushdown=True, rounding=("intersects",), z3=enc if z3 else None)


def _zone_rules(name: str = "clear_of"):
    from cellspec.dsl.model import Rule, Source

    p, k = ir.VarArg("p"), ir.VarArg("k")
    src = Source(file="<test>", line=1, col=1)
    low = ir.Cmp("<=", ir.Lin(((ir.Attr("p", "top"), Fraction(1)),), Fraction(-1, 25)))

    def clear(zone: ir.Arg) -> ir.Rel:
        return ir.Rel(name, (p, zone))

    def forall_p(body: ir.Node) -> ir.Quant:
        return ir.Quant("forall", ("p",), "part", False, body)

    return [
        Rule(name="clear_post", message="{p} enters the post", severity="error",
             body=forall_p(clear(ir.NameArg("post"))), source=src),
        Rule(name="in_corner", message="{p} stays out of the corner", severity="warning",
             body=forall_p(ir.Or((ir.Not(clear(ir.NameArg("corner"))), low))), source=src),
        # a zone variable: every keep-out, a box and a half-space
        Rule(name="clear_all", message="{p} enters {k}", severity="error",
             body=forall_p(ir.Quant("forall", ("k",), "keepout", False, clear(k))),
             source=src),
        Rule(name="clear_some", message="{p} is in every keep-out", severity="warning",
             body=forall_p(ir.Quant("exists", ("k",), "keepout", False,
                                    ir.And((clear(k), ir.Not(ir.Rel("inside", (p, k))))))),
             source=src),
    ]


def _zone_layouts() -> list[dict]:
    def part(i, t, x, y, z=0.025, yaw=None):
        d = {"id": i, "type": t, "pos": [x, y, z]}
        if yaw is not None:
            d["yaw"] = yaw
        return d

    plain = [part("a", "cube", 0.62, 0.42),  # in the post
             part("b", "cube", 0.58, 0.38),  # enters the post by 5 mm
             part("c", "cube", 0.5745, 0.30),  # beside it, 0.5 mm in: within eps
             part("d", "cube", 0.30, 0.45),  # enters the corner
             part("e", "cube", 0.30, 0.20)]  # clear of both
    shaped = [dict(plain[3]), dict(plain[4]),
              # its enclosing box enters the post's corner, the square does not
              part("f", "cube", 0.57, 0.37, yaw=45.0),
              # so for a disc: 35 mm from the post's corner, radius 30 mm
              part("g", "can", 0.575, 0.375, 0.03),
              # the enclosing box enters the half-space, the square does not
              part("h", "cube", 0.30, 0.41, yaw=45.0),
              part("i", "can", 0.45, 0.38, 0.03)]  # x + 2y = 1.21 + r
    return [{"units": "m", "parts": plain}, {"units": "m", "parts": shaped}]


def _zone_verdicts(cell, rules, layouts):
    from cellspec.layout import layout_from_obj
    from cellspec.solver.instance import build_instance
    from cellspec.solver.smt.backend import smt_violations

    out = []
    for obj in layouts:
        inst = build_instance(cell, layout_from_obj(obj, "<test>"))
        got = {name: sorted(checkers.get(name).violations(inst, tuple(rules), None).violations)
               for name in ("reference", "clingo", "z3")}
        got["z3 naive"] = smt_violations(inst, rules, prune=False)
        out.append((inst, got))
    return out


def test_a_zone_relation_registered_at_run_time_is_decided_alike_by_every_backend(
        shapes_cell):
    """clear_of, one Relation entry (grid, shape and half-space functions, ASP part, and a
    Z3 encoding composed of the zone views' ``enters`` and ``not_``): the reference, clingo
    and Z3 agree on named and quantified zones, a box and a half-space, on plain, yawed and
    cylinder parts, and it is the negation of intersects everywhere."""
    rules = _zone_rules()
    with relations.registered(_clear_of()):
        found = _zone_verdicts(shapes_cell, rules, _zone_layouts())
    assert "clear_of" not in R
    with_intersects = _zone_verdicts(shapes_cell, _zone_rules("intersects"), _zone_layouts())
    seen = set()
    for (inst, got), (_, neg) in zip(found, with_intersects, strict=True):
        assert got["clingo"] == got["reference"] == got["z3"] == got["z3 naive"], got
        seen |= {k for k, _ in got["reference"]}
        names = {k: sorted("".join(inst.ids[a] if isinstance(a, int) else a for a in args)
                           for j, args in got["reference"] if j == k) for k in range(4)}
        if "a" in inst.ids:
            assert names[0] == ["a", "b"] and names[1] == ["e"], names
            assert names[2] == ["acorner", "apost", "bcorner", "bpost", "ccorner", "dcorner"]
        else:  # decided on the shapes: f and g clear of the post, h of the corner ...
            assert names[0] == [] and names[1] == ["e", "h"], names
            assert names[2] == ["dcorner", "fcorner", "gcorner", "icorner"], names
            # ... where their enclosing boxes are not
            box = R["intersects"].grid
            half = R["intersects"].half
            assert box is not None and half is not None
            post, corner = inst.zones["post"], inst.zones["corner"]
            fg = [inst.ids.index("f"), inst.ids.index("g")]
            assert box(inst.boxes[fg], post.lo, post.hi, inst.eps).all()
            assert half[0](inst.boxes[[inst.ids.index("h")]], corner, inst.eps).all()
        # clear_of is not intersects: each rule's violations are the parts the other's
        # (of the same rule text) are not, for every binding of a named zone
        for k in (0, 1):
            ours = {args for j, args in got["reference"] if j == k}
            theirs = {args for j, args in neg["reference"] if j == k}
            assert not ours & theirs, (k, ours, theirs)
    assert seen == {0, 1, 2, 3}, seen


def test_a_zone_relation_without_z3_encoding_is_refused_by_name(shapes_cell):
    """A zone relation whose entry has no ``z3`` is refused by the Z3 backend naming it, on
    boxes and on shapes, never encoded as another zone relation."""
    from cellspec.core.errors import CellspecError
    from cellspec.layout import layout_from_obj
    from cellspec.solver.instance import build_instance
    from cellspec.solver.smt.backend import smt_violations

    rules = _zone_rules()
    with relations.registered(_clear_of(z3=False)):
        shaped = {"units": "m", "parts": _zone_layouts()[1]["parts"][2:]}  # no plain box
        for obj in [*_zone_layouts(), shaped]:  # plain boxes; yawed boxes and cylinders
            inst = build_instance(shapes_cell, layout_from_obj(obj, "<test>"))
            for rule in rules:  # a named box zone and half-space, a zone variable
                with pytest.raises(CellspecError, match=f"rule '{rule.name}': relation "
                                                        "clear_of has no Z3 encoding"):
                    smt_violations(inst, [rule], prune=False)
    assert "clear_of" not in R


def test_a_registered_zone_relations_asp_part_means_its_grid_function():
    """clear_of's ASP part, grounded by clingo with builtins.lp's zones part (its
    half-space extremes) on box/7, zbox/7 and zhalf/6 facts, holds exactly where its grid
    and half-space functions do."""
    import clingo
    import numpy as np

    from cellspec.core import geometry as g
    from cellspec.solver.asp.backend import _builtins

    rel = _clear_of()
    boxes = np.array([[0, 100, 0, 100, 0, 100], [99, 200, 0, 100, 0, 100],
                      [97, 150, 50, 150, 0, 100], [300, 400, 0, 100, 101, 200],
                      [-100, 1, 99, 200, 100, 150]], dtype=np.int64)
    eps = 2
    box_zone = ((100, 0, 0), (300, 300, 300))
    half = g.HalfSpaceU((1, 2, 0), ">", 400)
    with relations.registered(rel):
        text = _builtins()
        assert CLEAR_OF_LP in text
        facts = [f"#const eps={eps}.", f"part(0..{len(boxes) - 1})."]
        facts += [f"box({k},{','.join(map(str, b))})." for k, b in enumerate(boxes.tolist())]
        facts += ['zbox("b",100,300,0,300,0,300).', 'zhalf("h",1,2,0,gt,400).',
                  'zuse(clear_of,"b").', 'zuse(clear_of,"h").']
        ctl = clingo.Control()
        ctl.add("base", [], text + "\n" + "\n".join(facts) + "\n#show clear_of/2.")
        ctl.ground([("base", []), ("zones", []), ("clear_of", [])])
        with ctl.solve(yield_=True) as h:
            atoms = {(s.arguments[0].number, s.arguments[1].string)
                     for s in next(iter(h)).symbols(shown=True)}
    assert rel.grid is not None and rel.half is not None
    want = {(k, "b") for k in np.nonzero(rel.grid(boxes, *box_zone, eps))[0].tolist()}
    want |= {(k, "h") for k in np.nonzero(rel.half[0](boxes, half, eps))[0].tolist()}
    assert atoms == want and {z for _, z in want} == {"b", "h"}, (atoms, want)
    assert len(want) < 2 * len(boxes)


# --- surface and robot relations added at run time: their Relation entries -------------

SURFACE_CELL = """
cell c {
    units m
    workspace x [-1, 1] y [-1, 1] z [0, 1]
    surface table z 0
    surface shelf z 0.1
    part chip size (0.02, 0.02, 0.02)
    robot arm model panda base (0, 0, 0.01) reach 0.5 gripper vacuum
    robot boxed model panda base (0, 0, 0) gripper vacuum
    reachable boxed x [0.1, 0.3] y [0.1, 0.4] z [0, 0.5]
}
"""

LIFTED_LP = """#program lifted.
% lifted(P,S): P's bottom is above surface S by more than eps
lifted(P,S) :- part(P), surf(S,Z), box(P,_,_,_,_,Z0,_), Z0-Z > eps.
"""


def _surface_and_robot() -> list[relations.Relation]:
    """lifted(p, s): p's bottom above surface s by more than eps; aloft(p): lifted over
    some surface (the family's one-part form, as grounded is on's); out_of_reach(p, r):
    not reachable (a robot relation, which Z3 decides by its grid function)."""
    from cellspec.core import geometry as g

    def grid(b, z, e):
        return b[..., 4] - z > e

    def shape(s, idx, z, e):
        return s.box[idx, 4] - z > e

    def z3(S, d):
        return S.ge(S.i[4], S.z, d + 1)

    def out_of_reach(b, reach):
        return ~g.reachable(b, reach)

    return [
        relations.Relation("lifted", ("part", "surface_or_part"), "lifted(p, s): above s",
                           "surface", grid, shape, asp="lifted", asp_text=LIFTED_LP,
                           rounding=("on",), z3=z3),
        relations.Relation("aloft", ("part",), "aloft(p): lifted over some surface",
                           "surface", grid, shape, asp="lifted", rounding=("on",), z3=z3),
        relations.Relation("out_of_reach", ("part", "robot"), "out_of_reach(p, r)", "robot",
                           out_of_reach, moving="distance is not linear", rounding=("reachable",)),
    ]


def _surface_rules():
    from cellspec.dsl.model import Rule, Source

    p, r = ir.VarArg("p"), ir.VarArg("r")
    src = Source(file="<test>", line=1, col=1)
    tall = ir.Cmp(">", ir.Lin(((ir.Attr("p", "top"), Fraction(1)),), Fraction(-1, 10)))

    def forall_p(body: ir.Node) -> ir.Quant:
        return ir.Quant("forall", ("p",), "part", False, body)

    out = ir.Rel("out_of_reach", (p, r))
    return [
        Rule(name="over_shelf", message="{p} is above the shelf", severity="error",
             body=forall_p(ir.Not(ir.Rel("lifted", (p, ir.NameArg("shelf"))))), source=src),
        Rule(name="low_aloft", message="{p} floats low", severity="error",
             body=forall_p(ir.Or((ir.Not(ir.Rel("aloft", (p,))), tall))), source=src),
        Rule(name="everyone", message="{r} cannot reach {p}", severity="warning",
             body=ir.Quant("forall", ("r",), "robot", False, forall_p(ir.Not(out))),
             source=src),
        Rule(name="anyone", message="nobody reaches {p}", severity="error",
             body=forall_p(ir.Quant("exists", ("r",), "robot", False, ir.Not(out))),
             source=src),
    ]


def test_surface_and_robot_relations_registered_at_run_time_are_decided_alike(tmp_path):
    """lifted, aloft (surface) and out_of_reach (robot), each one Relation entry and
    nothing else: the reference, clingo and Z3 report the same violations."""
    import cellspec
    from cellspec.layout import layout_from_obj
    from cellspec.solver.instance import build_instance
    from cellspec.solver.smt.backend import smt_violations

    f = tmp_path / "c.cell"
    f.write_text(SURFACE_CELL)
    cell = cellspec.load_cell(str(f))
    parts = [{"id": "a", "type": "chip", "pos": [0.1, 0.1, 0.01]},  # on the table
             {"id": "b", "type": "chip", "pos": [0.3, 0.4, 0.06]},  # low, past the arm
             {"id": "c", "type": "chip", "pos": [0.2, 0.2, 0.11]},  # on the shelf
             {"id": "d", "type": "chip", "pos": [0.6, 0.0, 0.2]}]  # above it, out of reach
    rules = _surface_rules()
    with ExitStack() as stack:
        for rel in _surface_and_robot():
            stack.enter_context(relations.registered(rel))
        inst = build_instance(cell, layout_from_obj({"units": "m", "parts": parts}, "<t>"))
        got = {name: sorted(checkers.get(name).violations(inst, tuple(rules), None).violations)
               for name in ("reference", "clingo", "z3")}
        got["z3 naive"] = smt_violations(inst, rules, prune=False)
    assert not {"lifted", "aloft", "out_of_reach"} & set(R)
    assert got["clingo"] == got["reference"] == got["z3"] == got["z3 naive"], got
    named = sorted((k, tuple(inst.ids[a] if isinstance(a, int) else a for a in args))
                   for k, args in got["reference"])
    assert named == [(0, ("d",)), (1, ("b",)), (2, ("arm", "b")), (2, ("arm", "d")),
                     (2, ("boxed", "d")), (3, ("d",))], named


def test_diff_compares_the_surfaces_and_robots_a_registered_relation_reads(tmp_path):
    """formal/diff's 'the cells agree on what a rule reads' goes by the relation's family, so
    a new surface or robot relation compares surfaces or robots (not only on/reachable)."""
    import cellspec
    from cellspec.solver.formal.diff import _Same

    f = tmp_path / "c.cell"
    f.write_text(SURFACE_CELL)
    g = tmp_path / "d.cell"
    g.write_text(SURFACE_CELL.replace("surface shelf z 0.1", "surface shelf z 0.12"))
    old, new = cellspec.load_cell(str(f)), cellspec.load_cell(str(g))
    rules = _surface_rules()
    with ExitStack() as stack:
        for rel in _surface_and_robot():
            stack.enter_context(relations.registered(rel))
        same = _Same(old, new)
        assert not same(rules[0]) and not same(rules[1])  # they read the shelf
        assert same(rules[2]) and same(rules[3])  # robots only: the same in both cells
