"""The constructive first repair (issue 29.1) and "impossible only when proved" (issue 28.2):
messy scatters get a verified repair at once, a layout without room gets ``infeasible``
with the bound that proves it, the deadline holds, and the output repeats byte for byte.
Every repaired layout is re-verified here by clingo and by the numpy reference."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from conftest import STATION, write_cell

import cellspec
from cellspec.cli import main
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.cpsat.repair_construct import construct, instance_of, room_proof

FOUR_FLOATING = {"units": "m", "parts": [
    {"id": "p6", "type": "cube", "pos": [0.5843, 0.1836, 0.1656]},
    {"id": "p9", "type": "cube", "pos": [0.4259, 0.1166, 0.0595]},
    {"id": "p10", "type": "cube", "pos": [0.5094, 0.1936, 0.1915]},
    {"id": "p11", "type": "cube", "pos": [0.489, 0.1583, 0.1397]}],
    "order": ["p6", "p9", "p10", "p11"]}

SHAPES = """\
import physical
import stability
cell mixed {
    workspace x [0.2, 0.7] y [0.05, 0.5] z [0, 0.3]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part slab size (0.10, 0.04, 0.02) mass 0.1
    part can cylinder radius 0.025 height 0.08 mass 0.2
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}
"""

LOW = """\
import physical
cell low {
    workspace x [0, 0.3] y [0, 0.25] z [0, 0.06]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    default gripper parallel opening 0.07 depth 0.02
    tolerance contact 0.001
}
"""


@pytest.fixture(scope="module")
def station():
    return cellspec.load_cell(str(STATION))


def _verified(cell, original: Layout, r) -> Layout:
    assert r.status in ("optimal", "feasible"), r.reason
    fixed = layout_from_obj(r.layout)
    assert cellspec.check(cell, fixed).verdict == "pass"
    assert cellspec.check(cell, fixed, backend="reference").verdict == "pass"
    moved = {m.part for m in r.moves}
    for i, pid in enumerate(original.ids):
        if pid not in moved:
            assert np.allclose(fixed.pos[i], original.pos[i])
    return fixed


def scatter(n: int, seed: int, types: tuple[str, ...] = ("cube",), yaw: bool = False,
            ordered: bool = True) -> dict:
    """n parts over the station: half on the table, a quarter one level up, a quarter at a
    random height (the issue's messy proposals)."""
    rng = np.random.default_rng(seed)
    parts = []
    for k in range(n):
        z = (0.025, 0.025, 0.075, float(rng.uniform(0.03, 0.27)))[k * 4 // n]
        p = {"id": f"p{k}", "type": types[k % len(types)],
             "pos": [round(float(rng.uniform(0.2, 0.7)), 4),
                     round(float(rng.uniform(0.05, 0.5)), 4), round(z, 4)]}
        if yaw and k % 2:
            p["yaw"] = round(float(rng.uniform(0, 90)), 1)
        parts.append(p)
    obj: dict = {"units": "m", "parts": parts}
    if ordered:
        obj["order"] = [parts[k]["id"] for k in rng.permutation(n).tolist()]
    return obj


def test_four_floating_cubes_are_repaired_not_impossible(capsys, tmp_path):
    # issue 28.2: main said "impossible: positions repaired but no placement order", exit 1
    f = tmp_path / "four.json"
    f.write_text(json.dumps(FOUR_FLOATING))
    out = tmp_path / "fixed.json"
    rc = main(["repair", str(STATION), str(f), "--format", "json", "-o", str(out)])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["status"] in ("optimal", "feasible"), res
    cell = cellspec.load_cell(str(STATION))
    fixed = cellspec.load_layout(str(out))
    assert fixed.order is not None and sorted(fixed.order) == sorted(FOUR_FLOATING["order"])
    assert cellspec.check(cell, fixed).verdict == "pass"


@pytest.mark.parametrize("seed", range(8))
def test_a_12_cube_scatter_is_never_called_impossible(station, seed):
    obj = scatter(12, seed)
    lay = layout_from_obj(obj)
    r = repair(station, lay, time_limit=1.0)
    _verified(station, lay, r)


@pytest.mark.parametrize("seed", range(3))
def test_yawed_and_mixed_scatters_are_repaired(tmp_path_factory, seed):
    cell = cellspec.load_cell(str(write_cell(tmp_path_factory, SHAPES)))
    obj = scatter(12, 100 + seed, types=("cube", "can", "slab"), yaw=True)
    lay = layout_from_obj(obj)
    r = repair(cell, lay, time_limit=1.0)
    _verified(cell, lay, r)


def test_a_dense_scatter_gets_a_verified_repair_at_once(station):
    obj = scatter(60, 7)
    lay = layout_from_obj(obj)
    t0 = time.perf_counter()
    r = repair(station, lay, time_limit=3.0)  # generous: the test machine may be loaded
    took = time.perf_counter() - t0
    _verified(station, lay, r)
    assert r.first_seconds is not None and r.first_seconds < 3.0
    assert took < 6.0  # the deadline holds (within 2x)


def test_the_constructive_placement_keeps_what_is_fine(station):
    # two overlapping cubes: one stays, the other moves; a cube resting on the one that
    # stays is kept; the floating one is placed
    obj = {"parts": [{"id": "a", "type": "cube", "pos": [0.40, 0.20, 0.025]},
                     {"id": "b", "type": "cube", "pos": [0.42, 0.20, 0.025]},
                     {"id": "c", "type": "cube", "pos": [0.30, 0.30, 0.025]},
                     {"id": "d", "type": "cube", "pos": [0.30, 0.30, 0.075]},
                     {"id": "e", "type": "cube", "pos": [0.60, 0.40, 0.2]}]}
    lay = layout_from_obj(obj)
    inst = instance_of(station, lay)
    bad = np.array([True, True, False, False, True])
    con = construct(inst, bad)
    assert con.ok and con.kept == (2, 3)  # c and d are fine: kept
    assert con.centres[0] == (4000, 2000, 250)  # a is placed first: where it was
    assert con.centres[1] != (4200, 2000, 250) and con.centres[4][2] in (250, 750)
    r = repair(station, lay, time_limit=2)
    fixed = _verified(station, lay, r)
    assert {m.part for m in r.moves} <= {"a", "b", "e"} and len(r.moves) == 2
    assert fixed.pos[4][2] == pytest.approx(0.025) or fixed.pos[4][2] == pytest.approx(0.075)


def test_no_room_is_infeasible_with_the_bound(tmp_path_factory):
    # 40 cubes cannot fit on a 0.30 x 0.25 m table and cannot stack under a 0.06 m ceiling
    cell = cellspec.load_cell(str(write_cell(tmp_path_factory, LOW)))
    rng = np.random.default_rng(3)
    obj = {"parts": [{"id": f"c{k}", "type": "cube",
                      "pos": [round(float(rng.uniform(0.03, 0.27)), 4),
                              round(float(rng.uniform(0.03, 0.22)), 4), 0.025]}
                     for k in range(40)]}
    lay = layout_from_obj(obj)
    r = repair(cell, lay, time_limit=5)
    assert r.status == "infeasible" and r.layout is None
    assert "40 cubes need 0.0960 m² of surface" in r.reason and "0.0756 m² is free" in r.reason
    assert "no part can rest on another" in r.reason
    assert room_proof(instance_of(cell, lay)) is not None
    # 24 of them fit: a repair, not a proof
    small = layout_from_obj({"parts": obj["parts"][:24]})
    assert room_proof(instance_of(cell, small)) is None
    _verified(cell, small, repair(cell, small, time_limit=5))


def test_same_input_same_output(station):
    lay = layout_from_obj(scatter(20, 5))
    a = repair(station, lay, time_limit=1.0).to_json(timing=False)
    b = repair(station, lay, time_limit=1.0).to_json(timing=False)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_pillar_taken_from_under_a_roof_is_put_back():
    """The canopy's corner pillar dragged out of the workspace leaves the roof floating
    and hanging off its other pillars: the constructive step shifts the pillar, whole,
    back under the roof (3 parts moved, the roof untouched), and clingo re-verifies it
    with every stage of the order standing."""
    from cellspec.dsl.parser import load_cell
    from cellspec.solver.cpsat.repair_first import first_repair
    from cellspec.solver.cpsat.scenarios import SCENARIOS, find_test
    from cellspec.testing.runner import layout_of_test

    cell = load_cell(SCENARIOS / "table_v.cell")
    lay = layout_of_test(find_test(cell, "canopy_21_pillar_moved_to_x_085"))
    before = cellspec.check(cell, lay)
    assert {v.rule for v in before.violations} >= {"workspace", "gravity", "stability"}
    end = time.perf_counter() + 10
    first = first_repair(cell, lay, before, lambda: max(0.05, end - time.perf_counter()),
                         end)
    assert first.layout is not None, first.reason
    assert sorted(m.part for m in first.moves) == ["p4_1", "p4_2", "p4_3"]
    xy = {m.dst[:2] for m in first.moves}
    assert len(xy) == 1  # moved whole: still one column
    assert [m.dst[2] for m in first.moves] == [0.025, 0.075, 0.125]
    assert first.layout.order == lay.order and not first.reordered
    v = cellspec.check(cell, first.layout)
    assert v.verdict == "pass" and "stability_stages" not in v.skipped_rules
    assert cellspec.check(cell, first.layout, backend="reference").verdict == "pass"
