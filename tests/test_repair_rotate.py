"""Repair turns boxes to any allowed yaw (issue 22 item 3, ``--allow-rotate``,
cellspec/solver/cpsat/rotate.py, docs/shapes.md "CP-SAT repair: what moves"): one angle A
(its multiples) or a set of yaws; a moved box, plain or yawed, may turn to a candidate yaw
(the model sees its enclosing box and inscribed square at that yaw), a turn costs, a
cylinder never turns, and every repaired layout is re-checked exactly (clingo and the
reference)."""

from __future__ import annotations

import json

import pytest
from conftest import run_cellspec, write_cell

import cellspec
from cellspec.core.errors import CellspecError
from cellspec.layout import layout_from_obj
from cellspec.solver.cpsat.repair import repair
from cellspec.solver.cpsat.rotate import candidates, parse_rotate, part_turns
from cellspec.solver.verify import check

# a 0.17 m square room: a 0.20 m beam fits only turned by 45 degrees (its enclosing box is
# then 0.156 m square); stability on (the default)
SMALL = """\
import physical
cell small {
    workspace x [0.3, 0.47] y [0.3, 0.47] z [0, 0.5]
    surface table z 0
    part beam size (0.20, 0.02, 0.02) mass 0.05
    part can cylinder radius 0.03 height 0.1 mass 0.2
    default gripper parallel opening 0.07 depth 0.02
}
"""

# the same pocket between two keep-outs in a larger workspace
POCKET = """\
import physical
cell pocket {
    workspace x [0.3, 0.7] y [0.3, 0.7] z [0, 0.5]
    surface table z 0
    part beam size (0.20, 0.02, 0.02) mass 0.05
    part cube size (0.05, 0.05, 0.05) mass 0.1
    part can cylinder radius 0.03 height 0.1 mass 0.2
    keepout top box x [0.2, 0.8] y [0.47, 0.8]
    keepout side box x [0.47, 0.8] y [0.2, 0.47]
    default gripper parallel opening 0.07 depth 0.02
}
"""


def _cell(tmp_path_factory, text: str):
    return cellspec.load_cell(write_cell(tmp_path_factory, text))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _cell(tmp_path_factory, SMALL)


@pytest.fixture(scope="module")
def pocket(tmp_path_factory):
    return _cell(tmp_path_factory, POCKET)


def _beam(yaw: float = 0.0) -> dict:
    p = {"id": "b", "type": "beam", "pos": [0.385, 0.385, 0.01]}
    if yaw:
        p["yaw"] = yaw
    return {"parts": [p]}


def _passes(cell, r) -> cellspec.Layout:
    assert r.status in ("optimal", "feasible"), r.reason
    assert r.verdict is not None and r.verdict.verdict == "pass"
    out = layout_from_obj(r.layout)
    assert check(cell, out).verdict == "pass"
    assert check(cell, out, backend="reference").verdict == "pass"
    return out


@pytest.mark.parametrize("which", ["small", "pocket"])
def test_a_long_beam_fits_only_turned_45(which, request):
    cell = request.getfixturevalue(which)
    lay = layout_from_obj(_beam())
    assert check(cell, lay).verdict == "fail"
    for spec in (None, "90"):  # axis-aligned it fits nowhere
        r = repair(cell, lay, time_limit=5, allow_rotate=parse_rotate(spec) if spec else ())
        assert r.status == "infeasible" and r.layout is None and not r.moves, (spec, r.reason)
    r = repair(cell, lay, time_limit=5, allow_rotate=parse_rotate("45"))
    out = _passes(cell, r)
    # turned to 45: the model sees it through its enclosing box, so no proof of minimality
    assert r.status == "feasible" and "not proved minimal" in r.reason
    (m,) = r.moves
    assert m.part == "b" and m.yaw == 45.0 and not m.yaw_kept and m.dst == m.src
    assert m.to_json()["yaw"] == 45.0 and "yaw_kept" not in m.to_json()
    assert out.yaw_of(0) == 45.0 and r.layout["parts"][0]["yaw"] == 45.0


def test_an_already_yawed_box_is_turned_to_an_allowed_yaw(small):
    lay = layout_from_obj(_beam(30))  # at 30 degrees its enclosing box is 0.183 m wide
    assert check(small, lay).verdict == "fail"
    assert repair(small, lay, time_limit=5).status == "infeasible"
    for spec in ("45", "0,45,90", "15"):
        r = repair(small, lay, time_limit=5, allow_rotate=parse_rotate(spec))
        out = _passes(small, r)
        (m,) = r.moves
        assert m.yaw == 45.0 and not m.yaw_kept and out.yaw_of(0) == 45.0, spec


def test_a_yawed_box_turned_to_a_quarter_turn_becomes_plain(tmp_path_factory):
    # a corridor 0.03 m wide along x: the beam fits only at 0 (or 180) degrees
    cell = _cell(tmp_path_factory, SMALL.replace("x [0.3, 0.47] y [0.3, 0.47]",
                                                 "x [0.3, 0.7] y [0.3, 0.33]"))
    lay = layout_from_obj({"parts": [{"id": "b", "type": "beam", "pos": [0.385, 0.315, 0.01],
                                      "yaw": 30}]})
    r = repair(cell, lay, time_limit=5, allow_rotate=parse_rotate("90"))
    out = _passes(cell, r)
    (m,) = r.moves
    assert m.yaw == 0.0 and not m.yaw_kept and m.to_json()["yaw"] == 0.0
    assert "yaw" not in r.layout["parts"][0] and out.yaw_of(0) == 0.0  # written axis-aligned


def test_a_turn_only_when_it_helps(pocket):
    # a beam overlapping a cube in the open: moving it suffices, turning it costs more
    obj = {"parts": [{"id": "c", "type": "cube", "pos": [0.6, 0.6, 0.025]},
                     {"id": "b", "type": "beam", "pos": [0.38, 0.34, 0.01]},
                     {"id": "d", "type": "cube", "pos": [0.4, 0.35, 0.025]}]}
    cell = pocket.model_copy(update={"keepouts": ()})
    lay = layout_from_obj(obj)
    plain = repair(cell, lay, time_limit=5)
    r = repair(cell, lay, time_limit=5, allow_rotate=parse_rotate("45"))
    _passes(cell, r)
    assert [m.to_json() for m in r.moves] == [m.to_json() for m in plain.moves]
    assert all(m.yaw is None for m in r.moves)
    assert r.layout == plain.layout


def test_a_small_shift_is_preferred_to_a_turn(pocket):
    """A beam 3 mm into a cube: a quarter turn would clear it without moving its centre,
    a 3 mm shift also does; a turn weighs as 1 cm (rotate.TURN_COST), so it shifts."""
    from cellspec.solver.cpsat.rotate import TURN_COST

    assert TURN_COST == 100  # 1 cm of L1 on the 0.1 mm grid of centres
    obj = {"parts": [{"id": "b", "type": "beam", "pos": [0.45, 0.40, 0.01]},
                     {"id": "c", "type": "cube", "pos": [0.572, 0.40, 0.025]}]}
    cell = pocket.model_copy(update={"keepouts": ()})
    lay = layout_from_obj(obj)
    assert {v.rule for v in check(cell, lay).violations} == {"no_overlap"}
    r = repair(cell, lay, time_limit=5, allow_rotate=parse_rotate("90"))
    _passes(cell, r)
    assert [(m.part, m.yaw) for m in r.moves] in ([("b", None)], [("c", None)])
    l1 = sum(abs(a - b) for m in r.moves for a, b in zip(m.src, m.dst, strict=True))
    assert l1 == pytest.approx(0.003, abs=1e-9)


def test_a_cylinder_never_turns(pocket):
    obj = {"parts": [{"id": "k", "type": "can", "pos": [0.46, 0.40, 0.05], "yaw": 10},
                     {"id": "b", "type": "beam", "pos": [0.385, 0.385, 0.01]}]}
    lay = layout_from_obj(obj)
    turns = part_turns(pocket, lay, parse_rotate("45"))
    assert sorted(turns) == [1]  # the beam only
    r = repair(pocket, lay, time_limit=5, allow_rotate=parse_rotate("45"))
    out = _passes(pocket, r)
    moves = {m.part: m for m in r.moves}
    assert moves["b"].yaw == 45.0
    assert "k" not in moves or (moves["k"].yaw == 10.0 and moves["k"].yaw_kept)
    assert out.yaw_of(0) == 10.0


def test_candidates_one_per_footprint_nearest_first():
    eight = parse_rotate("45")
    assert candidates(0.0, eight, square=False) == [45.0, 315.0, 90.0]
    assert candidates(0.0, eight, square=True) == [45.0]
    assert candidates(30.0, eight, square=False) == [45.0, 0.0, 90.0, 315.0]
    assert candidates(90.0, parse_rotate("90"), square=False) == [0.0]  # as before
    assert candidates(0.0, (0.0, 180.0), square=False) == []


def test_deterministic(small):
    lay = layout_from_obj(_beam(30))
    a = repair(small, lay, time_limit=5, allow_rotate=parse_rotate("0,45,90"))
    b = repair(small, lay, time_limit=5, allow_rotate=parse_rotate("0,45,90"))
    assert json.dumps(a.layout) == json.dumps(b.layout)
    assert [m.to_json() for m in a.moves] == [m.to_json() for m in b.moves]


@pytest.mark.parametrize("spec, words", [
    ("nan", "not a finite angle"), ("abc", "not a number"), ("1e9", "not a finite angle"),
    ("", "give one angle"), ("0,,90", "give one angle"), ("0", "turns nothing"),
    ("7", "360 distinct yaws"), (",".join(str(k) for k in range(25)), "up to 24")])
def test_bad_values_are_named(spec, words):
    with pytest.raises(CellspecError, match=words):
        parse_rotate(spec)


def test_cli_round_trip(tmp_path):
    (tmp_path / "c.cell").write_text(SMALL)
    (tmp_path / "l.json").write_text(json.dumps(_beam()))
    out = tmp_path / "out.json"
    p = run_cellspec("repair", tmp_path / "c.cell", tmp_path / "l.json", "-o", out,
                     "--allow-rotate", "0,45,90")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "moved b" in p.stdout and "turned to yaw 45" in p.stdout
    assert json.loads(out.read_text())["parts"][0]["yaw"] == 45.0
    p = run_cellspec("check", tmp_path / "c.cell", out)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_cellspec("repair", tmp_path / "c.cell", tmp_path / "l.json", "--allow-rotate", "7")
    assert p.returncode == 2 and "--allow-rotate" in p.stderr and "24" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
