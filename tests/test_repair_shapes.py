"""Repair translates yawed boxes and cylinders, keeping their yaw and radius (issue 22 item 3,
docs/shapes.md, cellspec/solver/cpsat/moved_shapes.py). The model sees such a part through
its enclosing box (conservative for overlap, workspace and keep-outs) and an inscribed
square (support); every repaired layout is re-checked exactly, by clingo and by the numpy
reference, and its yaws are the input's, byte for byte."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import run_cellspec, write_cell

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.moved_shapes import inner_half
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.instance import build_instance
from cellspec.solver.verify import check

# stability on (the default): a moved part must also stand, stage by stage
CELL = """\
import physical
cell c {
    workspace x [0.3, 0.7] y [0.3, 0.7] z [0, 0.5]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part slab size (0.10, 0.04, 0.02) mass 0.05
    part can cylinder radius 0.03 height 0.1 mass 0.2
    keepout corner box x [0.58, 0.7] y [0.58, 0.7]
    default gripper parallel opening 0.07 depth 0.02
}
"""


@pytest.fixture(scope="module")
def cell_file(tmp_path_factory):
    return write_cell(tmp_path_factory, CELL)


@pytest.fixture(scope="module")
def cell(cell_file):
    return cellspec.load_cell(cell_file)


def _passes(cell, r, obj) -> cellspec.Layout:
    """The repair verified, re-checked exactly by clingo and the reference, every yaw and
    every type and size kept."""
    assert r.status in ("optimal", "feasible"), r.reason
    assert r.verdict is not None and r.verdict.verdict == "pass"
    out = layout_from_obj(r.layout)
    assert check(cell, out).verdict == "pass"
    assert check(cell, out, backend="reference").verdict == "pass"
    got = {p["id"]: p for p in r.layout["parts"]}
    for p in layout_from_obj(obj).to_json()["parts"]:  # as the layout writes it (20 -> 20.0)
        q = got[p["id"]]
        assert q["type"] == p["type"] and q.get("size") == p.get("size")
        # the yaw byte for byte (a yaw of 0 is not written at all)
        assert json.dumps(q.get("yaw")) == json.dumps(p.get("yaw")), p["id"]
    return out


STACKED = {"parts": [{"id": "b", "type": "cube", "pos": [0.45, 0.45, 0.025]},
                     {"id": "t", "type": "cube", "pos": [0.45, 0.45, 0.075]},
                     {"id": "y", "type": "slab", "pos": [0.5, 0.45, 0.01], "yaw": 33.3}]}


@pytest.mark.parametrize("decompose", [True, False])
def test_a_yawed_box_in_a_loaded_plain_box_is_the_one_moved(cell, decompose):
    # b carries t: moving b moves two parts; the yawed slab alone is the minimal move
    lay = layout_from_obj(STACKED)
    assert [(v.rule, v.parts) for v in check(cell, lay).violations] == [
        ("no_overlap", ("b", "y"))]
    r = repair(cell, lay, time_limit=10, decompose=decompose)
    # minimal in the model, which sees the yawed boxes through their enclosing boxes: no
    # proof of minimality (a move the model cannot see may be smaller), so `feasible`
    assert r.status == "feasible" and "not proved minimal" in r.reason
    out = _passes(cell, r, STACKED)
    (m,) = r.moves
    assert m.part == "y" and m.yaw == 33.3 and m.yaw_kept
    assert m.to_json()["yaw"] == 33.3 and m.to_json()["yaw_kept"] is True
    assert m.dst[2] == m.src[2]  # still on the table
    assert out.pos[:2].tolist() == lay.pos[:2].tolist()  # the stack stays


def test_a_cylinder_in_a_keepout_is_moved_out_keeping_its_radius(cell):
    obj = {"parts": [{"id": "k", "type": "can", "pos": [0.62, 0.62, 0.05]},
                     {"id": "c", "type": "cube", "pos": [0.4, 0.4, 0.025]}]}
    lay = layout_from_obj(obj)
    assert [(v.rule, v.parts) for v in check(cell, lay).violations] == [("keepout", ("k",))]
    r = repair(cell, lay, time_limit=10)
    out = _passes(cell, r, obj)
    assert [m.part for m in r.moves] == ["k"] and r.moves[0].yaw is None
    a, b = build_instance(cell, lay).shapes, build_instance(cell, out).shapes
    assert a is not None and b is not None
    assert b.cyl[0] and b.hx[0] == a.hx[0] == 600 and b.hz[0] == a.hz[0]  # radius 0.03 m
    assert (b.cx[0], b.cy[0]) != (a.cx[0], a.cy[0])


def test_a_floating_yawed_box_is_put_down_on_a_plain_box(cell):
    obj = {"parts": [{"id": "b", "type": "cube", "pos": [0.45, 0.45, 0.025]},
                     {"id": "y", "type": "slab", "pos": [0.45, 0.45, 0.07], "yaw": 33.3}]}
    r = repair(cell, layout_from_obj(obj), time_limit=10)
    _passes(cell, r, obj)
    (m,) = r.moves
    assert m.part == "y" and m.dst == (0.45, 0.45, 0.06) and m.yaw_kept


def test_a_structure_with_a_yawed_top_shifts_whole(cell):
    # a cube carrying a yawed slab, both in the keep-out: one rigid shift, the slab's
    # exact support kept (its enclosing box need not fit the cube's top)
    obj = {"parts": [{"id": "b", "type": "cube", "pos": [0.6, 0.6, 0.025]},
                     {"id": "y", "type": "slab", "pos": [0.6, 0.6, 0.06], "yaw": 20}]}
    r = repair(cell, layout_from_obj(obj), time_limit=10)
    _passes(cell, r, obj)
    assert [(m.part, m.how) for m in r.moves] == [("b", "shift"), ("y", "shift")]
    d = [np.subtract(m.dst, m.src) for m in r.moves]
    assert np.allclose(d[0], d[1]) and r.moves[1].yaw == 20.0


def test_inner_boxes_lie_inside_the_shapes(cell):
    obj = {"parts": [{"id": "a", "type": "slab", "pos": [0.4, 0.4, 0.01], "yaw": 33.3},
                     {"id": "k", "type": "can", "pos": [0.5, 0.5, 0.05]},
                     {"id": "c", "type": "cube", "pos": [0.6, 0.4, 0.025], "yaw": -45},
                     {"id": "p", "type": "slab", "pos": [0.4, 0.6, 0.01]}]}
    sh = build_instance(cell, layout_from_obj(obj)).shapes
    assert sh is not None
    inner = inner_half(sh)
    assert inner[3].tolist() == [1000, 400]  # a plain box: itself
    for k in range(3):  # every corner of the square inside the footprint (exact kernel)
        a = int(inner[k, 0])
        assert a > 0 and inner[k, 1] == a
        geo = sh.geo(np.array([k]), exact=True)
        for sx in (-1, 1):
            for sy in (-1, 1):
                x, y = geo.cx[0] + sx * a, geo.cy[0] + sy * a
                if sh.cyl[k]:
                    assert (x - geo.cx[0]) ** 2 + (y - geo.cy[0]) ** 2 <= geo.hx[0] ** 2
                else:  # in the part's own frame
                    u = (x - geo.cx[0]) * geo.c[0] + (y - geo.cy[0]) * geo.s[0]
                    v = -(x - geo.cx[0]) * geo.s[0] + (y - geo.cy[0]) * geo.c[0]
                    assert abs(u) <= geo.hx[0] and abs(v) <= geo.hy[0]


def test_cli_repair_writes_a_layout_that_checks_exactly(tmp_path, cell_file):
    src = tmp_path / "l.json"
    src.write_text(json.dumps(STACKED))
    out = tmp_path / "out.json"
    p = run_cellspec("repair", cell_file, src, "-o", out)
    assert p.returncode == 0 and "moved y" in p.stdout and "yaw 33.3 kept" in p.stdout, (
        p.stdout + p.stderr)
    assert '"yaw": 33.3' in out.read_text()
    p = run_cellspec("check", cell_file, out, "--format", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["verdict"] == "pass", p.stdout


H = {"cube": 0.05, "slab": 0.02, "can": 0.1}


def _random(seed: int, n: int, lift: bool) -> dict:
    """n parts at random on the table (``lift``: some lifted into the air), most boxes at a
    random yaw; overlaps, keep-out and gravity violations come by chance."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(n):
        t = ("cube", "slab", "can")[int(rng.integers(3))]
        z = H[t] / 2 + (float(rng.choice([0, 0, 0.02, 0.05])) if lift else 0.0)
        p: dict = {"id": f"p{k}", "type": t, "pos": [round(float(rng.uniform(0.36, 0.64)), 4),
                                                     round(float(rng.uniform(0.36, 0.64)), 4),
                                                     round(z, 4)]}
        if t != "can" and rng.random() < 0.8:
            p["yaw"] = round(float(rng.uniform(-80, 80)), 1)
        parts.append(p)
    return {"parts": parts}


@pytest.mark.parametrize("seed, n, lift", [(2, 5, False), (5, 5, False), (7, 5, False),
                                           (13, 5, False), (3, 7, True), (8, 7, True)])
def test_random_yawed_layouts_repair_to_exact_passes(cell, seed, n, lift):
    obj = _random(seed, n, lift)
    lay = layout_from_obj(obj)
    assert check(cell, lay).verdict == "fail"
    r = repair(cell, lay, time_limit=3)
    _passes(cell, r, obj)
    odd = {p["id"] for p in obj["parts"] if p.get("yaw") or p["type"] == "can"}
    assert {m.part for m in r.moves} & odd  # the seeds chosen move a yawed box or a can
    for m in r.moves:  # a yawed box reports its kept yaw
        src = next(p for p in obj["parts"] if p["id"] == m.part)
        assert m.yaw == src.get("yaw") and m.yaw_kept == bool(src.get("yaw"))


# two cubes at 45 degrees nest along the diagonal in an 0.11 m square: their enclosing
# boxes (0.0707 m) cannot both fit side by side, their exact shapes can
DIAMOND = """\
import physical
cell diamond {
    workspace x [0, 0.11] y [0, 0.11] z [0, 0.05]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
}
"""
NESTED = {"parts": [{"id": "c1", "type": "cube", "pos": [0.0359, 0.0359, 0.025], "yaw": 45},
                    {"id": "c2", "type": "cube", "pos": [0.0714, 0.0714, 0.025], "yaw": 45}]}
# the same two with c2 stacked out of the workspace's 0.05 m height
OUT = {"parts": [NESTED["parts"][0],
                 {"id": "c2", "type": "cube", "pos": [0.0359, 0.0359, 0.075], "yaw": 45}]}


def test_repair_never_calls_impossible_what_only_its_enclosing_boxes_rule_out(
        tmp_path_factory):
    cell = cellspec.load_cell(write_cell(tmp_path_factory, DIAMOND))
    assert check(cell, layout_from_obj(NESTED)).verdict == "pass"  # a layout exists
    r = repair(cell, layout_from_obj(OUT), time_limit=5)
    assert r.status == "unknown" and r.layout is None
    assert "enclosing boxes (conservative)" in r.reason and "not a proof" in r.reason
    assert r.conflict == ("no_overlap", "workspace")  # what the model could not satisfy


def test_a_yaw_a_hair_off_a_quarter_turn_is_no_proof_of_impossibility(tmp_path_factory):
    # two cubes fill a 0.1 x 0.05 x 0.05 workspace exactly; at yaw 89.9995 the first one's
    # enclosing box is rounded outward, and neither the room bound nor the model may take
    # that for a proof
    cell = cellspec.load_cell(write_cell(tmp_path_factory, DIAMOND.replace(
        "x [0, 0.11] y [0, 0.11]", "x [0, 0.1] y [0, 0.05]")))
    side = {"parts": [{"id": "c1", "type": "cube", "pos": [0.025, 0.025, 0.025],
                       "yaw": 89.9995},
                      {"id": "c2", "type": "cube", "pos": [0.075, 0.025, 0.025]}]}
    assert check(cell, layout_from_obj(side)).verdict == "pass"
    stacked = json.loads(json.dumps(side))
    stacked["parts"][1]["pos"] = [0.025, 0.025, 0.075]
    r = repair(cell, layout_from_obj(stacked), time_limit=5)
    assert r.status != "infeasible"
    if r.status == "unknown":
        assert "not a proof" in r.reason
    else:
        assert r.verdict.verdict == "pass"
    # exactly at a quarter turn the boxes are the parts: repaired, proved minimal
    stacked["parts"][0]["yaw"] = 90
    r = repair(cell, layout_from_obj(stacked), time_limit=5)
    assert r.status == "optimal" and [m.part for m in r.moves] == ["c2"]


def test_a_yawed_part_longer_than_the_workspace_is_still_proved_impossible(tmp_path_factory):
    # a 30-degree cube is 0.0683 m across on y: it fits in no 0.05 m wide workspace, at any
    # position (its extent does not change when it moves)
    cell = cellspec.load_cell(write_cell(tmp_path_factory, DIAMOND.replace(
        "y [0, 0.11]", "y [0, 0.05]")))
    lay = {"parts": [{"id": "c1", "type": "cube", "pos": [0.05, 0.025, 0.025], "yaw": 30}]}
    r = repair(cell, layout_from_obj(lay), time_limit=5)
    assert r.status == "infeasible" and "c1 is 0.0684 m along y" in r.reason
