"""RoCo-format plans: the twin grammar, the parser (file:line:col) and the ordered checks."""

from __future__ import annotations

import json

import pytest

from cellspec.cli import main
from cellspec.core.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.robots.roco import parse_plan
from cellspec.robots.roco_check import RocoChecker
from tests.conftest import REPO, run_cellspec

SORT = REPO / "rules" / "cells" / "sort_cubes.cell"
PLANS = REPO / "rules" / "plans"


@pytest.fixture(scope="module")
def sort_cell():
    return load_cell(SORT)


def test_twin_items_are_loaded(sort_cell):
    t = sort_cell.twin
    assert list(t.panels) == [f"panel{k}" for k in range(1, 8)]
    assert [(o.name, o.panel, o.goal) for o in t.objects] == [
        ("blue_square", "panel6", "panel2"), ("pink_polygon", "panel1", "panel4"),
        ("yellow_trapezoid", "panel3", "panel6")]
    assert set(t.reach_boxes) == {"Alice", "Bob", "Chad"}
    assert float(t.traj_epsilon) == 0.05
    station = load_cell(REPO / "rules" / "cells" / "dual_arm_station.cell")
    assert [s.name for s in station.twin.supplies] == ["feeder_a", "feeder_b"]
    assert station.twin.shared_zone is not None


@pytest.mark.parametrize("item, message", [
    ("home ghost (0, 0, 0, 0, 0, 0)", "home of unknown robot 'ghost'"),
    ("reachable ghost x [0, 1] y [0, 1] z [0, 1]", "reach box of unknown robot 'ghost'"),
    ("object o1 cube on nowhere goal nowhere", "unknown panel 'nowhere'"),
    ("trajectory epsilon 0", "trajectory epsilon must be positive"),
    ("trajectory epsilon 1e308", "trajectory epsilon must be positive and at most 1 (radians)"),
    ("supply s1 x [0, 1] y [0, 1]", "supply 's1' lacks the z range"),
])
def test_twin_item_errors_carry_file_line_col(tmp_path, item, message):
    f = tmp_path / "c.cell"
    f.write_text("cell c {\n    workspace x [0, 1] y [0, 1] z [0, 1]\n    part cube size "
                 "(0.05, 0.05, 0.05)\n    robot r1 model panda base (0, 0, 0) gripper vacuum\n"
                 f"    {item}\n}}\n")
    with pytest.raises(CellspecError) as e:
        load_cell(f)
    d = e.value.diagnostics[0]
    assert message in d.message
    assert (d.line, d.col) == (5, 5)


def test_parse_errors_name_file_line_col(sort_cell):
    text = "EXECUTE\nNAME Alice ACTION WAIT\nNAME Zed ACTION WAIT\nNAME Bob ACTION JUMP\n"
    with pytest.raises(CellspecError) as e:
        parse_plan(text, "p.txt", sort_cell)
    got = [(d.line, d.col, d.message) for d in e.value.diagnostics]
    assert got[0][:2] == (3, 6) and "unknown robot 'Zed'" in got[0][2]
    assert got[1][:2] == (4, 17) and "unknown action 'JUMP'" in got[1][2]
    with pytest.raises(CellspecError, match="missing action for robot"):
        parse_plan("NAME Alice ACTION WAIT\n", "p.txt", sort_cell)
    with pytest.raises(CellspecError, match="Bob: missing action after ACTION") as e:
        parse_plan("NAME Alice ACTION WAIT\nNAME Bob ACTION\nNAME Chad ACTION WAIT\n", "p.txt",
                   sort_cell)
    assert (e.value.diagnostics[0].line, e.value.diagnostics[0].col) == (2, 10)
    with pytest.raises(CellspecError, match="second action"):
        parse_plan("NAME Alice ACTION WAIT\nNAME Alice ACTION WAIT\n", "p.txt", sort_cell)


def test_strict_parse_keeps_paths(sort_cell):
    text = ("EXECUTE\nNAME Alice ACTION WAIT PATH [(-0.5, 0.5, 0.5)]\nNAME Bob ACTION PICK "
            "yellow_trapezoid PATH [(-0.2, 0.5, 0.2), (0, 0.5, 0.25)] PLACE panel5\nNAME Chad "
            "ACTION WAIT\n")
    with pytest.raises(CellspecError, match="PATH must be one bracketed list"):
        parse_plan(text, "p.txt", sort_cell)  # strict: PATH goes at the end of the line
    p = parse_plan(text.replace(" PATH [(-0.2, 0.5, 0.2), (0, 0.5, 0.25)] PLACE panel5",
                                " PLACE panel5 PATH [(-0.2, 0.5, 0.2), (0, 0.5, 0.25)]"),
                   "p.txt", sort_cell)
    assert p.action("Bob").path == ((-0.2, 0.5, 0.2), (0.0, 0.5, 0.25))
    assert p.action("Alice").wait and p.action("Alice").path == ((-0.5, 0.5, 0.5),)


@pytest.fixture(scope="module")
def checker(sort_cell):
    with RocoChecker(sort_cell) as ch:
        yield ch


@pytest.mark.parametrize("name, check, robots", [
    ("ok", None, ()),
    ("parse", "parse", ()),
    ("gripper", "gripper", ("Bob",)),
    ("task", "task", ("Bob",)),
    ("all_wait", "task", ()),
    ("reach", "reach", ("Alice",)),
    ("collision", "collision", ("Alice", "Bob")),
])
def test_each_check_fails_in_rocos_order(checker, name, check, robots):
    r = checker.check(checker.initial_state(), (PLANS / f"sort_cubes_{name}.txt").read_text())
    assert r.check == check and r.ok == (check is None) == r.roco_ok
    if check:
        assert r.failures[0].robots == robots and r.failures[0].source == "roco"


def test_roco_feedback_wording_and_layout(checker):
    st = checker.initial_state()
    r = checker.check(st, (PLANS / "sort_cubes_reach.txt").read_text())
    assert r.feedback == (
        "[Environment Feedback]:\n- Previous Plan:\nNAME Alice ACTION PICK blue_square PLACE "
        "panel3\nNAME Bob ACTION WAIT\nNAME Chad ACTION WAIT\n- Goal Step Alice (0.80, 0.50, "
        "0.32); Bob (0.00, 0.26, 0.64); Chad (1.03, 0.56, 0.54):\n   - Reachability failed: "
        "Out of reach: Alice (0.80, 0.50, 0.32); \n  ")
    r = checker.check(st, (PLANS / "sort_cubes_task.txt").read_text())
    assert r.feedback.endswith("Task Constraints:\n faild, Bob's ACTION is not valid, "
                               "yellow_trapezoid cube can only be placed on panel6, panel3, "
                               "panel5, but not on panel4\n")


def test_every_failing_robot_is_named_and_waiting_arms_are_checked(sort_cell, checker):
    st = checker.initial_state()
    both = ("EXECUTE\nNAME Alice ACTION PICK blue_square PLACE panel2\nNAME Bob ACTION WAIT\n"
            "NAME Chad ACTION PICK pink_polygon PLACE panel5\n")
    r = checker.check(st, both)
    assert r.check == "reach" and r.failures[0].robots == ("Alice", "Chad")
    assert "Out of reach: Alice (0.80, 0.50, 0.32); Chad (-1.12, 0.50, 0.30); " in r.feedback
    # a WAITing arm parked out of its reach box fails reach at its current pose
    away = st.with_(ee={**st.ee, "Alice": (-0.5, -0.3, 0.5)})
    r = checker.check(away, (PLANS / "sort_cubes_ok.txt").read_text())
    assert r.check == "reach" and r.failures[0].robots == ("Alice",)


def test_second_sub_step_is_the_place_goal(checker):
    st = checker.initial_state()
    r = checker.check(st, "EXECUTE\nNAME Alice ACTION PICK pink_polygon PLACE panel4\nNAME Bob "
                      "ACTION WAIT\nNAME Chad ACTION WAIT\n")
    assert r.check == "reach" and r.failures[0].step == 1  # the pick passed, the place fails
    assert "Goal Step Alice (0.00, 0.50, 0.50)" in r.feedback


def test_ik_failure_inside_the_reach_box(checker):
    st = checker.initial_state()
    far = st.with_(centres={**st.centres, "yellow_trapezoid": (0.65, 1.2, 0.85)})
    r = checker.check(far, (PLANS / "sort_cubes_ok.txt").read_text())
    assert r.check == "ik" and r.failures[0].robots == ("Bob",) and r.failures[0].step == 0
    assert " - IK failed: on Bob (0.65, 1.20, 0.95); " in r.feedback


def test_cellspec_checks_come_after_rocos_and_are_labelled(checker):
    st = checker.initial_state()
    # RoCo lets a cube be released onto another cube; cellspec flags the occupied spot
    r = checker.check(st, "EXECUTE\nNAME Alice ACTION PICK pink_polygon PLACE yellow_trapezoid"
                      "\nNAME Bob ACTION WAIT\nNAME Chad ACTION WAIT\n")
    assert r.roco_ok and not r.ok and r.feedback == ""
    f = r.failures[0]
    assert (f.check, f.robots, f.source) == ("occupied", ("Alice",), "cellspec")
    assert "cellspec: occupied [Alice]" in r.ours()


def test_check_plan_cli_modes_feedback_and_exit_codes(capsys):
    assert main(["check-plan", str(SORT), str(PLANS / "sort_cubes_reach.txt"), "--format",
                 "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["verdict"], out["check"], out["failures"][0]["robots"]) == (
        "fail", "reach", ["Alice"])
    assert main(["check-plan", str(SORT), str(PLANS / "sort_cubes_ok.txt")]) == 0
    assert capsys.readouterr().out.startswith("pass (action_only)")
    assert main(["check-plan", str(SORT), str(PLANS / "sort_cubes_parse.txt"), "--feedback",
                 "roco"]) == 1
    assert "failed to parse!" in capsys.readouterr().out
    # path mode needs a PATH on every line: the action-only plan does not parse there
    assert main(["check-plan", str(SORT), str(PLANS / "sort_cubes_ok.txt"), "--mode",
                 "action_and_path"]) == 1
    assert "Response does not contain PATH." in capsys.readouterr().out


def test_check_plan_strict_exit_2_with_location():
    r = run_cellspec("check-plan", SORT, PLANS / "sort_cubes_parse.txt", "--strict")
    assert r.returncode == 2
    assert "sort_cubes_parse.txt:7:1: error: expected `NAME ROBOT ACTION ...`" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_plan_test_block_errors(tmp_path):
    (tmp_path / "p.txt").write_text("NAME r1 ACTION WAIT\n")
    head = ("cell c {\n    workspace x [0, 1] y [0, 1] z [0, 1]\n    part cube size "
            "(0.05, 0.05, 0.05)\n    robot r1 model panda base (0, 0, 0) gripper vacuum\n}\n")
    cases = [
        ('test t {\n    plan "p.txt"\n    expect fail teleport(r1)\n}\n', 8, 17,
         "unknown plan check 'teleport'"),
        ('test t {\n    plan "nope.txt"\n    expect pass\n}\n', 7, 5,
         "plan file not found"),
        ('test t {\n    plan "p.txt"\n    order (a)\n    expect pass\n}\n', 6, 1,
         "a plan test takes no layout, order or robust"),
    ]
    for body, line, col, msg in cases:
        f = tmp_path / "c.cell"
        f.write_text(head + body)
        with pytest.raises(CellspecError) as e:
            load_cell(f)
        d = e.value.diagnostics[0]
        assert msg in d.message and (d.line, d.col) == (line, col), str(d)


def test_plan_test_reports_the_wrong_first_check(tmp_path, sort_cell):
    from cellspec.robots.roco import evaluate_plan_test

    f = tmp_path / "c.cell"
    f.write_text(SORT.read_text().split("\ntest ")[0].replace(
        'import physical', f'import "{(REPO / "cellspec" / "rules" / "physical.cell")}"')
        + f'\ntest t {{\n    plan "{PLANS / "sort_cubes_reach.txt"}"\n'
        "    expect fail ik(Alice)\n}\n")
    cell = load_cell(f)
    status, det = evaluate_plan_test(cell, cell.tests[0])
    assert status == "failed"
    assert det["actual"] == ("reach(Alice)",)
    assert "expected ik(Alice) to fail first" in det["message"]
