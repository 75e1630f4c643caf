"""`cellspec sim`: task compilation, execution with δ ≤ ε, faults, script, snapshots."""

from __future__ import annotations

import json
import runpy
import struct
import zlib

import numpy as np
import pytest

from cellspec.cli import main
from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import load_layout
from cellspec.robots.execute import Record, Segment, delta, parse_faults, time_parameterise
from cellspec.robots.render import write_png
from cellspec.robots.sim import simulate
from tests.conftest import DATA, REPO, run_cellspec

PANDA = REPO / "rules" / "cells" / "panda_table.cell"
STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
TWIN = DATA / "twin"


@pytest.fixture(scope="module")
def panda():
    return load_cell(PANDA)


@pytest.fixture(scope="module")
def tower2_run(panda):
    return simulate(panda, load_layout(TWIN / "tower2.json"))


def test_time_parameterisation_follows_velocity_limits():
    seg = Segment(0, "r", "c1", "approach", (np.array([1.0, 0.0]), np.array([1.0, 2.0])))
    tl = time_parameterise([seg], {"r": np.zeros(2)}, {"r": np.array([1.0, 2.0])})
    # 1 rad at 0.5 rad/s (SPEED 0.5 of 1), then 2 rad at 1 rad/s
    assert tl.t["r"] == pytest.approx([0.0, 2.0, 4.0])
    assert tl.at("r", 1.0) == pytest.approx([0.5, 0.0])
    assert tl.windows == [(0, 0.0, 4.0, "r")]


def test_delta_uses_nearest_timestamps():
    t = np.arange(5) * 0.1
    q = np.stack([t, t], axis=1)
    same = Record(t, q, t + 0.01, q)  # shifted by less than half a sample: aligned exactly
    assert delta(same)[0] == pytest.approx(0.0)
    lag = Record(t, q, t, np.roll(q, 1, axis=0))
    assert delta(lag)[0] == pytest.approx(np.hypot(0.4, 0.4))


def test_fault_specs():
    f = parse_faults("offset:arm:2:0.1; slow:1.5; drop:c2; block:0,0,0,1,1,1", ("arm",),
                     ("c1", "c2"), {"arm": 7})
    assert [x.text() for x in f] == ["offset:arm:2:0.1", "slow:1.5", "drop:c2",
                                     "block:0,0,0,1,1,1"]
    for bad, msg in [("offset:arm:9:0.1", "joints 1..7"), ("drop:zz", "unknown part"),
                     ("slow:0.5", "slow-down factor"), ("wobble", "cannot read"),
                     ("block:1,0,0,0,1,1", "X0<X1")]:
        with pytest.raises(CellspecError, match=msg):
            parse_faults(bad, ("arm",), ("c1", "c2"), {"arm": 7})


def test_tower_passes_every_action(tower2_run):
    r = tower2_run
    assert r.verdict == "pass", r.reason
    assert [(a.index, a.robot, a.part, a.ok) for a in r.actions] == [
        (0, "arm", "c1", True), (1, "arm", "c2", True)]
    ex = r.execution
    assert ex.ok and 0 < ex.delta <= ex.epsilon == 0.05
    assert not ex.misplaced and not ex.blocked
    kinds = [s.kind for s in r.segments if s.action == 0]
    assert kinds == ["approach", "grasp", "lift", "transport", "place", "retreat", "home"]
    a = r.compiled[0]
    assert [p.name for p in a.poses] == ["approach", "grasp", "lift", "transport", "place",
                                         "release", "retreat"]
    assert a.supply == "feeder" and a.pick == pytest.approx((0.35, -0.4, 0.025))
    # the grasp puts the TCP `depth` below the part's top, the placed part where planned
    assert a.pose("grasp").pos == pytest.approx((0.35, -0.4, 0.03))
    assert a.place == pytest.approx((0.5, 0.05, 0.025))


@pytest.mark.parametrize("spec, expect", [
    ("offset:arm:2:0.1", "trajectory deviation"),
    ("slow:1.5", "trajectory deviation"),
    ("drop:c2", "part c2 ends"),
    ("block:0.45,-0.2,0.2,0.55,-0.1,0.3", "contact with the blocked region"),
])
def test_every_fault_is_detected(panda, spec, expect):
    lay = load_layout(TWIN / "tower2.json")
    f = parse_faults(spec, ("arm",), lay.ids, {"arm": 7})
    r = simulate(panda, lay, faults=f)
    assert r.verdict == "fail"
    assert any(expect in why for why in r.execution.reasons), r.execution.reasons
    assert any(not a.ok and a.check == "execution" for a in r.actions)


def test_script_replays_the_plan(tmp_path, panda, tower2_run):
    from cellspec.robots.script import script_text

    text = script_text(panda, tower2_run, "s.py")
    assert text == script_text(panda, tower2_run, "s.py")
    f = tmp_path / "s.py"
    f.write_text(text)
    mod = runpy.run_path(str(f))
    assert set(mod["WAYPOINTS"]) == {"arm"} and len(mod["ACTIONS"]) == 2
    assert mod["run"](str(PANDA)) == []
    # the script's checks can fail: move a planned place
    mod["PARTS"]["c2"]["place"] = [0.6, 0.05, 0.075]
    assert mod["run"](str(PANDA)) == ["c2"]


def test_png_writer_roundtrip(tmp_path):
    img = np.zeros((3, 4, 3), dtype=np.uint8)
    img[1, 2] = (255, 10, 20)
    f = tmp_path / "a.png"
    write_png(f, img)
    data = f.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert (w, h) == (4, 3)
    n = struct.unpack(">I", data[33:37])[0]
    raw = zlib.decompress(data[41:41 + n])
    rows = [raw[y * 13 + 1:(y + 1) * 13] for y in range(3)]
    assert rows[1][6:9] == bytes((255, 10, 20))


def test_sim_cli_writes_plan_script_and_snapshots(tmp_path, capsys):
    out = tmp_path / "o"
    rc = main(["sim", str(PANDA), str(TWIN / "tower2.json"), "-o", str(tmp_path / "plan.json"),
               "--script", str(tmp_path / "s.py"), "--snapshots", str(out), "--format", "json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["verdict"] == "pass" and [a["result"] for a in rep["actions"]] == ["pass"] * 2
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert [s["part"] for s in plan["steps"]] == ["c1", "c2"]
    assert plan["motions"][0]["kind"] == "approach"
    for name in ("planned.png", "final.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a plan JSON from -o can be given back with --plan
    assert main(["sim", str(PANDA), str(TWIN / "tower2.json"), "--plan",
                 str(tmp_path / "plan.json")]) == 0


def test_two_fresh_processes_give_identical_outputs(tmp_path):
    outs = []
    for k in range(2):
        d = tmp_path / str(k)
        d.mkdir()
        r = run_cellspec("sim", PANDA, TWIN / "tower2.json", "-o", d / "plan.json", "--script",
                         d / "s.py", "--trajectories", d / "traj.json", "--format", "json")
        assert r.returncode == 0, r.stderr
        outs.append([r.stdout] + [(d / n).read_bytes() for n in ("plan.json", "s.py",
                                                                  "traj.json")])
    assert outs[0] == outs[1]


def _cell(tmp_path, robot: str, supply: str) -> str:
    f = tmp_path / "c.cell"
    f.write_text("cell c {\n    workspace x [0.3, 0.7] y [-0.25, 0.25] z [0, 0.3]\n"
                 "    surface table z 0\n    part cube size (0.05, 0.05, 0.05)\n"
                 f"    robot arm model {robot} base (0, 0, 0) gripper parallel opening 0.08 "
                 f"depth 0.02\n    {supply}\n}}\n")
    return str(f)


def test_bad_input_exit_2(tmp_path, capsys):
    lay = str(TWIN / "tower2.json")
    ok_supply = "supply feeder x [0.30, 0.40] y [-0.45, -0.35] z [0.00, 0.10]"
    assert main(["sim", _cell(tmp_path, "ur5", ok_supply), lay]) == 2
    err = capsys.readouterr().err
    assert ("c.cell:5:5: error: robot arm: unknown robot model 'ur5' (did you mean 'ur5e'?); "
            "known models: panda") in err
    far = "supply far x [2.0, 2.1] y [2.0, 2.1] z [0.00, 0.10]"
    assert main(["sim", _cell(tmp_path, "panda", far), lay]) == 2
    err = capsys.readouterr().err
    assert "c.cell:6:5: error: no robot reaches a supply area" in err
    assert main(["sim", str(PANDA), lay, "--faults", "drop:nope"]) == 2
    assert "unknown part 'nope'" in capsys.readouterr().err
    bad = tmp_path / "p.json"
    bad.write_text('{"steps": [{"part": "c1"}]}')
    assert main(["sim", str(PANDA), lay, "--plan", str(bad)]) == 2
    assert "p.json: error: steps[0].gripper: expected vacuum or parallel, got None" in \
        capsys.readouterr().err


@pytest.mark.slow
def test_dual_arm_station_allocates_both_arms_with_speedup():
    r = simulate(load_cell(STATION), load_layout(TWIN / "dual4.json"))
    assert r.verdict == "pass", r.reason
    assert {a.robot for a in r.actions} == {"irb120", "irb1600"}
    s = r.schedule
    assert s.status == "optimal" and s.speedup > 1.2
    assert s.makespan < s.best_single
    # executed concurrently: faster than one after another, the two arms' actions overlap
    assert r.concurrent and r.timeline.end < r.sequential_end
    w = r.timeline.windows
    assert any(a[3] != b[3] and a[1] < b[2] and b[1] < a[2] for a in w for b in w)


@pytest.mark.slow
def test_three_cube_tower_passes(panda):
    r = simulate(panda, load_layout(TWIN / "tower3.json"))
    assert r.verdict == "pass" and len(r.actions) == 3 and r.execution.delta <= 0.05


def test_dispatch_keeps_precedences_and_the_shared_zone():
    from cellspec.layout import layout_from_obj
    from cellspec.robots.concurrency import dispatch
    from cellspec.robots.reports import SimResult
    from cellspec.robots.tasks import compile_action
    from cellspec.solver.cpsat.results import Step
    from cellspec.solver.cpsat.schedule import ScheduleResult, Slot

    cell = load_cell(STATION)
    lay = layout_from_obj({"units": "m", "parts": [
        {"id": "p", "type": "cube", "pos": [0.47, 0.15, 0.025]},  # in the shared zone
        {"id": "q", "type": "cube", "pos": [0.47, 0.40, 0.025]},  # in the shared zone
        {"id": "s", "type": "cube", "pos": [0.30, 0.40, 0.025]},  # outside
        {"id": "t", "type": "cube", "pos": [0.30, 0.40, 0.075]}]})  # on s
    steps = tuple(Step(part=x, gripper="vacuum") for x in ("p", "q", "s", "t"))
    feeder_a, feeder_b = cell.twin.supplies
    arm = {"p": "irb120", "q": "irb1600", "s": "irb1600", "t": "irb120"}
    acts, segs = [], []
    for k, x in enumerate(("p", "q", "s", "t")):
        i = lay.ids.index(x)
        acts.append(compile_action(cell, k, arm[x], x, (0.05,) * 3, lay.pos[i], None,
                                   feeder_a if arm[x] == "irb120" else feeder_b))
        # joint 1 moves 0 -> 1 (approach), holds (grasp), -> 3 (transport), holds (place),
        # -> 0 (home)
        for kind, v in (("approach", 1.0), ("grasp", 1.0), ("transport", 3.0), ("place", 3.0),
                        ("home", 0.0)):
            q = np.zeros(6)
            q[0] = v
            segs.append(Segment(k, arm[x], x, kind, (q,), grasp=kind == "grasp",
                                release=kind == "place"))
    res = SimResult("pass", None, [], steps=steps, compiled=acts, segments=segs,
                    homes={"irb120": [0.0] * 6, "irb1600": [0.0] * 6})
    sched = ScheduleResult("optimal", tuple(Slot(x, arm[x], 0, k, k + 1) for k, x in
                                            enumerate(("p", "q", "s", "t"))), 4.0)
    vel = {r: np.full(6, 2.0) for r in ("irb120", "irb1600")}  # 1 rad/s at SPEED 0.5
    starts = dispatch(cell, lay, steps, res, sched, vel)
    # each job: pick 1 s + 0.25 s dwell, place 2 s + 0.25 s dwell + 3 s home = 5.25 s
    assert starts[0] == pytest.approx(0.0)
    # q (the other arm) may pick at once but its place phase must wait for p's to end
    assert starts[1] + 1.25 == pytest.approx(6.5)
    # s is q's arm's next job; t sits on s, so t's place phase waits for s to end
    assert starts[2] == pytest.approx(starts[1] + 6.5)
    assert starts[3] + 1.25 >= starts[2] + 6.5 - 1e-9


# -- follow-ups: carried parts in the concurrent check, reach at x 0.65, single arm ---------

def test_concurrent_check_sees_a_carried_part_hit_the_other_arm():
    from cellspec.robots.concurrency import arm_clash
    from cellspec.robots.execute import Timeline
    from cellspec.robots.ik import grasp_quat, solve_ik
    from cellspec.robots.twin import Twin

    with Twin(load_cell(STATION)) as twin:
        # the IRB 1600 holds a 0.30 m bar level with the IRB 120's tool; the arms stay apart
        tcp = (0.48, 0.275, 0.42)
        hold = solve_ik(twin, "irb1600", tcp, grasp_quat("x"), seed=0, q_init=twin.home(
            "irb1600"), ignore={"irb120"})
        assert hold.ok, hold.reason
        home = twin.home("irb120")
        tl = Timeline(t={"irb120": [0.0, 2.0], "irb1600": [0.0, 2.0]},
                      q={"irb120": [home, home], "irb1600": [hold.q, hold.q]},
                      events=[(1.0, "irb1600", "grasp", "bar"),
                              (1.5, "irb1600", "release", "bar")], end=2.0)
        bar = {"bar": ((0.30, 0.04, 0.04), (tcp[0] - 0.15, tcp[1], tcp[2] + 0.02), None)}
        assert arm_clash(twin, tl) is None  # arm against arm only: no contact
        text, t, pair, placed = arm_clash(twin, tl, parts=bar)
        assert t == pytest.approx(1.0) and set(pair) == {"irb120", "irb1600"} and not placed
        assert text.startswith("irb120/") and "part:bar (carried by irb1600)" in text
        # the part is only held from grasp to release; the twin is left as it was
        tl.events = [(1.6, "irb1600", "grasp", "bar"), (1.9, "irb1600", "release", "bar")]
        assert arm_clash(twin, tl, parts=bar)[1] == pytest.approx(1.6)
        assert "part:bar" not in twin.bodies and not twin.attached
        assert np.array_equal(twin.get_q("irb1600"), twin.home("irb1600"))
        # a part placed by one arm stays in the check: released where the IRB 120 is
        tl.events = [(0.2, "irb1600", "grasp", "bar"), (0.4, "irb1600", "release", "bar")]
        assert arm_clash(twin, tl, parts=bar)[1] == pytest.approx(0.2)
        placed = {"bar": (bar["bar"][0], (0.60, 0.10, 0.02), bar["bar"][1])}  # picked far off
        clash = arm_clash(twin, tl, parts=placed)
        assert clash.t == pytest.approx(0.4) and "part:bar (placed by irb1600)" in clash.text
        assert clash.placed == "bar"
        assert "part:bar" not in twin.bodies and not twin.attached


FAR_LAYOUT = {"units": "m", "parts": [{"id": "near", "type": "cube", "pos": [0.30, 0.20, 0.025]},
                                      {"id": "far", "type": "cube", "pos": [0.65, 0.30, 0.025]}]}
IRB120_ONLY = """\
cell irb120_only {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot irb120 model abb_irb120 base (0, 0.275, 0) yaw 0 reach 0.58 gripper vacuum
    default gripper parallel opening 0.07 depth 0.02
    supply feeder_a x [0.25, 0.35] y [-0.10, 0.00] z [0.00, 0.10]
    trajectory epsilon 0.05
}
"""


def test_station_gives_parts_at_x_065_to_the_irb1600_and_runs_the_single_arm(tmp_path, capsys):
    lay = tmp_path / "far.json"
    lay.write_text(json.dumps(FAR_LAYOUT))
    assert main(["sim", str(STATION), str(lay), "--compare-single", "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert {a["part"]: a["robot"] for a in rep["actions"]} == {"near": "irb120",
                                                                "far": "irb1600"}
    assert rep["concurrent"] is True
    one = rep["single_arm"]  # the IRB 120 cannot reach x 0.65: the IRB 1600 alone
    assert one["arm"] == "irb1600" and one["verdict"] == "pass"
    assert one["speedup_executed"] == pytest.approx(one["executed"]
                                                    / rep["motion_time"]["executed"], abs=2e-3)
    assert one["executed"] > rep["motion_time"]["executed"] and one["speedup_estimated"] > 1


def test_irb120_alone_reports_the_part_at_x_065_out_of_reach(tmp_path, capsys):
    cell = tmp_path / "c.cell"
    cell.write_text(IRB120_ONLY)
    lay = tmp_path / "far.json"
    lay.write_text(json.dumps(FAR_LAYOUT))
    assert main(["sim", str(cell), str(lay)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["1", "irb120", "near", "pass"]
    assert out[1] == ("   2  irb120  far  FAIL reach: transport pose (0.650, 0.300, 0.130) is "
                      "0.663 m from irb120's base, beyond its reach 0.58 m")
    assert out[-1] == "sim: fail (1 of 2 actions fail before execution)"


def test_dispatch_order_defers_a_job_until_the_one_it_must_follow():
    from cellspec.robots.concurrency import dispatch_order
    from cellspec.solver.cpsat.schedule import Slot

    slots = (Slot("c5", "irb120", 0.0, 0.7, 2.0), Slot("c4", "irb1600", 0.0, 2.3, 5.0),
             Slot("c1", "irb120", 2.0, 2.8, 4.1))
    index = {"c4": 1, "c1": 2, "c5": 3}
    assert [s.part for s in dispatch_order(slots, index, set())] == ["c5", "c4", "c1"]
    # c5 (action 3) must wait for c4 (action 1) to end: c4 goes first, then c5 at once
    assert [s.part for s in dispatch_order(slots, index, {(3, 1)})] == ["c4", "c5", "c1"]
    # a cycle: the free job first, then the blocked ones in place-start order
    assert [s.part for s in dispatch_order(slots, index, {(3, 1), (1, 3)})] == \
        ["c1", "c5", "c4"]


def test_simulate_arms_must_name_robots_of_the_cell():
    lay = load_layout(TWIN / "tower2.json")
    with pytest.raises(CellspecError, match=r"arms: unknown robot 'nope' \(robots: irb120, "
                       r"irb1600\)"):
        simulate(load_cell(STATION), lay, arms=("nope",))
    with pytest.raises(CellspecError, match="arms: name at least one robot"):
        simulate(load_cell(STATION), lay, arms=())


def test_heavy_load_on_a_light_part_stands_in_sim(tmp_path):
    """Seed 0 #623 of the physics benchmark: 0.356 kg on the 30 mm 0.022 kg cube, the load
    1.3 mm inside its edge. check passes it and settle keeps it standing; sim, with
    pybullet's default 50 contact-solver iterations, dropped it (m4 0.22 m off). With the
    twin's 200 iterations every action passes."""
    from structure_families import cell_text, structures

    s = structures(624, 0)[623]
    assert s.family == "mixed" and s.note == "stack of small, block, cube, block"
    cell, lay = tmp_path / "bench.cell", tmp_path / "s623.json"
    cell.write_text(cell_text())
    lay.write_text(json.dumps(s.layout.to_json()))
    assert run_cellspec("check", cell, lay).returncode == 0
    r = run_cellspec("sim", cell, lay)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("sim: pass"), r.stdout + r.stderr
