"""Generation at scale (issue 29.4): a packing of 1 000 cubes is placed constructively on
the generator's lattice and re-verified by clingo, in seconds (one CP-SAT model found no
placement in 30 s)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import write_cell

import cellspec
from cellspec.dsl.design import load_designs
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.generate import generate

BIG = """\
import physical
import stability

cell big_floor {
    units m
    workspace x [0, 1.6] y [0, 1.6] z [0, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
    keepout post box x [0.7, 0.9] y [0.7, 0.9] z [0, 0.3]
}

design low {
    packing(n=1000, region x [0.05, 1.55] y [0.05, 1.55], minimize height)
}

design tight {
    packing(n=1000, region x [0.05, 1.55] y [0.05, 1.55], minimize footprint)
}
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    f = write_cell(tmp_path_factory, BIG)
    return cellspec.load_cell(str(f)), {d.name: d for d in load_designs(f)}


@pytest.mark.parametrize("name,height", [("low", 0.10), ("tight", 0.30)])
def test_a_packing_of_1000_cubes_is_generated_and_verified(big, name, height):
    cell, designs = big
    t0 = time.perf_counter()
    r = generate(cell, designs[name], time_limit=30)
    took = time.perf_counter() - t0
    assert r.status == "feasible" and r.verdict.verdict == "pass", r.reason
    lay = layout_from_obj(r.layout)
    assert len(lay) == 1000 and lay.order is not None and len(lay.order) == 1000
    assert cellspec.check(cell, lay).verdict == "pass"
    top = float(np.max(lay.pos[:, 2])) + 0.025
    assert top == pytest.approx(height)  # level by level: 2 levels; column by column: 6
    # the keep-out's columns stay empty
    inside = (lay.pos[:, 0] > 0.675) & (lay.pos[:, 0] < 0.925) & (lay.pos[:, 1] > 0.675) & (
        lay.pos[:, 1] < 0.925)
    assert not inside.any()
    assert took < 15  # issue target 5 s on an idle machine; loaded CI gets slack


def test_a_small_packing_keeps_the_cp_sat_path(big):
    cell, designs = big
    small = designs["low"].model_copy(update={"structures": (
        designs["low"].structures[0].model_copy(update={"params": {"n": 12}}),)})
    r = generate(cell, small, time_limit=20)
    assert r.status in ("optimal", "feasible") and len(r.layout["parts"]) == 12
