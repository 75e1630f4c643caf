"""CP-SAT on yawed boxes and cylinders (issue 22 item 3, docs/shapes.md): repair may translate
them keeping their yaw (tests/test_repair_shapes.py), and only ``--allow-rotate`` turns a
box (tests/test_repair_rotate.py for angles other than quarter turns); plan decides
their contact, support and grip blockers with the exact kernel (along the part's own axes);
every answer is re-verified by clingo (which decides shapes exactly)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cellspec

import cellspec
from cellspec.core.errors import CellspecError
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat import exact
from cellspec.solver.cpsat.repair import parse_rotate, repair
from cellspec.solver.cpsat.sequence import order_problem, plan
from cellspec.solver.instance import build_instance
from cellspec.solver.verify import check

CELL = """\
import physical
cell c {
    workspace x [0.3, 0.7] y [0.3, 0.7] z [0, 0.5]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part slab size (0.10, 0.04, 0.02)
    part can cylinder radius 0.03 height 0.1 mass 0.2
    default gripper parallel opening 0.07 depth 0.02
    stability off
}
"""


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    f = tmp_path_factory.mktemp("c") / "c.cell"
    f.write_text(CELL)
    return cellspec.load_cell(f)


OVERLAP = {"parts": [{"id": "y", "type": "slab", "pos": [0.5, 0.5, 0.01], "yaw": 30},
                     {"id": "c", "type": "cube", "pos": [0.54, 0.5, 0.025]},
                     {"id": "k", "type": "can", "pos": [0.4, 0.4, 0.05]}]}


def test_repair_moves_the_cheaper_plain_cube_not_the_yawed_box(cell):
    lay = layout_from_obj(OVERLAP)
    before = check(cell, lay)
    assert before.verdict == "fail" and [(v.rule, v.parts) for v in before.violations] == [
        ("no_overlap", ("y", "c"))]
    r = repair(cell, lay, time_limit=10)
    assert r.status in ("optimal", "feasible") and r.verdict.verdict == "pass"
    assert [m.part for m in r.moves] == ["c"]
    out = layout_from_obj(r.layout)
    assert out.pos[0].tolist() == lay.pos[0].tolist() and out.yaw_of(0) == 30  # stays
    assert out.pos[2].tolist() == lay.pos[2].tolist()  # the cylinder too
    assert check(cell, out).verdict == "pass"


def test_the_monolithic_repair_gives_the_same_answer(cell):
    r = repair(cell, layout_from_obj(OVERLAP), time_limit=10, decompose=False)
    assert r.status in ("optimal", "feasible") and [m.part for m in r.moves] == ["c"]


def test_two_overlapping_yawed_boxes_one_is_moved_keeping_its_yaw(cell):
    # (before: nothing could move them, so no repair) now one is translated, yaw kept
    obj = {"parts": [{"id": "a", "type": "slab", "pos": [0.5, 0.5, 0.01], "yaw": 30},
                     {"id": "b", "type": "slab", "pos": [0.52, 0.5, 0.01], "yaw": -20}]}
    r = repair(cell, layout_from_obj(obj), time_limit=5)
    # minimal in the model, which sees the yawed boxes through their enclosing boxes: no
    # proof of minimality (a move the model cannot see may be smaller), so `feasible`
    assert r.status == "feasible" and r.verdict.verdict == "pass" and len(r.moves) == 1
    assert "enclosing boxes (conservative)" in r.reason
    (m,) = r.moves
    assert m.yaw == {"a": 30.0, "b": -20.0}[m.part] and m.yaw_kept
    out = layout_from_obj(r.layout)
    assert out.yaw.tolist() == [30.0, -20.0]
    assert check(cell, out).verdict == "pass"


SLOT = {"parts": [{"id": "w1", "type": "cube", "pos": [0.455, 0.5, 0.025]},
                  {"id": "w2", "type": "cube", "pos": [0.545, 0.5, 0.025]},
                  {"id": "s", "type": "slab", "pos": [0.5, 0.5, 0.01]}]}


def test_allow_rotate_turns_a_part_to_fit(cell):
    lay = layout_from_obj(SLOT)
    plain = repair(cell, lay, time_limit=10)
    assert [m.part for m in plain.moves] == ["s"] and plain.moves[0].yaw is None
    assert plain.moves[0].dst != plain.moves[0].src  # without turning it must move away
    r = repair(cell, lay, time_limit=10, allow_rotate=parse_rotate("90"))
    assert r.status == "optimal" and r.verdict.verdict == "pass"
    (m,) = r.moves
    assert m.part == "s" and m.yaw == 90.0 and m.dst == m.src  # turned in place
    assert m.to_json()["yaw"] == 90.0
    out = layout_from_obj(r.layout)
    assert out.yaw_of(2) == 90.0 and check(cell, out).verdict == "pass"
    # a set of yaws without a quarter turn from 0 cannot turn it
    r = repair(cell, lay, time_limit=10, allow_rotate=parse_rotate("0,180"))
    assert all(x.yaw is None for x in r.moves)


@pytest.mark.parametrize("spec, want", [("90", (0.0, 90.0, 180.0, 270.0)),
                                        ("180", (0.0, 180.0)), ("0, 90", (0.0, 90.0)),
                                        ("-90", (0.0, 90.0, 180.0, 270.0)),
                                        ("450", (0.0, 90.0, 180.0, 270.0)),
                                        ("45", tuple(45.0 * k for k in range(8))),
                                        ("-30", tuple(30.0 * k for k in range(12))),
                                        ("22.5", tuple(22.5 * k for k in range(16))),
                                        ("15", tuple(15.0 * k for k in range(24))),
                                        ("30,90", (30.0, 90.0)), ("0,45,-45", (0.0, 45.0, 315.0))])
def test_parse_rotate(spec, want):
    assert parse_rotate(spec) == want


@pytest.mark.parametrize("spec", ["abc", "nan", "inf", "0", "360", "", "90,", "1e9", "7",
                                  "0.1", ",".join(str(k) for k in range(25))])
def test_bad_allow_rotate_is_refused(spec):
    with pytest.raises(CellspecError):
        parse_rotate(spec)


def test_bad_allow_rotate_exits_2(tmp_path):
    (tmp_path / "c.cell").write_text(CELL)
    (tmp_path / "l.json").write_text(json.dumps(SLOT))
    for spec in ("7", "abc", "nan"):
        p = run_cellspec("repair", tmp_path / "c.cell", tmp_path / "l.json",
                         "--allow-rotate", spec)
        assert p.returncode == 2 and "--allow-rotate" in p.stderr, (spec, p.stderr)
        assert "Traceback" not in p.stderr
    p = run_cellspec("repair", tmp_path / "c.cell", tmp_path / "l.json", "--allow-rotate",
                     "90", "--format", "json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [m.get("yaw") for m in out["moves"]] == [90.0]


STACK = {"parts": [{"id": "b", "type": "cube", "pos": [0.5, 0.5, 0.025]},
                   {"id": "t", "type": "slab", "pos": [0.5, 0.5, 0.06], "yaw": 30}]}


def test_plan_a_stack_whose_top_is_yawed(cell):
    p = plan(cell, layout_from_obj(STACK))
    assert p.status == "optimal" and [s.part for s in p.steps] == ["b", "t"]
    assert p.verdict is not None and p.verdict.verdict == "pass"


def test_plan_decides_grip_blockers_on_the_shapes_not_their_enclosing_boxes(cell):
    # a cube at 45 degrees next to a plain cube: the enclosing boxes are 6 mm apart on x
    # (finger room, if they were the shapes), but the grip of the yawed cube along its own
    # axes is judged on its own footprint; contact is judged exactly
    obj = {"parts": [{"id": "a", "type": "cube", "pos": [0.5, 0.5, 0.025], "yaw": 45},
                     {"id": "q", "type": "cube", "pos": [0.5654, 0.5, 0.025]}]}
    inst = build_instance(cell, layout_from_obj(obj))
    i, j = np.array([0, 1]), np.array([1, 0])
    con = exact.contact(inst, i, j)
    assert not con.any()  # exact: a corner 5.4 mm away; the enclosing boxes also apart
    op = order_problem(inst)
    from cellspec.core import shapes as ks

    for k, ax in enumerate("xy"):
        want_a = bool(ks.flanks(inst.shapes, np.array([1]), np.array([0]), ax, inst.opening,
                                inst.depth, inst.eps)[0])
        assert (1 in op.block[0][k]) == want_a
    p = plan(cell, layout_from_obj(obj))
    assert p.status == "optimal" and p.verdict.verdict == "pass"


def test_repair_and_plan_cli_accept_shapes(tmp_path):
    (tmp_path / "c.cell").write_text(CELL)
    (tmp_path / "l.json").write_text(json.dumps(OVERLAP))
    (tmp_path / "s.json").write_text(json.dumps(STACK))
    p = run_cellspec("repair", tmp_path / "c.cell", tmp_path / "l.json")
    assert p.returncode == 0 and "moved c" in p.stdout, p.stdout + p.stderr
    p = run_cellspec("plan", tmp_path / "c.cell", tmp_path / "s.json")
    assert p.returncode == 0, p.stdout + p.stderr
