"""Issue 22 in the world layer: entities keep their yaw and shape (database version 2),
relations are decided on the exact shapes, a box's turn is a discrepancy and a cylinder's spin
is not, the simulation spawns shapes as they are, and ``cellspec run`` builds a layout with a
turned box and a cylinder end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cellspec

import cellspec
from cellspec.core.errors import CellspecError
from cellspec.layout import layout_from_obj
from cellspec.world import association as assoc
from cellspec.world.db import Entity, Transition, WorldRelation, open_world
from cellspec.world.discrepancy import (
    TURN_TOL_DEG,
    State,
    delta,
    derive_relations,
    state_from_json,
    turn_deg,
)

SURF = (("table", 0.0),)
CELL = """\
import physical
import diagnosis

cell shape_station {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part bar size (0.06, 0.03, 0.03) mass 0.05
    part can cylinder radius 0.02 height 0.05 mass 0.1
    robot irb1600 model abb_irb1600 base (0.95, 0.275, 0) yaw 180 reach 1.2 gripper parallel \
opening 0.07 depth 0.02
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
    trajectory epsilon 0.05
    home irb1600 (-1.5708, -0.3, 0.3, 0, 1.5708, 0)
    force grasp 5
    force collision 15
    force contact 10 for 0.5
    stability off
}
"""
LAYOUT = {"units": "m",
          "parts": [{"id": "c1", "type": "cube", "pos": [0.40, 0.20, 0.025]},
                    {"id": "c2", "type": "cube", "pos": [0.40, 0.20, 0.075], "yaw": 30},
                    {"id": "k1", "type": "can", "pos": [0.55, 0.25, 0.025]}],
          "order": ["c1", "c2", "k1"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("wshapes")
    (d / "shapes.cell").write_text(CELL)
    (d / "shapes.json").write_text(json.dumps(LAYOUT))
    return d / "shapes.cell", d / "shapes.json"


def ent(eid: str, pos: tuple[float, float, float], yaw: float = 0.0, shape: str = "box",
        typ: str = "cube", size: tuple[float, float, float] = (0.05, 0.05, 0.05)) -> Entity:
    return Entity(eid, typ, pos, size, yaw=yaw, shape=shape)


# -- the database ----------------------------------------------------------------------------

def test_db_round_trips_yaw_and_shape(tmp_path: Path) -> None:
    ents = [ent("c1", (0.4, 0.2, 0.025)), ent("c2", (0.4, 0.2, 0.075), yaw=30.0),
            ent("k1", (0.55, 0.25, 0.025), shape="cylinder", typ="can",
                size=(0.04, 0.04, 0.05))]
    with open_world(tmp_path / "w.db", create=True, cell="x") as w:
        assert w.transition(Transition("init", "*", upserts=ents))
    with open_world(tmp_path / "w.db") as w:
        got = {e.id: e for e in w.entities()}
        assert got["c2"].yaw == 30.0 and got["c2"].shape == "box"
        assert got["k1"].shape == "cylinder" and got["k1"].yaw == 0.0
        assert got == {e.id: e for e in ents}
        js = {e["id"]: e for e in w.snapshot()["entities"]}
    assert js["c2"]["yaw"] == 30.0 and "shape" not in js["c2"]
    assert js["k1"]["shape"] == "cylinder" and "yaw" not in js["k1"]
    assert "yaw" not in js["c1"] and "shape" not in js["c1"]  # box-only output as before


def test_version_1_database_is_refused_by_name(tmp_path: Path) -> None:
    p = tmp_path / "old.db"
    with open_world(p, create=True, cell="x"):
        pass
    con = sqlite3.connect(str(p))
    con.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
    con.commit()
    con.close()
    with pytest.raises(CellspecError, match="version 1 is not supported.*yaw and shape"):
        open_world(p)


def test_bad_yaw_or_shape_is_never_written(tmp_path: Path) -> None:
    with open_world(tmp_path / "w.db", create=True) as w:
        for bad, msg in ((ent("a", (0, 0, 0), yaw=float("nan")), "finite"),
                         (ent("a", (0, 0, 0), yaw=1e9), "beyond"),
                         (ent("a", (0, 0, 0), shape="sphere"), "shape")):
            with pytest.raises(CellspecError, match=msg):
                w.transition(Transition("place", "a", upserts=[bad]))
        assert w.entities() == []


def test_association_keeps_yaw_and_shape() -> None:
    bel = [ent("c2", (0.4, 0.2, 0.075), yaw=30.0)]
    obs = [assoc.Observation("cube", (0.401, 0.2, 0.075), (0.05, 0.05, 0.05), yaw=31.0)]
    upd = assoc.update(bel, obs, [])
    assert upd.entities[0].yaw == 31.0 and upd.entities[0].shape == "box"


# -- relations -------------------------------------------------------------------------------

def test_yawed_box_on_a_box() -> None:
    a = ent("a", (0.4, 0.2, 0.025))
    rels = set(derive_relations((a, ent("b", (0.4, 0.2, 0.075), yaw=30.0)), SURF, None))
    assert WorldRelation("on", "b", "a") in rels and WorldRelation("on", "a", "table") in rels
    # centroid 4.5 cm off a's centre on x: over no part of a's footprint, resting on nothing
    off = ent("b", (0.445, 0.2, 0.075), yaw=45.0)
    rels = set(derive_relations((a, off), SURF, None))
    assert WorldRelation("on", "b", "a") not in rels
    # a 45° cube's corner points along x: a cube 1.2 cm beyond it is not near, 0.8 cm is
    far = ent("c", (0.4 + 0.0354 + 0.025 + 0.012, 0.2, 0.025))
    near = ent("c", (0.4 + 0.0354 + 0.025 + 0.008, 0.2, 0.025))
    turned = ent("a", (0.4, 0.2, 0.025), yaw=45.0)
    assert WorldRelation("near", "a", "c") not in set(derive_relations((turned, far), SURF, None))
    assert WorldRelation("near", "a", "c") in set(derive_relations((turned, near), SURF, None))


def test_turned_box_is_not_its_enclosing_box() -> None:
    """Two 45° cubes on a diagonal, faces 1.5 cm apart: their enclosing boxes (7.07 cm)
    overlap, so boxes would say near (1 cm); the shapes are not near."""
    d = (0.05 + 0.015) / np.sqrt(2)
    a = ent("a", (0.40, 0.2, 0.025), yaw=45.0)
    b = ent("b", (0.40 + d, 0.2 + d, 0.025), yaw=45.0)
    assert WorldRelation("near", "a", "b") not in set(derive_relations((a, b), SURF, None))
    boxes = [Entity(e.id, "cube", e.pos, e.extent()) for e in (a, b)]
    assert WorldRelation("near", "a", "b") in set(derive_relations(tuple(boxes), SURF, None))
    c = ent("b", (0.40 + 0.04, 0.2 + 0.04, 0.025), yaw=45.0)  # faces 0.66 cm apart
    assert WorldRelation("near", "a", "b") in set(derive_relations((a, c), SURF, None))


def test_cylinder_relations_and_inside() -> None:
    can = ent("k", (0.5, 0.2, 0.075), shape="cylinder", typ="can", size=(0.04, 0.04, 0.05))
    base = ent("b", (0.5, 0.2, 0.025))
    rels = set(derive_relations((base, can), SURF, None))
    assert WorldRelation("on", "k", "b") in rels
    tray = ent("t", (0.5, 0.2, 0.03), typ="tray", size=(0.2, 0.2, 0.06), yaw=30.0)
    small = ent("s", (0.52, 0.2, 0.02), typ="peg", size=(0.02, 0.02, 0.02),
                shape="cylinder")
    outside = ent("o", (0.59, 0.29, 0.02), typ="peg", size=(0.02, 0.02, 0.02),
                  shape="cylinder")
    rels = set(derive_relations((tray, small, outside), SURF, None))
    assert WorldRelation("inside", "s", "t") in rels
    # (0.59, 0.29) lies in the tray's enclosing box, not in the turned tray itself
    assert WorldRelation("inside", "o", "t") not in rels


def test_gripper_holding_a_turned_box() -> None:
    b = ent("b", (0.4, 0.2, 0.2), yaw=20.0)
    pad = ((0.4, 0.2, 0.23), (0.03, 0.03, 0.01))
    assert WorldRelation("holding", "gripper", "b") in derive_relations((b,), SURF, pad)


# -- the discrepancy -------------------------------------------------------------------------

def _state(*objs: Entity) -> State:
    return State(cs=("idle", None), objects=objs,
                 relations=derive_relations(objs, SURF, None))


def test_cylinder_spin_is_not_a_discrepancy() -> None:
    can = ent("k", (0.5, 0.2, 0.025), shape="cylinder", typ="can", size=(0.04, 0.04, 0.05))
    spun = ent("k", can.pos, yaw=73.0, shape="cylinder", typ="can", size=can.size)
    d = delta(_state(can), _state(spun))
    assert d.turn == {} and not d.significant()


def test_box_turn_of_20_degrees_is_a_discrepancy() -> None:
    bar = ent("b", (0.5, 0.2, 0.015), yaw=10.0, typ="bar", size=(0.06, 0.03, 0.03))
    d = delta(_state(bar), _state(ent("b", bar.pos, yaw=30.0, typ="bar", size=bar.size)))
    assert d.turn == {"b": pytest.approx(20.0)} and d.significant()
    assert "turn(\"b\", 2000)." in d.facts() and d.to_json()["turn"] == {"b": 20.0}
    small = delta(_state(bar), _state(ent("b", bar.pos, yaw=12.0, typ="bar", size=bar.size)))
    assert small.turn["b"] < TURN_TOL_DEG and not small.significant()
    # a half turn of a bar, a quarter turn of a cube: the same shape in the same place
    assert turn_deg(bar, ent("b", bar.pos, yaw=190.0, typ="bar", size=bar.size)) == 0.0
    assert turn_deg(ent("c", (0, 0, 0), yaw=5.0), ent("c", (0, 0, 0), yaw=95.0)) == 0.0
    # a plain box turned by 20 degrees (no yaw before)
    cube = ent("c", (0.4, 0.2, 0.025))
    assert delta(_state(cube), _state(ent("c", cube.pos, yaw=20.0))).significant()


def test_state_file_yaw_and_shape_defaults(files: tuple[Path, Path]) -> None:
    obj = {"objects": [{"id": "k1", "type": "can", "pos": [0.5, 0.2, 0.025]},
                       {"id": "c2", "type": "cube", "pos": [0.4, 0.2, 0.025], "yaw": 30}]}
    st = state_from_json(obj, "s.json", SURF, {"can": (0.04, 0.04, 0.05),
                                               "cube": (0.05, 0.05, 0.05)},
                         {"can": "cylinder", "cube": "box"})
    got = {o.id: o for o in st.objects}
    assert got["k1"].shape == "cylinder" and got["c2"].yaw == 30.0


@pytest.mark.parametrize("obj", [{"type": ["can"], "pos": [0.5, 0.2, 0.025]},
                                 {"type": ["can"], "pos": [0.5, 0.2, 0.025], "size": [1, 1, 1]}])
def test_state_file_list_type_is_bad_input(obj: dict) -> None:
    """A type that is a list is bad input (it was a TypeError: a list cannot be a key)."""
    with pytest.raises(CellspecError, match="'type' must be a non-empty string"):
        state_from_json({"objects": [obj]}, "s.json", SURF, {"can": (0.04, 0.04, 0.05)},
                        {"can": "cylinder"})


@pytest.mark.parametrize("yaw, msg", [("NaN", "NaN or infinity"), ('"30"', "a number"),
                                      ("1e9", "beyond")])
def test_bad_yaw_in_an_observation_file_exits_2(files: tuple[Path, Path], tmp_path: Path,
                                                 yaw: str, msg: str) -> None:
    cell, _ = files
    exp = tmp_path / "exp.json"
    exp.write_text('{"objects": [{"id": "c1", "type": "cube", "pos": [0.4, 0.2, 0.025]}]}')
    obs = tmp_path / "obs.json"
    obs.write_text('{"objects": [{"id": "c1", "type": "cube", "pos": [0.4, 0.2, 0.025]},\n'
                   f'  {{"id": "c2", "type": "cube", "pos": [0.5, 0.2, 0.025], "yaw": {yaw}}}]}}')
    r = run_cellspec("diagnose", cell, exp, obs)
    assert r.returncode == 2, r.stderr
    assert f"{obs}: objects[1].yaw" in r.stderr and msg in r.stderr
    assert "Traceback" not in r.stderr


# -- the simulation and the run --------------------------------------------------------------

def test_sim_spawns_shapes_as_they_are() -> None:
    from cellspec.world.sim import Sim

    sim = Sim(0.0, 0)
    try:
        sim.add_box("b", "bar", (0.06, 0.03, 0.03), (0.4, 0.2, 0.015), 0.05, yaw=30.0)
        sim.add_box("k", "can", (0.04, 0.04, 0.05), (0.5, 0.2, 0.025), 0.1, shape="cylinder")
        sim.step(120)
        assert sim.yaw("b") == pytest.approx(30.0, abs=0.5)
        assert sim.pose("k")[2] == pytest.approx(0.025, abs=0.002)
        ext = sim.extent("b")
        assert ext[0] == pytest.approx(0.06 * np.cos(np.radians(30)) + 0.03 * 0.5, abs=1e-3)
        obs = {o["name"]: o for o in sim.observe(np.random.default_rng(0), 0.0)}
        assert obs["b"]["shape"] == "box" and obs["b"]["yaw"] == pytest.approx(30.0, abs=0.5)
        assert obs["k"]["shape"] == "cylinder"
    finally:
        sim.close()


def test_run_builds_a_turned_box_and_a_cylinder(files: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    cell, layout = files
    db = tmp_path / "w.db"
    r = run_cellspec("run", cell, layout, "--world", db, "--engine", "gripper",
                     "--format", "json", timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["success"] and all(s["outcome"] == "committed" for s in out["steps"])
    with open_world(db) as w:
        got = {e.id: e for e in w.entities()}
        rels = {str(x) for x in w.relations()}
    assert got["c2"].yaw == pytest.approx(30.0, abs=1.0) and got["k1"].shape == "cylinder"
    assert {"on(c2, c1)", "on(c1, table)", "on(k1, table)"} <= rels


def test_run_recovers_a_slipped_turned_box(files: tuple[Path, Path]) -> None:
    """A turned box slips in transport, is diagnosed and regrasped; seeded:
    the same run twice gives the same steps."""
    c = cellspec.load_cell(files[0])
    from cellspec.world.run import Fault, run_layout

    lay = layout_from_obj(LAYOUT, "<test>")
    runs = [run_layout(c, lay, None, faults=(Fault("slip", 3),), seed=1, engine="gripper")
            for _ in range(2)]
    assert runs[0].success, runs[0].reason
    assert runs[0].first_diagnosis == {"slip@3": "slip"}
    assert [s.to_json() for s in runs[0].steps] == [s.to_json() for s in runs[1].steps]
