"""Issue 22's input: a layout part's ``yaw`` and ``part T cylinder radius R height H``.

Validated (hostile values are exit 2 naming the JSON path or file:line:col), carried through
the data model, round-tripped, and refused by name by every layer that cannot decide them
yet (never decided as if they were their enclosing box)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import run_cellspec

import cellspec
from cellspec import CellspecError
from cellspec.layout import layout_from_obj
from cellspec.solver.instance import build_instance, enclosing_boxes

CELL = """\
cell c {
    workspace x [0, 1] y [0, 1] z [0, 1]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part slab size (0.10, 0.04, 0.02)
    part can cylinder radius 0.03 height 0.1 mass 0.2
}
"""


@pytest.fixture()
def cell(tmp_path):
    f = tmp_path / "c.cell"
    f.write_text(CELL)
    return cellspec.load_cell(f)


def _lay(*parts: dict, **kw) -> dict:
    return {"parts": list(parts), **kw}


@pytest.mark.parametrize("yaw, needle", [
    (float("nan"), "parts[0].yaw"), (1e9, "parts[0].yaw: 1e+09 degrees is absurd"),
    ("30", "parts[0].yaw"), (True, "parts[0].yaw"), ([30], "parts[0].yaw")])
def test_bad_yaw_is_named(yaw, needle):
    obj = _lay({"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025], "yaw": yaw})
    with pytest.raises(CellspecError) as e:
        layout_from_obj(obj, "l.json")
    assert needle in str(e.value)


def test_yaw_round_trips_and_zero_is_not_written():
    obj = _lay({"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025], "yaw": 30.5},
               {"id": "b", "type": "cube", "pos": [0.5, 0.2, 0.025], "yaw": 0})
    lay = layout_from_obj(obj)
    assert lay.yaw.tolist() == [30.5, 0.0] and lay.yawed
    out = lay.to_json()
    assert out["parts"][0]["yaw"] == 30.5 and "yaw" not in out["parts"][1]
    assert layout_from_obj(out).to_json() == out
    plain = layout_from_obj(_lay({"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]}))
    assert not plain.yawed and "yaw" not in plain.to_json()["parts"][0]


def test_cylinder_type_and_its_mass(cell):
    pt = cell.part_types["can"]
    assert pt.shape == "cylinder" and float(pt.radius) == 0.03
    assert [float(v) for v in pt.size] == [0.06, 0.06, 0.1]
    assert cell.part_types["cube"].shape == "box" and cell.part_types["cube"].radius is None
    lay = layout_from_obj(_lay({"id": "k", "type": "can", "pos": [0.4, 0.2, 0.05]},
                               {"id": "s", "type": "slab", "pos": [0.6, 0.2, 0.01]}))
    inst = build_instance(cell, lay)
    assert inst.masses[0] == pytest.approx(0.2)  # the type's mass, as written
    assert inst.masses[1] == pytest.approx(0.10 * 0.04 * 0.02 * 1000)
    big = layout_from_obj(_lay({"id": "k", "type": "can", "pos": [0.4, 0.2, 0.1],
                                "size": [0.06, 0.06, 0.2]}))
    assert build_instance(cell, big).masses[0] == pytest.approx(0.4)  # same density


@pytest.mark.parametrize("text, needle", [
    ("part can cylinder radius 0 height 0.1", "positive radius and height"),
    ("part can cylinder radius 0.02 height -1", "positive radius and height"),
    ("part can cylinder radius 0.02 mass 1", "expected 'height'"),
    ("part can cylinder height 0.1 radius 0.02", "expected 'radius'"),
])
def test_bad_cylinder_type(tmp_path, text, needle):
    f = tmp_path / "bad.cell"
    f.write_text(f"cell c {{\n    workspace x [0, 1] y [0, 1] z [0, 1]\n    {text}\n}}\n")
    with pytest.raises(CellspecError) as e:
        cellspec.load_cell(f)
    assert f"{f}:3:" in str(e.value) and needle in str(e.value)


def test_cylinder_size_must_be_round(cell):
    lay = layout_from_obj(_lay({"id": "k", "type": "can", "pos": [0.4, 0.2, 0.05],
                                "size": [0.06, 0.05, 0.1]}), "l.json")
    with pytest.raises(CellspecError, match=r"parts\[0\].size: part 'k' is a cylinder"):
        build_instance(cell, lay)


def test_plain_rows_and_quarter_turns(cell):
    lay = layout_from_obj(_lay(
        {"id": "a", "type": "slab", "pos": [0.4, 0.2, 0.01], "yaw": 90},
        {"id": "b", "type": "slab", "pos": [0.6, 0.2, 0.01], "yaw": -180}))
    inst = build_instance(cell, lay)
    assert inst.plain and inst.shapes is None and inst.yaw_deg is None
    # yaw 90: the slab's sizes are swapped exactly; yaw 180: unchanged
    assert (inst.boxes[0, 1] - inst.boxes[0, 0], inst.boxes[0, 3] - inst.boxes[0, 2]) == (800, 2000)
    assert (inst.boxes[1, 1] - inst.boxes[1, 0], inst.boxes[1, 3] - inst.boxes[1, 2]) == (2000, 800)
    assert lay.yawed  # the twin still sees the written yaws
    turned = layout_from_obj(_lay({"id": "a", "type": "slab", "pos": [0.4, 0.2, 0.01],
                                   "yaw": 30},
                                  {"id": "k", "type": "can", "pos": [0.6, 0.2, 0.05]}))
    inst = build_instance(cell, turned)
    assert not inst.plain and inst.cyl.tolist() == [False, True]


@pytest.mark.parametrize("seed", range(5))
def test_enclosing_boxes_contain_the_rotated_corners(seed):
    rng = np.random.default_rng(seed)
    n = 200
    c = rng.integers(-20000, 20000, (n, 3))
    h = rng.integers(1, 4000, (n, 3))
    boxes = np.empty((n, 6), dtype=np.int64)
    boxes[:, 0::2] = c - h
    boxes[:, 1::2] = c + h
    yaw = rng.uniform(-720, 720, n)
    out = enclosing_boxes(boxes, yaw, np.zeros(n, dtype=bool))
    th = np.radians(yaw)
    for sx in (-1, 1):
        for sy in (-1, 1):
            x = c[:, 0] + sx * h[:, 0] * np.cos(th) - sy * h[:, 1] * np.sin(th)
            y = c[:, 1] + sx * h[:, 0] * np.sin(th) + sy * h[:, 1] * np.cos(th)
            assert np.all(out[:, 0] <= x) and np.all(x <= out[:, 1])
            assert np.all(out[:, 2] <= y) and np.all(y <= out[:, 3])
    assert np.array_equal(out[:, 4:], boxes[:, 4:])  # z is exact


def test_inline_test_parts_take_a_yaw(tmp_path):
    f = tmp_path / "t.cell"
    f.write_text(CELL + """
test turned {
    layout {
        a slab at (0.40, 0.20, 0.01) yaw 30
    }
    expect pass
}
""")
    cell = cellspec.load_cell(f)
    assert float(cell.tests[0].parts[0].yaw) == 30
    bad = tmp_path / "bad.cell"
    bad.write_text(CELL + "test t {\n    layout {\n        a slab at (0.4, 0.2, 0.01) yaw 1e9\n"
                   "    }\n    expect pass\n}\n")
    with pytest.raises(CellspecError, match="absurd"):
        cellspec.load_cell(bad)


def test_fmt_keeps_cylinders_and_yaw(tmp_path):
    f = tmp_path / "t.cell"
    f.write_text(CELL.replace("    part can", "  part   can") + "test t {\n layout {\n"
                 "  a slab at (0.4, 0.2, 0.01) yaw 30\n }\n expect pass\n}\n")
    res = run_cellspec("fmt", str(f))
    assert res.returncode == 0, res.stderr
    text = f.read_text()
    assert "    part can cylinder radius 0.03 height 0.1 mass 0.2\n" in text
    assert "a slab at (0.4, 0.2, 0.01) yaw 30" in text
    assert run_cellspec("fmt", "--check", str(f)).returncode == 0


def test_every_verb_decides_shapes_with_the_standard_rules(tmp_path):
    """Issue 22: check (stability included), plan, repair and explain decide a yawed stack
    and a cylinder with ``import physical``; no layer refuses them any more."""
    (tmp_path / "c.cell").write_text("import physical\n" + CELL)
    (tmp_path / "l.json").write_text(json.dumps(_lay(
        {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025], "yaw": 30},
        {"id": "b", "type": "cube", "pos": [0.4, 0.2, 0.075], "yaw": 45},
        {"id": "k", "type": "can", "pos": [0.6, 0.2, 0.05]})))
    c, lay = str(tmp_path / "c.cell"), str(tmp_path / "l.json")
    res = run_cellspec("check", c, lay, "--format", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["verdict"] == "pass", res.stdout
    res = run_cellspec("plan", c, lay)
    assert res.returncode == 0 and "re-verified" in res.stdout, res.stdout + res.stderr
    assert res.stdout.index(" a ") < res.stdout.index(" b ")  # a carries b: placed first
    assert run_cellspec("repair", c, lay).returncode == 0
    assert run_cellspec("explain", c, lay).returncode == 0
    # moved 3 cm off its support, the turned top cube falls: named, never a pass
    (tmp_path / "f.json").write_text(json.dumps(_lay(
        {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025], "yaw": 30},
        {"id": "b", "type": "cube", "pos": [0.43, 0.2, 0.075], "yaw": 45})))
    res = run_cellspec("check", c, str(tmp_path / "f.json"), "--format", "json")
    out = json.loads(res.stdout)
    assert res.returncode == 1 and {v["rule"] for v in out["violations"]} == {"stability"}


def test_yaw_is_an_angle_not_a_size():
    lay = layout_from_obj(_lay({"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025],
                                "yaw": 3600}))
    assert lay.yaw_of(0) == 3600.0 and math.fmod(lay.yaw_of(0), 90) == 0
