"""``cellspec settle``, the physics oracle: exact verdicts on structures whose fate is
obvious, the part and step named when something falls, bad input, JSON and determinism."""

from __future__ import annotations

import json
import math

import pytest
from conftest import STATION, run_cellspec

from cellspec.cli import main
from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import layout_from_obj
from cellspec.robots import settle as st


@pytest.fixture(scope="module")
def station():
    return load_cell(STATION)


def cubes(*parts: tuple[str, float, float, float], order: list[str] | None = None):
    obj = {"parts": [{"id": i, "type": "cube", "pos": [x, y, z]} for i, x, y, z in parts]}
    if order is not None:
        obj["order"] = order
    return obj


def layout(obj):
    return layout_from_obj(obj, "<test>")


BRIDGE = cubes(("p1", 0.30, 0.20, 0.025), ("p2", 0.40, 0.20, 0.025),
               ("r1", 0.325, 0.20, 0.075), ("r2", 0.375, 0.20, 0.075),
               order=["p1", "p2", "r1", "r2"])


def test_aligned_tower_stands(station):
    tower = layout(cubes(*[(f"c{k}", 0.40, 0.20, 0.025 + 0.05 * k) for k in range(5)]))
    r = st.settle(station, tower)
    assert r.verdict == "stand"
    assert [m.id for m in r.parts] == ["c0", "c1", "c2", "c3", "c4"]
    assert not any(m.fell for m in r.parts)
    # pybullet's own noise on an aligned tower: far below the threshold
    assert r.max_displacement < st.FALL_DISPLACEMENT / 5
    assert max(m.rotation_deg for m in r.parts) < st.FALL_ROTATION_DEG / 5
    assert 5 * st.SPAWN_STEPS + st.FINAL_STEPS <= r.steps
    assert r.steps <= 5 * st.SPAWN_MAX_STEPS + st.FINAL_MAX_STEPS


def test_cube_1cm_past_the_edge_falls_and_is_named(station):
    # support spans x 0.375..0.425; the top cube's centre at 0.435 is 1 cm beyond its edge
    r = st.settle(station, layout(cubes(("a", 0.40, 0.20, 0.025), ("b", 0.435, 0.20, 0.075))))
    assert r.verdict == "fall"
    f = r.first_fall
    assert (f.id, f.fell_at, f.phase) == ("b", 2, "placed")
    assert not r.parts[0].fell
    assert r.parts[1].displacement > 0.02  # it tipped off, centimetres, not noise
    assert r.message().startswith("b falls after step 2 (b placed)")


def test_cube_1cm_inside_the_edge_stands(station):
    r = st.settle(station, layout(cubes(("a", 0.40, 0.20, 0.025), ("b", 0.415, 0.20, 0.075))))
    assert r.verdict == "stand"


def test_issue_bridge_falls_at_step_3(station):
    r = st.settle(station, layout(BRIDGE))
    assert r.verdict == "fall"
    assert (r.first_fall.id, r.first_fall.fell_at) == ("r1", 3)


def test_stage_that_falls_is_caught_although_the_finished_structure_would_stand(station):
    """The arm overhangs its base by 3.5 cm (past half): it falls the moment it is placed,
    before the counterweight on its inner half could hold it."""
    obj = cubes(("base", 0.40, 0.20, 0.025), ("arm", 0.435, 0.20, 0.075),
                ("weight", 0.41, 0.20, 0.125), order=["base", "arm", "weight"])
    r = st.settle(station, layout(obj))
    assert r.verdict == "fall"
    assert (r.first_fall.id, r.first_fall.fell_at) == ("arm", 2)


def test_order_is_followed_and_defaults_to_the_parts_list(station):
    obj = cubes(("top", 0.40, 0.20, 0.075), ("bottom", 0.40, 0.20, 0.025))
    r = st.settle(station, layout(obj))  # no order: "top" first, in mid-air: it drops
    assert [m.id for m in r.parts] == ["top", "bottom"]
    assert r.verdict == "fall" and r.first_fall.id == "top"
    r = st.settle(station, layout({**obj, "order": ["bottom", "top"]}))
    assert r.verdict == "stand"


def test_friction_is_the_cells(tmp_path, station):
    """The coefficient settle uses is the cell's ``friction`` (default 0.5)."""
    text = STATION.read_text().replace("    tolerance contact 0.001\n",
                                       "    tolerance contact 0.001\n    friction 0.3\n")
    path = tmp_path / "station.cell"
    path.write_text(text.split("\ntest ")[0])
    cell = load_cell(path)
    r = st.settle(cell, layout(cubes(("a", 0.40, 0.20, 0.025))))
    assert r.friction == pytest.approx(0.3)
    assert st.settle(station, layout(cubes(("a", 0.40, 0.20, 0.025)))).friction == 0.5


def test_cli_exit_codes_and_pretty_output(tmp_path):
    tower = tmp_path / "tower.json"
    tower.write_text(json.dumps(cubes(("c1", 0.40, 0.20, 0.025), ("c2", 0.40, 0.20, 0.075))))
    res = run_cellspec("settle", STATION, tower)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1].startswith("settle: stand: all 2 parts stand")
    bridge = tmp_path / "bridge.json"
    bridge.write_text(json.dumps(BRIDGE))
    res = run_cellspec("settle", STATION, bridge)
    assert res.returncode == 1, res.stderr
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("settle: fall: r1 falls after step 3 (r1 placed)")
    assert "Traceback" not in res.stderr


def test_json_shape_and_output_file(tmp_path, capsys):
    bridge = tmp_path / "bridge.json"
    bridge.write_text(json.dumps(BRIDGE))
    out = tmp_path / "out.json"
    code = main(["settle", str(STATION), str(bridge), "--format", "json", "-o", str(out)])
    assert code == 1
    obj = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == obj
    assert set(obj) == {"verdict", "first_fall", "message", "parts", "params", "stats"}
    assert obj["verdict"] == "fall"
    assert obj["first_fall"] == {"part": "r1", "step": 3, "phase": "placed"}
    assert [p["id"] for p in obj["parts"]] == ["p1", "p2", "r1", "r2"]
    for p in obj["parts"]:
        assert set(p) == {"id", "step", "displacement", "rotation_deg", "fell", "fell_at",
                          "phase", "fell_time"}
        assert (p["fell_time"] is None) == (not p["fell"])
        assert math.isfinite(p["displacement"]) and p["displacement"] >= 0
    assert obj["params"]["friction"] == 0.5
    assert obj["params"]["fall_displacement"] == st.FALL_DISPLACEMENT
    assert obj["stats"]["parts"] == 4
    assert 4 * st.SPAWN_STEPS + st.FINAL_STEPS <= obj["stats"]["steps"]
    assert obj["stats"]["steps"] <= 4 * st.SPAWN_MAX_STEPS + st.FINAL_MAX_STEPS


def test_deterministic_across_processes(tmp_path):
    lay = tmp_path / "l.json"
    lay.write_text(json.dumps(cubes(("a", 0.40, 0.20, 0.025), ("b", 0.42, 0.21, 0.075),
                                    ("c", 0.44, 0.20, 0.125))))
    a = run_cellspec("settle", STATION, lay, "--format", "json")
    b = run_cellspec("settle", STATION, lay, "--format", "json")
    assert a.returncode == b.returncode and a.returncode in (0, 1)
    assert a.stdout == b.stdout  # byte for byte


@pytest.mark.parametrize("text, where, words", [
    ('{"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.2]}]}', ": error", "pos[2]"),
    ('{"parts": [{"id": "a", "type": "cube",\n "pos": [0.4, NaN, 0.025]}]}', ":2:", "NaN"),
    ('{"parts": [{"id": "a", "type": "cube", "pos": [0.4, 0.2, 0.025], '
     '"size": [1e9, 0.05, 0.05]}]}', "", "size"),
    ('{"parts": [{"id": "a", "type": "sphere", "pos": [0.4, 0.2, 0.025]}]}', "", "sphere"),
    ('{"parts": []}', "", "no parts"),
    ('{"parts": [', ":1:", "invalid JSON"),
])
def test_bad_layout_exit_2(tmp_path, capsys, text, where, words):
    lay = tmp_path / "bad.json"
    lay.write_text(text)
    code = main(["settle", str(STATION), str(lay)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert "bad.json" + where in err
    assert words in err


def test_zero_mass_is_bad_input(tmp_path, capsys):
    text = STATION.read_text().replace("mass 0.1", "mass 0")
    cell = tmp_path / "zero.cell"
    cell.write_text(text)
    lay = tmp_path / "l.json"
    lay.write_text(json.dumps(cubes(("a", 0.40, 0.20, 0.025))))
    code = main(["settle", str(cell), str(lay)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "zero.cell:" in err and "mass" in err


def test_zero_mass_from_the_instance_is_refused(station, monkeypatch):
    """Even if a zero mass got past the parser, settle never makes it a fixed body."""
    import numpy as np

    from cellspec.solver import instance

    real = instance._masses
    monkeypatch.setattr(instance, "_masses", lambda c, la, s: np.zeros_like(real(c, la, s)))
    with pytest.raises(CellspecError, match="positive mass"):
        st.settle(station, layout(cubes(("a", 0.40, 0.20, 0.025))))


# Issue 14's 1 mm case (seed 0 #623 of bench/physics_agreement.py): 0.356 kg of mixed
# parts on the benchmark's 30 mm cube (0.022 kg), the load 1.3 mm inside the cube's edge.
HEAVY_ON_SMALL = {"parts": [
    {"id": "m1", "type": "small", "pos": [0.45, 0.275, 0.015]},
    {"id": "m2", "type": "block", "pos": [0.451232, 0.273727, 0.05]},
    {"id": "m3", "type": "cube", "pos": [0.438013, 0.277028, 0.095]},
    {"id": "m4", "type": "block", "pos": [0.420053, 0.285533, 0.14]}],
    "order": ["m1", "m2", "m3", "m4"]}


@pytest.fixture(scope="module")
def bench_cell():
    from structure_families import load_cell_variant

    return load_cell_variant()


def test_rate_is_960_hz_with_the_same_simulated_durations():
    assert st.HZ == 960
    assert (st.SPAWN_STEPS / st.HZ, st.SPAWN_MAX_STEPS / st.HZ) == (0.3, 2.0)
    assert (st.FINAL_STEPS / st.HZ, st.FINAL_MAX_STEPS / st.HZ) == (1.0, 4.0)
    assert st.SAMPLE_EVERY / st.HZ == pytest.approx(1 / 60)


def test_heavy_stack_on_the_small_cube_stands(bench_cell, monkeypatch):
    """The load 1.3 mm inside the edge: a rigid stack stands. At 960 Hz settle agrees; at
    pybullet's default 240 Hz its contact solver does not converge (mass ratio 16:1) and
    the light cube tips: the false label that made 1 mm look unsound."""
    r = st.settle(bench_cell, layout(HEAVY_ON_SMALL))
    assert r.verdict == "stand"
    assert r.max_displacement < 0.002
    monkeypatch.setattr(st, "HZ", 240)  # the old rate, the old step counts
    old = st.settle(bench_cell, layout(HEAVY_ON_SMALL), spawn_steps=72, spawn_max_steps=480,
                    final_steps=240, final_max_steps=960)
    assert old.verdict == "fall"


def test_heavy_stack_moved_past_the_small_cubes_edge_falls(bench_cell):
    obj = json.loads(json.dumps(HEAVY_ON_SMALL))
    for part in obj["parts"][1:]:  # the load 2.6 mm outward: 1.3 mm beyond the edge
        part["pos"][0] = round(part["pos"][0] - 0.0026, 6)
    r = st.settle(bench_cell, layout(obj))
    assert r.verdict == "fall"
    assert r.first_fall.fell_at == 4 and r.max_displacement > 0.05


@pytest.mark.parametrize("x,verdict", [(0.4245, "stand"), (0.425, "fall"), (0.4255, "fall")])
def test_half_a_millimetre_either_side_of_the_edge(station, x, verdict):
    """A cube 0.5 mm inside its support's edge stands, on the edge or 0.5 mm past it falls
    (the knife edge from round-off; also at 2400 Hz)."""
    r = st.settle(station, layout(cubes(("a", 0.40, 0.20, 0.025), ("b", x, 0.20, 0.075))))
    assert r.verdict == verdict
