"""The geometry kernel's capabilities (cellspec/core/kernel.py): callers ask the kernel a named
question (``boxes_are_parts``, ``exact_on_grid``) instead of whether the parts are plain, and
``build_instance`` chooses the geometry in one place (``Instance.plain`` follows from it)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import write_cell
from test_shapes_input import CELL  # cubes, slabs and cans

import cellspec
from cellspec.core.kernel import BoxKernel, ShapeKernel, kernel_of
from cellspec.core.shapes import shapes_u
from cellspec.layout import layout_from_obj
from cellspec.solver.instance import build_instance
from cellspec.solver.rounding import needs_analysis


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    return cellspec.load_cell(write_cell(tmp_path_factory, CELL))


def _inst(cell, *parts: dict):
    return build_instance(cell, layout_from_obj({"parts": list(parts)}))


CUBE = {"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025]}


def test_the_two_kernels_declare_their_capabilities():
    boxes = np.array([[0, 10, 0, 10, 0, 10]], dtype=np.int64)
    box = kernel_of(boxes, None)
    shaped = kernel_of(boxes, shapes_u(boxes, np.array([30.0]), np.array([False])))
    assert type(box) is BoxKernel and type(shaped) is ShapeKernel
    assert box.boxes_are_parts and box.exact_on_grid
    assert not shaped.boxes_are_parts and not shaped.exact_on_grid


def test_plain_instance_has_no_shapes_and_a_box_kernel(cell):
    inst = _inst(cell, CUBE, {**CUBE, "id": "b", "pos": [0.6, 0.2, 0.025], "yaw": 90})
    assert inst.plain and inst.shapes is None and inst.yaw_deg is None and inst.cyl is None
    assert type(inst.kernel()) is BoxKernel and inst.kernel().boxes_are_parts
    assert not needs_analysis(inst)  # on the grid, boxes: decided exactly as written


@pytest.mark.parametrize("other", [
    {"id": "b", "type": "cube", "pos": [0.6, 0.2, 0.025], "yaw": 30},
    {"id": "b", "type": "can", "pos": [0.6, 0.2, 0.05]}])
def test_shaped_instance_chooses_its_shapes_once(cell, other):
    inst = _inst(cell, CUBE, other)
    assert not inst.plain and inst.shapes is not None
    assert inst.yaw_deg is not None and inst.cyl is not None
    kern = inst.kernel()
    assert type(kern) is ShapeKernel and kern.as_shapes() is inst.shapes
    assert (inst.boxes == inst.shapes.box).all()  # the enclosing boxes
    assert not kern.boxes_are_parts and not kern.exact_on_grid
    assert needs_analysis(inst)  # the yaws or the cylinder round to the kernel's
