"""The stability rule (stable(p): rigid-block static equilibrium by an OR-Tools LP):
cantilevers fail, the library's bridge, canopy and staircase stand, friction comes from
the cell, and clingo and the reference evaluator agree."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from conftest import LAYOUTS

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.scenarios import SCENARIOS, find_test
from cellspec.solver.instance import build_instance
from cellspec.solver.stability import report
from cellspec.testing.runner import layout_of_test

HEAD = """\
import physical
import stability

cell s {{
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
    {friction}
}}
"""


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    d = tmp_path_factory.mktemp("stab")
    f = d / "s.cell"
    f.write_text(HEAD.format(friction="friction 0.6"))
    return cellspec.load_cell(str(f))


def _lay(rows):
    return layout_from_obj({"parts": [{"id": i, "type": "cube", "pos": list(p)}
                                      for i, p in rows]})


def _both(cell, lay):
    a = cellspec.check(cell, lay)
    b = cellspec.check(cell, lay, backend="reference")
    assert {(v.rule, v.parts) for v in a.violations} == {(v.rule, v.parts)
                                                          for v in b.violations}
    return a


def test_cantilever_fails(cell):
    v = _both(cell, _lay([("a", (0.40, 0.20, 0.025)), ("b", (0.43, 0.20, 0.075))]))
    assert v.verdict == "fail"
    # the part that topples is named once (round 1 named every part of the structure)
    assert {x.parts for x in v.violations if x.rule == "stability"} == {("b",)}
    assert not [x for x in v.violations if x.rule != "stability"]  # gravity alone passes


def test_overhang_with_centre_over_support_stands(cell):
    assert _both(cell, _lay([("a", (0.40, 0.20, 0.025)),
                             ("b", (0.42, 0.20, 0.075))])).verdict == "pass"


def test_counterweight_makes_a_cantilever_stand(cell):
    # b alone overhangs a (centre 0.43 beyond a's edge 0.425); w on b's inner end moves the
    # pair's centre of mass to 0.42, over a: it stands
    rows = [("a", (0.40, 0.20, 0.025)), ("b", (0.43, 0.20, 0.075)),
            ("w", (0.41, 0.20, 0.125))]
    assert _both(cell, _lay(rows)).verdict == "pass"
    rows[2] = ("w", (0.45, 0.20, 0.125))  # on the outer end: worse
    assert _both(cell, _lay(rows)).verdict == "fail"


@pytest.mark.parametrize("test", ["bridge_5_valid", "staircase_8_valid", "pyramid_6_valid",
                                  "tower_5_valid"])
def test_library_structures_stand(cell, test):
    src = cellspec.load_cell(str(SCENARIOS / "table_v.cell"))
    lay = layout_of_test(find_test(src, test))
    assert _both(cell, lay).verdict == "pass"


def test_canopy_and_dense_block_stand(cell):
    for name in ("canopy_21", "dense_block_12", "wall_9"):
        obj = json.loads((LAYOUTS / f"{name}.json").read_text())
        obj.pop("order", None)
        assert _both(cell, layout_from_obj(obj)).verdict == "pass", name


def test_side_wedged_block_is_not_held_by_friction(tmp_path):
    # b touches two columns only by its side faces: vertical faces carry no load (no
    # clamping), whatever the friction, so b rests on nothing (gravity reports it)
    rows = [("l1", (0.35, 0.20, 0.025)), ("l2", (0.35, 0.20, 0.075)),
            ("r1", (0.45, 0.20, 0.025)), ("r2", (0.45, 0.20, 0.075)),
            ("b", (0.40, 0.20, 0.075))]
    lay = _lay(rows)
    for mu in ("friction 0.6", "friction 2"):
        f = tmp_path / f"c{len(mu)}.cell"
        f.write_text(HEAD.format(friction=mu))
        v = _both(cellspec.load_cell(str(f)), lay)
        assert {(x.rule, x.parts) for x in v.violations} == {("gravity", ("b",))}, mu


def test_cube_past_its_support_tipping_away_from_a_neighbour_falls(cell):
    # plain RBE passes this (friction against the neighbour's side face) and pybullet
    # drops it: b's centre of mass is 1 mm past a1's edge, tipping away from c beside it
    rows = [("a0", (0.35, 0.20, 0.025)), ("a1", (0.40, 0.20, 0.025)),
            ("c", (0.376, 0.20, 0.075)), ("b", (0.426, 0.20, 0.075))]
    v = _both(cell, _lay(rows))
    assert {(x.rule, x.parts) for x in v.violations} == {("stability", ("b",))}


def test_mask_direct_and_default_friction(cell):
    lay = _lay([("a", (0.40, 0.20, 0.025)), ("b", (0.43, 0.20, 0.075)),
                ("c", (0.60, 0.40, 0.025))])
    inst = build_instance(cell, lay)
    # a carries b with their centre of mass (x 0.415) over a: only b topples
    assert report(inst).stable.tolist() == [True, False, True]
    assert float(inst.friction) == 0.6


def test_friction_parse_errors(tmp_path):
    f = tmp_path / "bad.cell"
    f.write_text(textwrap.dedent(HEAD.format(friction="friction 0.5\n    friction 0.4")))
    with pytest.raises(cellspec.CellspecError, match="friction is given twice"):
        cellspec.load_cell(str(f))
    for bad, msg in (("friction 0", "friction must be positive"),
                     ("friction -1", "friction must be positive"),
                     ("friction 50", "absurd")):
        f.write_text(HEAD.format(friction=bad))
        with pytest.raises(cellspec.CellspecError, match=msg) as ei:
            cellspec.load_cell(str(f))
        assert ei.value.diagnostics[0].line == 11


def test_random_layouts_clingo_equals_reference(cell):
    rng = np.random.default_rng(3)
    for _ in range(15):
        rows = []
        for k in range(int(rng.integers(2, 6))):
            rows.append((f"q{k}", (round(0.35 + 0.01 * int(rng.integers(0, 8)), 3), 0.20,
                                   0.025 + 0.05 * k)))
        _both(cell, _lay(rows))


def test_repair_makes_a_cantilever_stand(cell):
    from cellspec.solver.cpsat.repair import repair

    lay = _lay([("a", (0.40, 0.20, 0.025)), ("b", (0.43, 0.20, 0.075)),
                ("c", (0.43, 0.20, 0.125))])
    r = repair(cell, lay)
    assert r.status == "feasible" and 1 <= r.parts_moved <= 2, r.reason
    fixed = layout_from_obj(r.layout)
    assert _both(cell, fixed).verdict == "pass"


def test_repair_random_leaning_towers(cell):
    from cellspec.solver.cpsat.repair import repair

    rng = np.random.default_rng(5)
    for _ in range(10):
        n = int(rng.integers(2, 6))
        rows = [(f"q{k}", (round(0.35 + 0.01 * int(rng.integers(0, 9)), 3), 0.20,
                           0.025 + 0.05 * k)) for k in range(n)]
        r = repair(cell, _lay(rows), time_limit=5)
        assert r.status in ("optimal", "feasible"), r.reason
        assert _both(cell, layout_from_obj(r.layout)).verdict == "pass"
