"""Hostile input to `cellspec sim`, `check-plan` and `review`: a clear message and exit 2
(or a real verdict, exit 1), never a traceback, a hang or a pass for something unchecked.
In-process calls (``cellspec.cli.main``) keep this file fast."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cellspec.cli import main
from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.layout import load_layout
from tests.conftest import DATA, REPO

PANDA = REPO / "rules" / "cells" / "panda_table.cell"
STATION = REPO / "rules" / "cells" / "dual_arm_station.cell"
SORT = REPO / "rules" / "cells" / "sort_cubes.cell"
TOWER2 = DATA / "twin" / "tower2.json"
ROBOT = "    robot arm model panda base (0, 0, 0) gripper parallel opening 0.08 depth 0.02\n"
SUPPLY = "    supply feeder x [0.30, 0.40] y [-0.45, -0.35] z [0.00, 0.10]\n"


def _cell(tmp: Path, robot: str = ROBOT, supply: str = SUPPLY, extra: str = "") -> str:
    f = tmp / "c.cell"
    f.write_text("cell c {\n    units m\n    workspace x [0.30, 0.70] y [-0.25, 0.25] z [0.00, "
                 "0.30]\n    surface table z 0\n    part cube size (0.05, 0.05, 0.05) mass 0.1\n"
                 f"{robot}{supply}{extra}}}\n")
    return str(f)


def _layout(tmp: Path, *parts: tuple[str, float, float, float], name: str = "l.json") -> str:
    f = tmp / name
    f.write_text(json.dumps({"units": "m", "parts": [
        {"id": i, "type": "cube", "pos": [x, y, z]} for i, x, y, z in parts]}))
    return str(f)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["sim", *argv]) if argv[0] != "-" else main(list(argv[1:]))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err
    return rc, out, err


# -- cellspec sim: bad input before anything is simulated (exit 2) --------------------------
@pytest.mark.parametrize(("case", "message"), [
    ("o_missing_folder", "-o {t}/nope/plan.json: the folder {t}/nope does not exist"),
    ("o_folder", "-o {t}: is a folder; give a file name"),
    ("script_missing_folder", "--script {t}/nope/s.py: the folder {t}/nope does not exist"),
    ("trajectories_missing_folder", "--trajectories {t}/nope/t.json: the folder {t}/nope does "
     "not exist"),
    ("snapshots_is_a_file", "--snapshots {t}/l.json: exists and is not a folder"),
    ("faults_empty", "--faults: no fault given"),
    ("faults_semicolons", "--faults: no fault given"),
    ("faults_negative", "--faults slow:-2: the slow-down factor must be in (1, 100]"),
    ("faults_nan_offset", "--faults offset:arm:1:nan: the joint offset must be finite"),
    ("faults_unknown_part", "--faults drop:zz: unknown part 'zz'"),
    ("faults_garbage", "--faults: cannot read '@@@'"),
    ("faults_block_huge", "block coordinates must be finite and within 100 m"),
    ("faults_offset_huge", "--faults offset:arm:1:1e308: the joint offset must be finite and "
     "at most 2π rad"),
    ("seed_negative", "--seed must be 0 or more"),
    ("time_limit_huge", "--time-limit must be a positive number of seconds, at most 86400"),
    ("motion_time_limit_inf", "--motion-time-limit must be a positive number of seconds"),
    ("zero_parts", "l0.json: error: the layout has no parts: nothing to simulate"),
    ("no_robots", "c.cell:1:1: error: cell c has no robots: nothing can place the parts"),
    ("no_supply", "c.cell:1:1: error: cell c has no supply area"),
    ("unknown_model", "c.cell:6:5: error: robot arm: unknown robot model 'ur5'"),
    ("bad_home_line", "c.cell:8:5: error: home of arm: panda has 7 joints, the cell gives 3"),
    ("home_outside_limits", "c.cell:8:5: error: home of arm is outside the joint limits of "
     "panda (joint 4)"),
    ("far_supply", "c.cell:7:5: error: no robot reaches a supply area"),
    ("plan_of_another_layout", "the plan's steps must place every part of the layout once "
     "(missing c1, c2; not in the layout: zz): is the plan for another layout?"),
    ("plan_bad_gripper", "p.json: error: steps[0].gripper: expected vacuum or parallel, got "
     "'magnet'"),
    ("plan_not_objects", "p.json: error: steps[0]: expected an object, got str"),
    ("plan_binary", "p.json: error: cannot read plan"),
    ("plan_empty", "p.json:1:1: error: invalid JSON: Expecting value"),
    ("layout_nan", "invalid JSON: NaN is not a number"),
    ("layout_huge", "parts[0].pos[0]: 1e+308 m is absurd"),
    ("layout_duplicate_ids", "parts[1].id: duplicate id 'c1'"),
    ("layout_unknown_type", "parts[0].type: unknown part type 'zz'"),
])
def test_sim_bad_input_exit_2(tmp_path: Path, capsys, case: str, message: str) -> None:
    t = str(tmp_path)
    lay = _layout(tmp_path, ("c1", 0.5, 0.0, 0.025))
    cell, args = str(PANDA), [str(TOWER2)]
    plan = tmp_path / "p.json"
    if case.startswith("o_"):
        args += ["-o", f"{t}/nope/plan.json" if "missing" in case else t]
    elif case.startswith("script"):
        args += ["--script", f"{t}/nope/s.py"]
    elif case.startswith("trajectories"):
        args += ["--trajectories", f"{t}/nope/t.json"]
    elif case.startswith("snapshots"):
        args += ["--snapshots", lay]
    elif case.startswith("faults"):
        spec = {"faults_empty": "", "faults_semicolons": " ; ;", "faults_negative": "slow:-2",
                "faults_nan_offset": "offset:arm:1:nan", "faults_unknown_part": "drop:zz",
                "faults_garbage": "@@@", "faults_offset_huge": "offset:arm:1:1e308",
                "faults_block_huge": "block:-1e308,-1e308,-1e308,1e308,1e308,1e308"}[case]
        args += ["--faults", spec]
    elif case == "seed_negative":
        args += ["--seed", "-1"]
    elif case == "time_limit_huge":
        args += ["--time-limit", "1e308"]
    elif case == "motion_time_limit_inf":
        args += ["--motion-time-limit", "inf"]
    elif case == "zero_parts":
        args = [_layout(tmp_path, name="l0.json")]
    elif case == "no_robots":
        cell = _cell(tmp_path, robot="")
    elif case == "no_supply":
        cell = _cell(tmp_path, supply="")
    elif case == "unknown_model":
        cell = _cell(tmp_path, robot=ROBOT.replace("panda", "ur5"))
    elif case == "bad_home_line":
        cell = _cell(tmp_path, extra="    home arm (0, 0, 0)\n")
    elif case == "home_outside_limits":
        cell = _cell(tmp_path, extra="    home arm (0, 0, 0, 1, 0, 1.5, 0.8)\n")
    elif case == "far_supply":
        cell = _cell(tmp_path, supply=SUPPLY.replace("[0.30, 0.40]", "[5.30, 5.40]"))
    elif case.startswith("plan_"):
        plan.write_bytes({
            "plan_of_another_layout": b'{"steps": [{"part": "zz", "gripper": "parallel"}]}',
            "plan_bad_gripper": b'{"steps": [{"part": "c1", "gripper": "magnet"}]}',
            "plan_not_objects": b'{"steps": ["c1"]}',
            "plan_binary": b"\x00\xff\xfe" * 50, "plan_empty": b""}[case])
        args += ["--plan", str(plan)]
    elif case.startswith("layout_"):
        f = tmp_path / "bad.json"
        f.write_text({
            "layout_nan": '{"parts": [{"id": "c1", "type": "cube", "pos": [NaN, 0, 0]}]}',
            "layout_huge": '{"parts": [{"id": "c1", "type": "cube", "pos": [1e308, 0, 0]}]}',
            "layout_duplicate_ids": '{"parts": [{"id": "c1", "type": "cube", "pos": [0.5, 0, '
            '0.025]}, {"id": "c1", "type": "cube", "pos": [0.5, 0.1, 0.025]}]}',
            "layout_unknown_type": '{"parts": [{"id": "c1", "type": "zz", "pos": [0.5, 0, '
            '0.025]}]}'}[case])
        args = [str(f)]
    rc, out, err = _run(capsys, cell, *args)
    assert rc == 2, err
    assert message.format(t=t) in err
    assert out == ""  # nothing on stdout: no report of a run that did not happen


# -- cellspec sim: a layout that fails its rules is not simulated (exit 1) ------------------
@pytest.mark.parametrize(("parts", "failed"), [
    ((("c1", 0.5, 0.0, 0.025), ("c2", 0.5, 0.01, 0.025)), "no_overlap(c1, c2)"),
    ((("c1", 0.5, 0.0, 0.2),), "gravity(c1)"),
    ((("c1", 0.27, 0.0, 0.025),), "workspace(c1)"),
])
def test_sim_refuses_a_layout_that_fails_its_rules(tmp_path: Path, capsys, parts,
                                                    failed: str) -> None:
    rc, out, _err = _run(capsys, str(PANDA), _layout(tmp_path, *parts), "--format", "json")
    rep = json.loads(out)
    assert rc == 1 and rep["verdict"] == "fail" and rep["actions"] == []
    assert rep["reason"] == (f"the layout fails its rules: {failed}; not simulated (fix the "
                             "layout, or simulate it anyway with --unverified)")
    assert rep["execution"] is None


def test_sim_unverified_runs_the_twin_but_never_passes(tmp_path: Path, capsys) -> None:
    """Outside the workspace but reachable: the twin passes every action, the verdict is
    still fail (the layout fails its rules)."""
    lay = _layout(tmp_path, ("c1", 0.27, 0.0, 0.025))
    rc, out, _err = _run(capsys, str(PANDA), lay, "--unverified", "--format", "json")
    rep = json.loads(out)
    assert [a["result"] for a in rep["actions"]] == ["pass"]
    assert rep["execution"]["ok"] is True
    assert rc == 1 and rep["verdict"] == "fail"
    assert rep["reason"] == ("the layout fails its rules: workspace(c1); every action passes "
                             "in the twin")


def test_sim_plan_order_is_verified(tmp_path: Path, capsys) -> None:
    """A plan that places the top cube first fails the order rules: not simulated."""
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"steps": [{"part": "c2", "gripper": "parallel", "axis": "x"},
                                          {"part": "c1", "gripper": "parallel", "axis": "x"}]}))
    rc, out, _err = _run(capsys, str(PANDA), str(TOWER2), "--plan", str(plan), "--format",
                         "json")
    rep = json.loads(out)
    assert rc == 1 and rep["actions"] == []
    assert rep["reason"].startswith("the layout with the plan's order fails its rules: "
                                    "support_order(")


def test_motion_time_limit_gives_unknown_not_fail(monkeypatch) -> None:
    """A planner out of time proves nothing: the verdict is unknown (exit 2), never pass."""
    from cellspec.robots import motion, sim

    def out_of_time(*_a, **_k) -> motion.MotionResult:  # what a loaded machine may give
        return motion.MotionResult(False, (), "time limit", 5.0, 0)

    monkeypatch.setattr(motion, "plan_motion", out_of_time)
    res = sim.simulate(load_cell(PANDA), load_layout(TOWER2))
    assert res.verdict == "unknown"
    assert [a.check for a in res.actions] == ["motion", "motion"]
    assert res.reason.startswith("2 of 2 actions fail before execution: the motion planner "
                                 "hit its time limit")


# -- cellspec check-plan ------------------------------------------------------------------
@pytest.mark.parametrize(("text", "where", "message"), [
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH "
     "[(0.1, 0.2\nNAME Chad ACTION WAIT\n", (2, 52),
     "Bob: PATH must be one bracketed list `[(x, y, z), ...]`"),
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH "
     "[(1e308, 0.5, 0.2)]\nNAME Chad ACTION WAIT\n", (2, 57),
     "Bob: PATH points must be finite numbers within 100 m"),
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH "
     "[(nan, 0.5, 0.2)]\nNAME Chad ACTION WAIT\n", (2, 57),
     "Bob: PATH points must be finite numbers within 100 m"),
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH ["
     + ", ".join(["(0.0, 0.5, 0.2)"] * 201) + "]\nNAME Chad ACTION WAIT\n", (2, 57),
     "Bob: PATH has 201 points; at most 200"),
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH "
     "[(0, 0.5, 0.2)(0, 0.5, 0.2)]\nNAME Chad ACTION WAIT\n", (2, 57),
     "Bob: PATH must be a list of (x, y, z) points separated by commas (one comma between"),
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH "
     "[(0, 0.5, 0.2),, (0, 0.5, 0.2)]\nNAME Chad ACTION WAIT\n", (2, 57),
     "Bob: PATH must be a list of (x, y, z) points separated by commas (one comma between"),
    ("NAME Alice ACTION WAIT\nNAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH "
     "[(1_0, 0.5, 0.2)]\nNAME Chad ACTION WAIT\n", (2, 57), "Bob: PATH points must be numbers"),
    ("NAME Zed ACTION WAIT\n", (1, 6), "unknown robot 'Zed'"),
    ("NAME Alice ACTION WAIT\n", (1, 1), "missing action for robot(s) Bob, Chad"),
    ("", (1, 1), "missing action for robot(s) Alice, Bob, Chad"),
])
def test_check_plan_bad_plans_exit_2_at_line_col(tmp_path: Path, capsys, text: str,
                                                  where: tuple[int, int], message: str) -> None:
    p = tmp_path / "plan.txt"
    p.write_text(text)
    rc, out, err = _run(capsys, "-", "check-plan", str(SORT), str(p), "--strict")
    assert rc == 2 and out == ""
    assert f"plan.txt:{where[0]}:{where[1]}: error: {message}" in err


def test_check_plan_binary_and_large_files(tmp_path: Path, capsys) -> None:
    b = tmp_path / "bin.txt"
    b.write_bytes(b"\x00\xff\xfe" * 100)
    big = tmp_path / "big.txt"
    big.write_text("# padding\n" * 120_000)
    assert _run(capsys, "-", "check-plan", str(SORT), str(b))[0] == 2
    rc, _out, err = _run(capsys, "-", "check-plan", str(SORT), str(big))
    assert rc == 2 and "big.txt: error: plan file too large (more than 1048576 bytes)" in err


def test_check_plan_cell_without_objects_is_a_task_failure(tmp_path: Path, capsys) -> None:
    p = tmp_path / "plan.txt"
    p.write_text("EXECUTE\nNAME arm ACTION PICK c1 PLACE p\n")
    rc, out, _err = _run(capsys, "-", "check-plan", _cell(tmp_path), str(p))
    assert rc == 1
    assert out == ("fail: parse\nroco: parse: Object c1 does not exist in the environment.\n")


# -- cellspec review ----------------------------------------------------------------------
def test_review_unknown_model_is_bad_input(tmp_path: Path, capsys) -> None:
    cell = _cell(tmp_path, robot=ROBOT.replace("panda", "ur5"))
    rc, out, err = _run(capsys, "-", "review", cell, str(TOWER2), "--port", "0")
    assert rc == 2 and out == ""
    assert "c.cell:6:5: error: robot arm: unknown robot model 'ur5'" in err


def test_review_refuses_a_plan_of_another_layout(tmp_path: Path) -> None:
    from cellspec.review.replay import load_plan

    cell = load_cell(PANDA)
    plan = {"homes": {"arm": [0.0] * 7}, "motions": [], "actions": [
        {"index": 0, "robot": "arm", "part": "c1", "pick": [0.35, -0.4, 0.025],
         "place": [0.4, 0.05, 0.025]}]}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(plan))
    lay = load_layout(TOWER2)
    with pytest.raises(CellspecError) as exc:
        load_plan(str(p), cell, layout=lay)
    c1 = [round(float(v), 4) for v in lay.pos[list(lay.ids).index("c1")]]
    assert str(exc.value.diagnostics[0]).endswith(
        f"actions[0].place: c1 is placed [0.4, 0.05, 0.025] in the plan but at {c1} in "
        f"{lay.path} (the plan was made for another layout)")
    plan["actions"][0]["part"] = "zz"
    p.write_text(json.dumps(plan))
    with pytest.raises(CellspecError, match="actions\\[0\\].part: 'zz' is not a part of"):
        load_plan(str(p), cell, layout=lay)
    plan["actions"][0]["start"] = float("inf")
    p.write_text(json.dumps(plan).replace("Infinity", "1e999"))
    with pytest.raises(CellspecError, match="actions\\[0\\].start: expected 1 finite"):
        load_plan(str(p), cell)


# -- concurrent replay: the plan JSON carries each action's executed start time -------------
@pytest.mark.slow
def test_replay_runs_concurrent_arms_concurrently(tmp_path: Path) -> None:
    from cellspec.review.replay import Replay, load_plan
    from cellspec.robots.sim import simulate
    from cellspec.robots.twin import Twin

    station = load_cell(STATION)
    layout = load_layout(DATA / "twin" / "dual4.json")
    res = simulate(station, layout)
    assert res.verdict == "pass" and res.concurrent
    obj = res.plan_json(station, layout)
    starts = {a["index"]: a["start"] for a in obj["actions"]}
    assert starts == {w[0]: round(w[1], 9) for w in res.timeline.windows}
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(obj))
    plan = load_plan(str(p), station, layout=layout)
    assert plan.starts == starts and plan.notes == []
    with Twin(station) as twin:
        rp = Replay(SimpleNamespace(twin=twin), plan)
        assert abs(rp.tl.end - res.timeline.end) < 1e-6 < res.sequential_end - rp.tl.end
        got = sorted(rp.tl.windows)
        want = sorted(res.timeline.windows)
        assert [(a, r) for a, _, _, r in got] == [(a, r) for a, _, _, r in want]
        assert np.allclose([w[1:3] for w in got], [w[1:3] for w in want], atol=1e-6)
        # two arms really move at the same time in the replay
        assert any(a[3] != b[3] and a[1] < b[2] and b[1] < a[2] for a in got for b in got)
        for robot in rp.tl.t:
            for t in np.linspace(0, rp.tl.end, 17):
                assert np.allclose(rp.tl.at(robot, t), res.timeline.at(robot, t), atol=1e-6)
        # without the start times the replay runs one action after another, and says so
        for a in obj["actions"]:
            a.pop("start")
        p.write_text(json.dumps(obj))
        seq = load_plan(str(p), station, layout=layout)
        assert seq.starts is None and "one after another" in seq.notes[0]
        assert abs(Replay(SimpleNamespace(twin=twin), seq).tl.end - res.sequential_end) < 1e-6


def test_review_accept_refuses_an_empty_layout(tmp_path: Path) -> None:
    """Deleting every part leaves a layout that verifies trivially: Accept writes nothing."""
    from cellspec.review.session import ReviewSession

    s = ReviewSession(load_cell(STATION), load_layout(REPO / "rules" / "examples" /
                                                      "tower3.json"))
    for pid in ("c1", "c2", "c3"):
        assert s.delete(pid).ok
    out = tmp_path / "out.json"
    r = s.accept(out)
    assert (r.ok, r.message) == (False, "not accepted: the layout has no parts; nothing written")
    assert not out.exists() and s.decision is None
    r = s.add_part("cube", pid="x" * 300)
    assert not r.ok and r.message.startswith(f"{'x' * 40!r}: part ids are 1-128 characters")


@pytest.mark.parametrize(("robot", "message"), [
    ("", "c.cell:1:1: error: cell c has no robots to plan for"),
    (ROBOT.replace("panda", "ur5"), "c.cell:6:5: error: robot arm: unknown robot model 'ur5'"),
])
def test_check_plan_bad_cells_exit_2(tmp_path: Path, capsys, robot: str, message: str) -> None:
    p = tmp_path / "plan.txt"
    p.write_text("NAME arm ACTION WAIT\n")
    rc, out, err = _run(capsys, "-", "check-plan", _cell(tmp_path, robot=robot), str(p))
    assert rc == 2 and out == "" and message in err


@pytest.mark.parametrize(("opts", "message"), [
    (["--seed", "-1"], "--seed must be 0 or more"),
    (["--spacing-std", "inf"], "--spacing-std must be a positive length below 100 m"),
    (["--spacing-std", "nan"], "--spacing-std must be a positive length below 100 m"),
    (["--max-failed-waypoints", "-1"], "--max-failed-waypoints must be 0 or more"),
])
def test_check_plan_bad_options_exit_2(capsys, opts: list[str], message: str) -> None:
    ok = REPO / "rules" / "plans" / "sort_cubes_ok.txt"
    rc, out, err = _run(capsys, "-", "check-plan", str(SORT), str(ok), *opts)
    assert rc == 2 and out == "" and message in err


@pytest.mark.parametrize("opts", [["--timeout", "1e308"], ["--repair-time-limit", "nan"],
                                  ["--timeout", "0"]])
def test_review_bad_limits_exit_2(capsys, opts: list[str]) -> None:
    rc, out, err = _run(capsys, "-", "review", str(PANDA), str(TOWER2), "--port", "0", *opts)
    assert rc == 2 and out == ""
    assert "--timeout and --repair-time-limit must be positive seconds, at most 86400" in err


@pytest.mark.slow
def test_dual_arm_run_is_identical_under_different_hash_seeds(tmp_path: Path) -> None:
    """Concurrent dispatch, clash checks and two drop faults: byte-identical plan, record
    and report in fresh processes whose str hashing (set order) differs."""
    import os
    import subprocess
    import sys

    outs = []
    for seed in ("1", "2"):
        d = tmp_path / seed
        d.mkdir()
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO))
        r = subprocess.run(
            [sys.executable, "-m", "cellspec", "sim", str(STATION),
             str(DATA / "twin" / "dual4.json"), "--faults", "drop:b2;drop:a2", "-o",
             str(d / "plan.json"), "--trajectories", str(d / "t.json"), "--format", "json"],
            capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False)
        assert r.returncode == 1, r.stderr  # the dropped parts are detected
        rep = json.loads(r.stdout)
        assert {a["part"] for a in rep["actions"] if a["result"] == "fail"} >= {"a2", "b2"}
        outs.append([r.stdout, (d / "plan.json").read_bytes(), (d / "t.json").read_bytes()])
    assert outs[0] == outs[1]


def test_a_part_wider_than_the_jaws_fails_the_gripper_check(tmp_path: Path, capsys) -> None:
    """The fingers are kinematic and the grasped part is exempt from collision at the grasp:
    without the width check a 0.20 m slab passed with 0.08 m jaws."""
    cell = _cell(tmp_path, extra="    part slab size (0.20, 0.20, 0.05) mass 0.5\n")
    f = tmp_path / "slab.json"
    f.write_text('{"parts": [{"id": "s1", "type": "slab", "pos": [0.5, 0, 0.025]}]}')
    rc, out, _err = _run(capsys, cell, str(f), "--format", "json")
    rep = json.loads(out)
    assert rc == 1 and rep["verdict"] == "fail"
    assert rep["actions"] == [{"index": 0, "robot": "arm", "part": "s1", "result": "fail",
                               "check": "gripper", "reason": "the part is 0.200 m wide along "
                               "x, the grip axis: wider than arm's jaw opening 0.08 m",
                               "delta": None}]


def test_a_robot_far_from_the_workspace_fails_each_action_by_name(tmp_path: Path,
                                                                   capsys) -> None:
    """It reaches the supply but not the places: a real verdict (exit 1), per action."""
    cell = _cell(tmp_path, robot=ROBOT.replace("base (0, 0, 0)", "base (0.35, -0.9, 0)"))
    rc, out, _err = _run(capsys, cell, str(TOWER2), "--format", "json")
    rep = json.loads(out)
    assert rc == 1 and rep["verdict"] == "fail" and rep["execution"] is None
    assert [(a["part"], a["check"]) for a in rep["actions"]] == [("c1", "ik"), ("c2", "ik")]
    for a, z in zip(rep["actions"], ("0.110", "0.160"), strict=True):
        assert a["reason"].startswith(f"transport pose (0.500, 0.050, {z}): unreachable: best "
                                      "position error")


def test_robot_script_refuses_a_cell_without_its_robots(tmp_path: Path) -> None:
    import runpy

    from cellspec.robots.script import script_text
    from cellspec.robots.sim import simulate

    panda = load_cell(PANDA)
    res = simulate(panda, load_layout(TOWER2))
    assert res.verdict == "pass"
    f = tmp_path / "s.py"
    f.write_text(script_text(panda, res, "s.py"))
    ns = runpy.run_path(str(f))
    assert ns["run"]() == []  # its own cell: every part at its place
    with pytest.raises(ns["ScriptError"]) as exc:
        ns["run"](str(STATION))
    assert str(exc.value) == (f"{STATION}: this script needs robot(s) arm (panda); the cell "
                              "has irb120 (abb_irb120), irb1600 (abb_irb1600)")


def test_plan_nested_too_deeply_is_bad_input(tmp_path):
    from cellspec.commands.sim import _steps
    from cellspec.core.errors import CellspecError

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CellspecError, match="nested too deeply"):
        _steps(str(deep))
