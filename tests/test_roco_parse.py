"""cellspec's RoCo parser against RoCo's own: the vendored ``prompting/parser.py`` runs unchanged.

The oracle is RoCo's ``LLMResponseParser`` (tests/data/roco/parser.py, commit 9943870)
with its heavy imports (MuJoCo env classes, used only as type hints, and ``LLMPathPlan``,
a container) replaced by minimal stand-ins, and a fake Sort env whose ``get_target_pos``,
``get_grasp_site`` and object sites are transcribed from ``rocobench/envs/task_sort.py``
and ``task_sort.xml`` (numbers written out here, not read from cellspec's cell). Where
RoCo's code raises, its verdict is "reject (crash)". The table ``PLANS`` is copied or
minimally adapted from RoCo's repository: the action-space example and the two example
responses in task_sort.py, the parser's ``__main__`` demo, plus dialog-style variants.
scipy's ``Rotation`` and ``Slerp`` (the parser's path waypoints) are a numpy stand-in that
agrees with scipy's to 1e-15 (checked against scipy on 2 000 random pairs, antipodal
and near-equal ones).
"""

from __future__ import annotations

import importlib.util
import sys
import types

import numpy as np
import pytest

from cellspec.dsl.parser import load_cell
from cellspec.robots.roco_parse import RocoParser
from cellspec.robots.roco_task import SortState, SortTask
from tests.conftest import REPO

SORT = REPO / "rules" / "cells" / "sort_cubes.cell"
ROBOT = {"Alice": "ur5e_robotiq", "Bob": "panda", "Chad": "ur5e_suction"}
EE = {"Alice": (-0.567, 0.558, 0.538), "Bob": (0.0, 0.257, 0.640), "Chad": (1.033, 0.558, 0.538)}
# task_sort.xml: panel geoms (x, y); task_sort.py get_target_pos sets z = 0.5
PANEL_XY = {"panel1": (-1.12, 0.5), "panel2": (-0.8, 0.5), "panel3": (-0.4, 0.5),
            "panel4": (0.0, 0.5), "panel5": (0.4, 0.5), "panel6": (0.8, 0.5),
            "panel7": (1.2, 0.5)}
# cube centres as in the cell (start panels blue panel6, pink panel1, yellow panel3)
CENTRES = {"blue_square": (0.8, 0.5, 0.22), "pink_polygon": (-1.12, 0.5, 0.204),
           "yellow_trapezoid": (-0.4, 0.5, 0.186)}


def _load_roco_parser():
    """Import the vendored parser with stand-ins for its MuJoCo-only imports and for
    scipy's ``Rotation``/``Slerp`` (tests/data/roco/scipy_rotation.py: numpy, the same
    conventions; scipy is no dependency of cellspec)."""
    rot_spec = importlib.util.spec_from_file_location(
        "roco_scipy_rotation", REPO / "tests" / "data" / "roco" / "scipy_rotation.py")
    transform = importlib.util.module_from_spec(rot_spec)
    rot_spec.loader.exec_module(transform)
    envs = types.ModuleType("rocobench.envs")
    envs.MujocoSimEnv = envs.EnvState = envs.RobotState = object
    sub = types.ModuleType("rocobench.subtask_plan")

    class LLMPathPlan:  # the parser only constructs it
        def __init__(self, **kw):
            self.__dict__.update(kw)

    sub.LLMPathPlan = LLMPathPlan
    pkg = types.ModuleType("rocobench")
    stand_ins = {"rocobench": pkg, "rocobench.envs": envs, "rocobench.subtask_plan": sub,
                 "scipy": types.ModuleType("scipy"),
                 "scipy.spatial": types.ModuleType("scipy.spatial"),
                 "scipy.spatial.transform": transform}
    saved = {k: sys.modules.get(k) for k in stand_ins}
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.spec_from_file_location(
            "roco_parser_oracle", REPO / "tests" / "data" / "roco" / "parser.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


class _FakeSortEnv:
    """task_sort.py's SortOneBlockTask, as far as the parser reads it."""

    robot_name_map_inv = {"Alice": "ur5e_robotiq", "Bob": "panda", "Chad": "ur5e_suction"}
    cube_names = list(CENTRES)

    def __init__(self, obs):
        self.obs = obs

    def __str__(self) -> str:
        return "<SortOneBlockTask>"

    def get_grasp_site(self, obj_name="pink_polygon"):
        return f"{obj_name}_top"

    def get_target_quat(self, agent_name, target_name):  # base_env.py
        return np.array([1, 0, 0, 0])

    def get_object_joint_name(self, obj_name):
        return f"{obj_name}_joint"

    def get_target_pos(self, agent_name, target_name, target_type="site"):
        robot_name = self.robot_name_map_inv[agent_name]  # KeyError as in RoCo
        if "panel" in target_name:
            if target_name not in PANEL_XY:
                return None  # RoCo: physics.data.geom(name) raises KeyError -> None
            ret = np.array([*PANEL_XY[target_name], 0.16])
            if target_name == "panel3":
                if "panda" in robot_name:
                    ret[0] -= 0.12
                    ret[1] -= 0.1
                else:
                    ret[0] += 0.12
                    ret[1] += 0.1
            if target_name == "panel5":
                if "panda" in robot_name:
                    ret[0] += 0.12
                    ret[1] -= 0.1
                else:
                    ret[0] -= 0.12
                    ret[1] += 0.1
            ret[2] = 0.5
        elif target_name in self.cube_names:
            ret = self.obs.objects[target_name].sites[f"{target_name}_top"].xpos.copy()
        else:
            ret = None
        return ret


def _obs(holding: dict[str, str | None]):
    site = lambda c: types.SimpleNamespace(xpos=np.array([c[0], c[1], c[2] + 0.1]),  # noqa: E731
                                           xquat=np.array([1.0, 0, 0, 0]))
    objects = {n: types.SimpleNamespace(
        sites={f"{n}_top": site(c)},
        contacts={ROBOT[a] for a, h in holding.items() if h == n}) for n, c in CENTRES.items()}
    obs = types.SimpleNamespace(objects=objects)
    for a, r in ROBOT.items():
        setattr(obs, r, types.SimpleNamespace(
            ee_pose=np.array([*EE[a], 0, 0, 0, 1.0]), ee_xquat=np.array([0, 0, 0, 1.0]),
            contacts={holding[a]} if holding.get(a) else set()))
    return obs


ORACLE = _load_roco_parser()


def roco_parse(response: str, mode: str, holding=None):
    """RoCo's verdict: (ok, reason); a raised exception is a reject naming it."""
    holding = holding or {a: None for a in ROBOT}
    obs = _obs(holding)
    env = _FakeSortEnv(obs)
    kw = ["NAME", "ACTION"] + (["PATH"] if mode == "action_and_path" else [])
    p = ORACLE.LLMResponseParser(env, mode, {r: a for a, r in ROBOT.items()}, kw, 5,
                                 use_prepick=False,
                                 use_preplace=True)
    try:
        ok, reason, plans = p.parse(obs, response)
    except Exception as exc:  # RoCo's run would crash here
        return False, f"crash:{type(exc).__name__}", []
    return ok, reason, plans


@pytest.fixture(scope="module")
def parser_for():
    cell = load_cell(SORT)
    task = SortTask(cell)

    def make(mode):
        return RocoParser(task, mode)

    return make, task


def _state(task: SortTask, holding=None) -> SortState:
    return SortState(centres=dict(CENTRES), holding=holding or {a: None for a in ROBOT},
                     ee=dict(EE))


P = "PATH [" + ", ".join(["(0.1, 0.4, 0.5)"] * 6) + "]"
P3 = "PATH [(0.1, 0.4, 0.5), (0.0, 0.45, 0.45), (-0.2, 0.5, 0.4)]"
# (name, mode, response): copied or minimally adapted from RoCo's repository
PLANS = [
    ("action_space_example", "action_only", "EXECUTE\nNAME Alice ACTION PICK red_square PLACE "
     "panel3\nNAME Bob ACTION WAIT\nNAME Chad ACTION PICK green_trapezoid PLACE panel6\n"),
    ("action_space_example_our_cubes", "action_only", "EXECUTE\nNAME Alice ACTION PICK "
     "pink_polygon PLACE panel3\nNAME Bob ACTION WAIT\nNAME Chad ACTION PICK blue_square "
     "PLACE panel6\n"),
    ("example_response_1_proceed", "action_only", "[Reasons] I am Alice, I must put "
     "blue_square on panel2, but I can't reach blue_square for now. Since Chad needs "
     "yellow_trapezoid, I propose to help Chad move it closer. What does everyone think?\n"
     "[Proposal] PICK yellow_trapezoid PLACE panel3\n[Decision] PROCEED"),
    ("example_response_2", "action_only", "[Reasons] I am Chad, My previous proposal was "
     "approved and no need for update. I approve the latest proposals from Alice and Bob.\n"
     "[Proposal] WAIT \n[Decision] \nEXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "blue_square PLACE panel3\nNAME Chad WAIT"),
    ("example_response_2_fixed", "action_only", "[Reasons] I am Chad, I approve.\n[Proposal] "
     "WAIT \n[Decision] \nEXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT"),
    ("parser_demo", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "pink_polygon PLACE bin_polygon\nNAME Chad ACTION PICK yellow_trapezoid PLACE "
     "bin_trapezoid\n        "),
    ("parser_demo_panels", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION "
     "PICK pink_polygon PLACE panel4\nNAME Chad ACTION PICK yellow_trapezoid PLACE panel6\n"),
    ("decision_execute_one_line", "action_only", "[Reasons] agreed.\n[Decision] EXECUTE\n"
     "NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad "
     "ACTION WAIT\n"),
    ("code_fence", "action_only", "Final plan:\n```\nEXECUTE\nNAME Alice ACTION WAIT\nNAME "
     "Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n```\n"),
    ("bullets", "action_only", "EXECUTE\n- NAME Alice ACTION WAIT\n- NAME Bob ACTION PICK "
     "yellow_trapezoid PLACE panel5\n- NAME Chad ACTION WAIT\n"),
    ("trailing_prose", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\nThis lets Chad reach it next "
     "round.\n"),
    ("wait_with_period", "action_only", "EXECUTE\nNAME Alice ACTION WAIT.\nNAME Bob ACTION "
     "PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT.\n"),
    ("no_execute", "action_only", "NAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n"),
    ("execute_twice", "action_only", "[Alice]: I will EXECUTE once Chad agrees.\n[Chad]: "
     "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5\n"
     "NAME Chad ACTION WAIT\n"),
    ("plan_between_two_executes", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob "
     "ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\nEXECUTE\n"),
    ("duplicate_robot", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Alice ACTION "
     "WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5\n[Chad] agrees.\n"),
    ("unknown_robot", "action_only", "Chad is busy.\nEXECUTE\nNAME Alice ACTION WAIT\nNAME Bob "
     "ACTION PICK yellow_trapezoid PLACE panel5\nNAME Dave ACTION WAIT\n"),
    ("missing_robot", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "yellow_trapezoid PLACE panel5\n"),
    ("pick_only", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "yellow_trapezoid\nNAME Chad ACTION WAIT\n"),
    ("place_only_not_holding", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob "
     "ACTION PLACE yellow_trapezoid panel5\nNAME Chad ACTION WAIT\n"),
    ("move_panel", "action_only", "EXECUTE\nNAME Alice ACTION MOVE panel3\nNAME Bob ACTION "
     "PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n"),
    ("lowercase_action", "action_only", "EXECUTE\nNAME Alice ACTION wait\nNAME Bob ACTION "
     "pick yellow_trapezoid place panel5\nNAME Chad ACTION WAIT\n"),
    ("place_target_period", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION "
     "PICK yellow_trapezoid PLACE panel5.\nNAME Chad ACTION WAIT\n"),
    ("place_target_space", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION "
     "PICK yellow_trapezoid PLACE panel 5\nNAME Chad ACTION WAIT\n"),
    ("place_on_cube", "action_only", "EXECUTE\nNAME Alice ACTION PICK pink_polygon PLACE "
     "yellow_trapezoid\nNAME Bob ACTION WAIT\nNAME Chad ACTION WAIT\n"),
    ("same_cube_twice", "action_only", "EXECUTE\nNAME Alice ACTION PICK yellow_trapezoid "
     "PLACE panel3\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION "
     "WAIT\n"),
    ("all_wait", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION WAIT\nNAME "
     "Chad ACTION WAIT\n"),
    ("output_word_is_put", "action_only", "EXECUTE\nNAME Alice ACTION WAIT (no OUTPUT)\nNAME "
     "Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n"),
    ("extra_keyword_line", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION "
     "PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n(one NAME and ACTION line "
     "per robot)\n"),
    ("lowercase_execute", "action_only", "execute\nNAME Alice ACTION WAIT\nNAME Bob ACTION "
     "PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n"),
    ("path_after_place_action_mode", "action_only", "EXECUTE\nNAME Alice ACTION WAIT\nNAME "
     "Bob ACTION PICK yellow_trapezoid PLACE panel5 " + P3 + "\nNAME Chad ACTION WAIT\n"),
    ("wait_path_action_mode", "action_only", "EXECUTE\nNAME Alice ACTION WAIT " + P3 + "\n"
     "NAME Bob ACTION PICK yellow_trapezoid PLACE panel5\nNAME Chad ACTION WAIT\n"),
    ("path_mode_only_bob_has_path", "action_and_path", "EXECUTE\nNAME Alice ACTION WAIT\nNAME "
     "Bob ACTION PICK yellow_trapezoid PLACE panel5 " + P3 + "\nNAME Chad ACTION WAIT\n"),
    ("path_mode_path_after_place", "action_and_path", "EXECUTE\nNAME Alice ACTION WAIT " + P3
     + "\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 " + P3 + "\nNAME Chad ACTION WAIT "
     + P3 + "\n"),
    ("path_mode_path_between", "action_and_path", "EXECUTE\nNAME Alice ACTION WAIT " + P + "\n"
     "NAME Bob ACTION PICK yellow_trapezoid " + P + " PLACE panel5\nNAME Chad ACTION WAIT " + P
     + "\n"),
    ("path_mode_three_points", "action_and_path", "EXECUTE\nNAME Alice ACTION WAIT " + P3 +
     "\nNAME Bob ACTION PICK yellow_trapezoid " + P3 + " PLACE panel5\nNAME Chad ACTION WAIT "
     + P3 + "\n"),
    ("path_mode_empty_path", "action_and_path", "EXECUTE\nNAME Alice ACTION WAIT PATH []\n"
     "NAME Bob ACTION PICK yellow_trapezoid " + P + " PLACE panel5\nNAME Chad ACTION WAIT " + P
     + "\n"),
    ("path_mode_nan", "action_and_path", "EXECUTE\nNAME Alice ACTION WAIT PATH [(nan, 0.5, "
     "0.5)]\nNAME Bob ACTION WAIT " + P + "\nNAME Chad ACTION WAIT " + P + "\n"),
]

# cellspec departs from RoCo on purpose here (and says so in its reason)
DELIBERATE = {
    # RoCo reads 2-number points and then takes quaternion entries as the third coordinate
    "path_mode_two_numbers": ("action_and_path", "EXECUTE\nNAME Alice ACTION WAIT PATH "
                              "[(0.1, 0.5)]\nNAME Bob ACTION WAIT PATH [(0.1, 0.5)]\nNAME Chad "
                              "ACTION WAIT PATH [(0.1, 0.5)]\n"),
}


@pytest.mark.parametrize("name, mode, response", PLANS, ids=[p[0] for p in PLANS])
def test_our_parser_agrees_with_rocos(parser_for, name, mode, response):
    make, task = parser_for
    roco_ok, roco_reason, plans = roco_parse(response, mode)
    ours = make(mode).parse(_state(task), response)
    assert ours.ok == roco_ok, (name, roco_reason, ours.reason)
    if roco_reason.startswith("crash:"):
        assert ours.crash == roco_reason.split(":")[1], (ours.reason, ours.crash)
        return
    assert ours.reason == roco_reason
    if roco_ok:  # the same sub-steps, targets and waypoint counts
        assert len(ours.steps) == len(plans)
        for step, plan in zip(ours.steps, plans, strict=True):
            assert list(step) == plan.agent_names
            for a, t in step.items():
                np.testing.assert_allclose(t.pos, np.asarray(plan.ee_targets[a])[:3], atol=1e-6)
                assert len(t.waypoints) == len(plan.ee_waypoints[a])
                for w, rw in zip(t.waypoints, plan.ee_waypoints[a], strict=True):
                    np.testing.assert_allclose(w, np.asarray(rw)[:3], atol=1e-6)
                assert t.action == plan.action_strs[a]
        assert ours.proposal == plans[0].parsed_proposal


def test_the_table_has_rocos_verdicts(parser_for):
    """The agreement table of the issue note: RoCo's verdict and ours on every plan."""
    make, task = parser_for
    rows = []
    for name, mode, response in PLANS:
        roco_ok, roco_reason, _ = roco_parse(response, mode)
        ours = make(mode).parse(_state(task), response)
        rows.append((name, roco_ok, ours.ok))
    assert len(rows) >= 35 and all(r == o for _, r, o in rows)
    accepted = {n for n, r, _ in rows if r}
    assert {"decision_execute_one_line", "code_fence", "bullets", "trailing_prose",
            "wait_with_period", "path_mode_path_between"} <= accepted
    assert not {"no_execute", "path_after_place_action_mode", "path_mode_path_after_place",
                "path_mode_three_points"} & accepted


@pytest.mark.parametrize("holding, response, reason", [
    ({"Bob": "yellow_trapezoid"}, "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PICK "
     "blue_square PLACE panel5\nNAME Chad ACTION WAIT\n",
     "Robot Bob is already holding an object, can't pick another one."),
    ({"Bob": "yellow_trapezoid"}, "EXECUTE\nNAME Alice ACTION PICK yellow_trapezoid PLACE "
     "panel3\nNAME Bob ACTION WAIT\nNAME Chad ACTION WAIT\n",
     "Object yellow_trapezoid is already being held by robot panda, can't pick again"),
    ({"Bob": "yellow_trapezoid"}, "EXECUTE\nNAME Alice ACTION WAIT\nNAME Bob ACTION PLACE "
     "yellow_trapezoid panel5\nNAME Chad ACTION WAIT\n", ""),
])
def test_gripper_state_as_roco(parser_for, holding, response, reason):
    make, task = parser_for
    full = {a: holding.get(a) for a in ROBOT}
    roco_ok, roco_reason, _ = roco_parse(response, "action_only", full)
    ours = make("action_only").parse(_state(task, full), response)
    assert roco_reason == reason
    assert ours.ok == roco_ok == (reason == "")
    # RoCo names the holder by its model name (panda); cellspec names the robot
    assert ours.reason == reason.replace("robot panda", "robot Bob")
    if reason:
        assert ours.check == "gripper"


def test_deliberate_departures_are_reported(parser_for):
    make, task = parser_for
    mode, response = DELIBERATE["path_mode_two_numbers"]
    roco_ok, _, _ = roco_parse(response, mode)
    ours = make(mode).parse(_state(task), response)
    assert roco_ok and not ours.ok
    assert "is not a finite (x,y,z)" in ours.reason


@pytest.mark.parametrize("response, reason", [
    ("x" * (1 << 20) + "NAME ACTION EXECUTE Alice Bob Chad", "longer than"),
    ("EXECUTE\nNAME Alice ACTION WAIT\x00\nNAME Bob ACTION WAIT\nNAME Chad ACTION WAIT\n",
     "binary"),
    ("Alice Bob Chad\nEXECUTE\n" + "NAME x ACTION WAIT\n" * 10_001, "at most 10000"),
])
def test_hostile_responses_are_rejected_with_a_reason(parser_for, response, reason):
    make, task = parser_for
    r = make("action_only").parse(_state(task), response)
    assert not r.ok and reason in r.reason


def test_ten_thousand_path_points_are_refused(parser_for):
    make, task = parser_for
    big = "PATH [" + ", ".join(["(0.1, 0.5, 0.5)"] * 10_000) + "]"
    resp = (f"EXECUTE\nNAME Alice ACTION WAIT {big}\nNAME Bob ACTION WAIT {big}\nNAME Chad "
            f"ACTION WAIT {big}\n")
    r = make("action_and_path").parse(_state(task), resp)
    assert not r.ok and "at most 200" in r.reason
