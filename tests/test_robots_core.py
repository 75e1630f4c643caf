"""The twin core: robot models, FK/IK round trips, named collisions, RRT-Connect, bad input."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pybullet as p
import pytest
from conftest import STATION

from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.robots.collision import CollisionChecker
from cellspec.robots.ik import grasp_quat, rot_error, solve_ik
from cellspec.robots.models import MODELS, robot_spec
from cellspec.robots.motion import densify, edge_free, plan_motion
from cellspec.robots.twin import Twin

ALL_MODELS_CELL = """\
cell all_models {
    units m
    workspace x [0.20, 0.70] y [-0.50, 2.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    robot a model abb_irb120 base (0, 0, 0) yaw 0 gripper vacuum
    robot b model abb_irb1600 base (0, 1.5, 0) yaw 90 gripper parallel opening 0.07 depth 0.02
    robot c model panda base (2, 0, 0) yaw 180 gripper parallel opening 0.07 depth 0.02
    robot d model kuka_iiwa base (2, 1.5, 0) yaw -90 gripper vacuum
    robot e model ur5e base (4, 0, 0) yaw 0 gripper parallel opening 0.07 depth 0.02
}
"""

KEEPOUT_CELL = """\
cell guarded {
    units m
    workspace x [0.20, 0.70] y [0.05, 0.50] z [0.00, 0.30]
    surface table z 0
    part cube size (0.05, 0.05, 0.05) mass 0.1
    keepout guard box x [0.25, 0.35] y [0.22, 0.33] z [0.40, 0.50]
    robot irb120 model abb_irb120 base (0, 0.275, 0) yaw 0 reach 0.58 gripper vacuum
}
"""


def _cell(tmp_path: Path, text: str, name: str = "c.cell"):
    f = tmp_path / name
    f.write_text(text)
    return load_cell(str(f))


@pytest.fixture(scope="module")
def station():
    """The dual-arm station's twin (shared by the read-only tests of this module)."""
    with Twin(load_cell(str(STATION))) as twin:
        yield twin


@pytest.fixture(scope="module")
def all_models(tmp_path_factory):
    """A twin holding one robot of each model, far apart."""
    cell = _cell(tmp_path_factory.mktemp("models"), ALL_MODELS_CELL)
    with Twin(cell) as twin:
        yield twin


def test_each_model_loads_with_its_joints_and_limits(all_models):
    twin = all_models
    expected = {"a": ("abb_irb120", 6), "b": ("abb_irb1600", 6), "c": ("panda", 7),
                "d": ("kuka_iiwa", 7), "e": ("ur5e", 6)}
    assert set(MODELS) == {m for m, _ in expected.values()}
    for robot, (model, dof) in expected.items():
        spec = twin.spec(robot)
        assert spec.model == model and len(spec.joint_names) == dof
        assert spec.lower.shape == spec.upper.shape == spec.vel_limits.shape == (dof,)
        assert np.all(spec.lower < spec.upper) and np.all(spec.vel_limits > 0)
        assert spec.within_limits(np.array(spec.home))
        rb = twin.robot(robot)
        for i, j in enumerate(rb.joints):  # the loaded body carries the spec's limits
            info = p.getJointInfo(rb.body, j, physicsClientId=twin.client)
            assert info[1].decode() == spec.joint_names[i]
            assert info[8] == pytest.approx(spec.lower[i], abs=1e-5)
            assert info[9] == pytest.approx(spec.upper[i], abs=1e-5)
        assert rb.link_names[rb.tcp] == spec.tool_link == "tcp"
    irb120 = twin.spec("a")
    assert np.degrees(irb120.lower).round(6).tolist() == [-165, -110, -110, -160, -120, -400]
    assert np.degrees(irb120.upper).round(6).tolist() == [165, 110, 70, 160, 120, 400]
    assert twin.spec("c").lower[3] == pytest.approx(-3.1416)  # read from pybullet_data
    assert CollisionChecker(twin).contacts() == []  # every home pose is collision-free


def test_abb_kinematics_and_base_placement(station):
    # IRB 120 at home (wrist down): TCP = d4 + ... above the base, tool pointing down
    pos, quat = station.tool_pose("irb120")
    assert pos == pytest.approx([0.302, 0.275, 0.29 + 0.27 + 0.07 - 0.072 - 0.10], abs=1e-5)
    assert np.linalg.norm(rot_error(grasp_quat("x", math.pi), quat)) < 1e-5
    # IRB 1600 sits at x 0.95 facing -x (yaw 180): at the model's home its wrist is
    # 0.15 + 0.6 m towards -x (the cell's `home irb1600 (...)` turns it away; see below)
    pos, _ = station.tool_pose("irb1600", np.array(station.spec("irb1600").home))
    assert pos == pytest.approx([0.95 - 0.75, 0.275, 0.4865 + 0.475 - 0.065 - 0.10], abs=1e-5)


def test_fk_ik_round_trip_for_each_robot(all_models):
    twin = all_models
    rng = np.random.default_rng(3)
    for robot in ("a", "b", "c", "d", "e"):
        spec = twin.spec(robot)
        for k in range(3):
            q = rng.uniform(spec.lower, spec.upper)
            pos, quat = twin.tool_pose(robot, q)
            res = solve_ik(twin, robot, pos, quat, seed=k, check_collision=False)
            assert res.ok, (robot, res.reason)
            assert res.pos_err <= 1e-3 and res.rot_err <= 1e-3
            assert spec.within_limits(res.q)
            p2, q2 = twin.tool_pose(robot, res.q)
            assert np.linalg.norm(p2 - pos) <= 1e-3
            assert np.linalg.norm(rot_error(quat, q2)) <= 1e-3


def test_ik_refuses_unreachable_and_colliding_targets(station):
    far = solve_ik(station, "irb120", (2.0, 0.275, 0.1), grasp_quat("x"), seed=0)
    assert not far.ok and far.q is None and far.reason.startswith("unreachable")
    assert far.pos_err > 0.5
    # within reach, but the IRB 1600 at home stands there: every solution collides
    blocked = solve_ik(station, "irb1600", (0.25, 0.275, 0.28), grasp_quat("x"), seed=0)
    assert not blocked.ok and blocked.reason.startswith("collision")
    assert "irb120/" in blocked.reason and "irb1600/" in blocked.reason
    free = solve_ik(station, "irb1600", (0.25, 0.275, 0.28), grasp_quat("x"), seed=0,
                    ignore={"irb120"})
    assert free.ok
    q0 = station.get_q("irb1600")
    assert np.array_equal(q0, station.home("irb1600"))  # solve_ik restored the joints


def test_collision_by_name(station, tmp_path):
    cc = CollisionChecker(station)
    home = {r: station.home(r) for r in station.robot_names}
    assert cc.contacts(home) == [] and cc.free(home)
    # self: IRB 120 with the forearm down and the wrist folded back onto the upper arm
    folded = np.radians([0, 0, 70, 0, 120, 0])
    names = {(c.a, c.b) for c in cc.contacts({"irb120": folded})}
    assert names == {("irb120/cup", "irb120/link_1"), ("irb120/cup", "irb120/link_2")}
    station.set_q("irb120", station.home("irb120"))
    # arm x part: a cube at the vacuum cup's face (centre 1 cm inside the cup)
    tcp, _ = station.tool_pose("irb120")
    station.add_box("probe", (0.05, 0.05, 0.05), tcp + [0, 0, 0.015])
    try:
        got = cc.contacts(home)
        assert [(c.a, c.b) for c in got] == [("irb120/cup", "part:probe")]
        assert got[0].distance < 0
        assert cc.free(home, ignore=frozenset({"part:probe"}))
    finally:
        station.remove("probe")
    assert cc.free(home)
    # arm x arm: the IRB 1600's TCP sent to the IRB 120's cup
    res = solve_ik(station, "irb1600", tcp, grasp_quat("x"), seed=0, check_collision=False)
    assert res.ok
    pairs = {(c.a, c.b) for c in cc.contacts({**home, "irb1600": res.q})}
    assert ("irb120/cup", "irb1600/palm") in pairs  # the jaws straddle the cup
    assert all(a.startswith("irb120/") and b.startswith("irb1600/") for a, b in pairs)
    # arm x keep-out (a cell file's keepout around the IRB 120's home tool)
    with Twin(_cell(tmp_path, KEEPOUT_CELL)) as twin:
        kc = CollisionChecker(twin)
        hits = kc.contacts({"irb120": twin.home("irb120")})
        assert {(c.a, c.b) for c in hits} == {("irb120/cup", "keepout:guard")}
        assert kc.free({"irb120": np.radians([90, 0, 0, 0, 90, 0])})
        assert kc.checks == 2


def test_carried_part_follows_the_tool_and_is_checked(station):
    home = {r: station.home(r) for r in station.robot_names}
    cc = CollisionChecker(station)
    tcp, _ = station.tool_pose("irb120")
    station.add_box("held", (0.05, 0.05, 0.05), tcp - [0, 0, 0.025])
    turn = 0.6
    post = (0.302 * math.cos(turn), 0.275 + 0.302 * math.sin(turn), 0.40)
    station.add_box("post", (0.04, 0.04, 0.04), post, kind="obstacle")
    try:
        station.attach("irb120", "held")
        assert cc.free(home)  # the cup holding the part is not a collision
        q = station.home("irb120")
        q[0] = turn  # swing the part into the post (the cup stays above it)
        station.set_q("irb120", q)
        pos, _ = station.pose("part:held")
        assert pos == pytest.approx([post[0], post[1], tcp[2] - 0.025], abs=1e-4)
        names = [(c.a, c.b) for c in cc.contacts({"irb120": q})]
        assert names == [("obstacle:post", "part:held")]
        station.detach("irb120")
        station.set_q("irb120", station.home("irb120"))
        assert station.pose("part:held")[0] == pytest.approx(pos, abs=1e-6)  # stays put
    finally:
        station.detach("irb120")
        station.set_qs(home)
        station.remove("held")
        station.remove("post")


def _wall_scene(twin):
    """IRB 120 start and goal on either side of a wall across the table."""
    twin.add_box("wall", (0.30, 0.02, 0.36), (0.35, 0.275, 0.18), kind="obstacle")
    s = solve_ik(twin, "irb120", (0.35, 0.12, 0.10), grasp_quat("x"), seed=0)
    g = solve_ik(twin, "irb120", (0.35, 0.43, 0.10), grasp_quat("x"), seed=0)
    assert s.ok and g.ok
    return {"irb120": s.q}, {"irb120": g.q}


def test_rrt_connect_goes_around_an_obstacle_deterministically(station):
    cc = CollisionChecker(station)
    try:
        start, goal = _wall_scene(station)
        assert not edge_free(station, start, goal, checker=cc)  # the direct path collides
        res = plan_motion(station, start, goal, seed=5, time_limit=20, checker=cc)
        assert res.ok and res.reason is None and len(res.path) >= 3
        assert np.array_equal(res.path[0]["irb120"], start["irb120"])
        assert np.array_equal(res.path[-1]["irb120"], goal["irb120"])
        dense = densify(res.path, 0.05)
        for a, b in pairwise(dense):
            assert np.max(np.abs(b["irb120"] - a["irb120"])) <= 0.05 + 1e-9
        assert all(cc.free(q) for q in dense)
        again = plan_motion(station, start, goal, seed=5, time_limit=20, checker=cc)
        assert len(again.path) == len(res.path)
        assert all(np.array_equal(a["irb120"], b["irb120"])
                   for a, b in zip(res.path, again.path, strict=True))
        late = plan_motion(station, start, goal, seed=5, time_limit=1e-4, checker=cc)
        assert not late.ok and late.reason == "time limit" and late.path == ()
    finally:
        station.remove("obstacle:wall")
        station.set_q("irb120", station.home("irb120"))


def test_plan_motion_refuses_a_colliding_goal(station):
    home = {"irb120": station.home("irb120")}
    res = plan_motion(station, home, {"irb120": np.radians([0, 0, 70, 0, 120, 0])})
    assert not res.ok and res.reason.startswith("goal in collision: irb120/cup with")


def test_unknown_model_is_bad_input(tmp_path):
    with pytest.raises(CellspecError) as e:
        robot_spec("ur5")
    assert "ur5" in str(e.value) and "abb_irb120" in str(e.value)
    text = STATION.read_text().replace("model abb_irb1600", "model ur10")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "ur10" in s)
    with pytest.raises(CellspecError) as e:  # a load error (issue 28), before any twin
        _cell(tmp_path, text, "bad.cell")
    msg = str(e.value)
    assert f"bad.cell:{line}:" in msg and "robot irb1600" in msg
    assert "known models: panda, kuka_iiwa, abb_irb120, abb_irb1600, ur5e" in msg


def test_half_space_keepout_and_generated_urdf(tmp_path):
    from cellspec.robots.urdf import GripperGeom, robot_urdf_text

    guard = "    keepout guard box x [0.25, 0.35] y [0.22, 0.33] z [0.40, 0.50]\n"
    text = KEEPOUT_CELL.replace(guard, "    keepout roof : z > 0.6\n")
    with Twin(_cell(tmp_path, text)) as twin:
        kc = CollisionChecker(twin)
        home = twin.home("irb120")  # the forearm (z 0.63) is in the roof, the tool is not
        names = {(c.a, c.b) for c in kc.contacts({"irb120": home})}
        assert ("irb120/link_3", "keepout:roof") in names
        assert all(b == "keepout:roof" and "cup" not in a for a, b in names)
        low = np.radians([0, 40, 40, 0, 0, 0])  # lean forward, forearm down: all below 0.6
        assert kc.contacts({"irb120": low}) == []
    spec = robot_spec("abb_irb1600")
    a = robot_urdf_text(spec, GripperGeom("parallel", 0.07, 0.02))
    assert a == robot_urdf_text(spec, GripperGeom("parallel", 0.07, 0.02))  # deterministic
    # six capsules and the flange sphere (visual + collision each), no meshes
    assert a.count("<capsule") == 12 and a.count("<sphere") == 2 and "mesh" not in a
    assert 'name="finger_l"' in a and 'name="tcp"' in a


@pytest.mark.slow
def test_same_seed_same_answers_in_fresh_processes():
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from cellspec.dsl.parser import load_cell\n"
        "from cellspec.robots.twin import Twin\n"
        "from cellspec.robots.ik import solve_ik, grasp_quat\n"
        "from cellspec.robots.motion import plan_motion\n"
        f"t = Twin(load_cell({str(STATION)!r}))\n"
        "t.add_box('wall', (0.30, 0.02, 0.36), (0.35, 0.275, 0.18), kind='obstacle')\n"
        "s = solve_ik(t, 'irb120', (0.35, 0.12, 0.10), grasp_quat('x'), seed=3)\n"
        "g = solve_ik(t, 'irb120', (0.35, 0.43, 0.10), grasp_quat('x'), seed=3)\n"
        "r = plan_motion(t, {'irb120': s.q}, {'irb120': g.q}, seed=9, time_limit=30)\n"
        "print(r.ok, s.q.tobytes().hex(), [w['irb120'].tobytes().hex() for w in r.path])\n"
    )
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, cwd=str(STATION.parents[2])).stdout for _ in range(2)]
    assert outs[0].startswith("True ") and outs[0] == outs[1]


def test_dual_arm_rrt_plans_both_arms_together(station):
    cc = CollisionChecker(station)
    home = {r: station.home(r) for r in station.robot_names}
    try:
        start, goal = _wall_scene(station)  # the IRB 120 crosses the wall ...
        for q, y in ((start, 0.45), (goal, 0.10)):  # ... while the IRB 1600 crosses back
            res = solve_ik(station, "irb1600", (0.62, y, 0.12), grasp_quat("y"), seed=0,
                           ignore={"irb120"})
            assert res.ok
            q["irb1600"] = res.q
        assert cc.free(start) and cc.free(goal)
        assert not edge_free(station, start, goal, checker=cc)
        res = plan_motion(station, start, goal, seed=1, time_limit=30, checker=cc)
        assert res.ok and res.checks > 0 and len(res.path) >= 3
        for r in station.robot_names:
            assert np.array_equal(res.path[0][r], start[r])
            assert np.array_equal(res.path[-1][r], goal[r])
        assert all(cc.free(q) for q in densify(res.path, 0.05))
    finally:
        station.remove("obstacle:wall")
        station.set_qs(home)


def test_yaw_free_ik_constrains_only_the_tool_axis(station):
    down = grasp_quat("x")
    res = solve_ik(station, "irb120", (0.40, 0.20, 0.10), down, seed=0, yaw_free=True)
    assert res.ok and res.rot_err <= 1e-3
    _, quat = station.tool_pose("irb120", res.q)
    z = np.array(p.getMatrixFromQuaternion(quat)).reshape(3, 3)[:, 2]
    assert z == pytest.approx([0, 0, -1], abs=1e-3)


# -- follow-ups: the cell's home, the IRB 1600's elbow pair, IK's nearest solution --------

def test_twin_home_is_the_cells_home_override(station, tmp_path):
    cell = station.cell
    want = np.array([float(v) for v in cell.twin.homes["irb1600"]])
    assert np.array_equal(station.home("irb1600"), want)  # `home irb1600 (...)` in the cell
    assert np.array_equal(station.home("irb120"), np.array(station.spec("irb120").home))
    with Twin(cell) as fresh:  # robots start at home
        assert np.array_equal(fresh.get_q("irb1600"), want)
    h = station.home("irb1600")
    h[0] = 9.0  # a copy: the twin's home is not changed through it
    assert np.array_equal(station.home("irb1600"), want)
    base = ("cell h {\n    workspace x [0.2, 0.7] y [-0.5, 0.5] z [0, 0.3]\n"
            "    robot arm model panda base (0, 0, 0) gripper vacuum\n    home arm ")
    # reported at the `home` line (4), not at the robot's line (3)
    with pytest.raises(CellspecError, match=r"c\.cell:4:5: .*home of arm: panda has 7 "
                       r"joints, the cell gives 3 angles"):
        Twin(_cell(tmp_path, base + "(0, 0, 0)\n}\n"))
    with pytest.raises(CellspecError, match=r"c\.cell:4:5: .*home of arm is outside the joint "
                       r"limits of panda \(joint 4\)"):
        Twin(_cell(tmp_path, base + "(0, 0, 0, 0.5, 0, 1.5, 0)\n}\n"))


def test_abb_forearm_capsule_pair_depends_on_q3_only_and_is_disabled(station):
    # link_4 is a solid of revolution about axis 4: its distance to link_2 depends on q3
    # alone, so within the axis-3 range (the mechanical stop) a contact is an artefact
    rb = station.robot("irb1600")
    idx = {v: k for k, v in rb.link_names.items()}
    try:
        for q3 in np.linspace(rb.spec.lower[2], rb.spec.upper[2], 9):
            ds = []
            for q4 in (0.0, 1.0, 2.5):
                station.set_q("irb1600", np.array([0.3, 0.2, q3, q4, 0.0, 0.0]))
                pts = p.getClosestPoints(rb.body, rb.body, 1.0, idx["link_2"], idx["link_4"],
                                         physicsClientId=station.client)
                ds.append(min(pt[8] for pt in pts))
            assert max(ds) - min(ds) < 1e-6
        # the capsules do touch near the +65 deg stop: the reason for disabling the pair
        station.set_q("irb1600", np.array([0.0, 0.0, rb.spec.upper[2], 0.0, 0.0, 0.0]))
        pts = p.getClosestPoints(rb.body, rb.body, 1.0, idx["link_2"], idx["link_4"],
                                 physicsClientId=station.client)
        assert min(pt[8] for pt in pts) < 0
    finally:
        station.set_q("irb1600", station.home("irb1600"))
    cc = CollisionChecker(station)
    for robot in ("irb120", "irb1600"):
        assert station.spec(robot).is_disabled("link_4", "link_2")
        assert ("link_2", "link_4") not in cc.self_pairs(robot)
        assert ("link_2", "link_5") in cc.self_pairs(robot)  # the wrist is still checked


@pytest.mark.parametrize("axis", ["x", "y"])
def test_irb1600_near_its_base_takes_the_elbow_down_solution(station, axis):
    spec = station.spec("irb1600")
    for xy in ((0.62, 0.35), (0.65, 0.275), (0.70, 0.15)):
        res = solve_ik(station, "irb1600", (*xy, 0.03), grasp_quat(axis), seed=0,
                       q_init=station.home("irb1600"))
        assert res.ok, res.reason
        # not the overhead flip (q1 ~ +-2.9, q3 ~ -3.7): facing the table, elbow down
        assert abs(res.q[0]) < 1.0 and 0.5 < res.q[2] <= spec.upper[2], res.q


@pytest.mark.parametrize("ref, target, overhead", [
    # an overhead reference: the nearest solution is the overhead one, not the facing one
    ((1.493, 0.008, -2.428, -1.86, 0.127, 6.917), (0.368, 0.43, 0.2), True),
    # a facing reference: the first solution found is overhead, a nearer facing one exists
    ((1.34, -0.776, -2.478, -0.522, -0.456, 2.543), (0.615, 0.201, 0.127), False),
])
def test_ik_returns_the_solution_nearest_the_reference(station, ref, target, overhead):
    from cellspec.robots.ik import joint_distance

    ref = np.array(ref)
    args = ("irb1600", target, grasp_quat("y"))
    first = solve_ik(station, *args, seed=0, q_init=ref, nearest=0, ignore={"irb120"})
    near = solve_ik(station, *args, seed=0, q_init=ref, ignore={"irb120"})
    assert first.ok and near.ok
    v = station.spec("irb1600").vel_limits
    assert joint_distance(ref, near.q, v) < joint_distance(ref, first.q, v)
    assert (near.q[2] < -2.0) == overhead and (first.q[2] < -2.0) != overhead
