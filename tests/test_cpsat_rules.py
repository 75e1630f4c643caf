"""The placement model's part rules (cellspec/solver/cpsat/moved_shapes.py), chosen once per
model by ``rules_of``: the box rules when every part is a plain box that stays one, else the
shape rules; the model asks them, never whether the parts are plain. And the constructive
step's per-part capability ``_stackable`` (repair_construct.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_cell
from test_repair_shapes import CELL as SHAPES_CELL

import cellspec
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat import exact
from cellspec.solver.cpsat.moved_shapes import (
    BoxRules,
    ShapeRules,
    box_components,
    inner_half,
    rules_of,
)
from cellspec.solver.cpsat.repair_construct import _stackable
from cellspec.solver.instance import build_instance

CELL = SHAPES_CELL  # the repair tests' cell: cubes, slabs and cans

PLAIN = {"parts": [{"id": "b", "type": "cube", "pos": [0.45, 0.45, 0.025]},
                   {"id": "t", "type": "cube", "pos": [0.45, 0.45, 0.075]},
                   {"id": "q", "type": "slab", "pos": [0.6, 0.45, 0.01], "yaw": 90}]}
SHAPED = {"parts": [{"id": "b", "type": "cube", "pos": [0.45, 0.45, 0.025]},
                    {"id": "y", "type": "slab", "pos": [0.45, 0.45, 0.06], "yaw": 33.3},
                    {"id": "k", "type": "can", "pos": [0.6, 0.6, 0.05]}]}


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    return cellspec.load_cell(write_cell(tmp_path_factory, CELL))


def test_a_plain_layout_gets_the_box_rules(cell):
    inst = build_instance(cell, layout_from_obj(PLAIN))
    r = rules_of(inst)
    assert type(r) is BoxRules and not r.some() and not r.any(0, 1, 2)
    assert r.inner_exprs() is None
    assert r.components().tolist() == box_components(inst.boxes, inst.eps).tolist()


def test_a_layout_with_a_yawed_box_or_a_cylinder_gets_the_shape_rules(cell):
    inst = build_instance(cell, layout_from_obj(SHAPED))
    r = rules_of(inst)
    assert type(r) is ShapeRules and r.some()
    assert r.odd.tolist() == [False, True, True]
    assert r.any(1) and r.any(0, 2) and not r.any(0)
    assert r.components().tolist() == exact.components(inst).tolist()
    inner = inner_half(inst.kernel().as_shapes())
    assert r.inner_exprs() == [[int(inner[i, a]) for a in range(2)] for i in range(inst.n)]
    assert r.supports0(0, 1)  # the cube carries the yawed slab, exactly


def test_a_plain_part_that_may_turn_off_a_quarter_turn_gets_the_shape_rules(cell):
    inst = build_instance(cell, layout_from_obj(PLAIN))
    extra = np.array([False, False, True])
    r = rules_of(inst, extra)
    assert type(r) is ShapeRules and r.odd.tolist() == [False, False, True]
    assert type(rules_of(inst, np.zeros(3, dtype=bool))) is BoxRules


def test_stackable_is_a_box_at_a_quarter_turn(cell):
    assert _stackable(build_instance(cell, layout_from_obj(PLAIN))).tolist() == [True] * 3
    shaped = build_instance(cell, layout_from_obj(SHAPED))
    assert _stackable(shaped).tolist() == [True, False, False]
