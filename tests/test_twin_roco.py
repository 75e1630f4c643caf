"""RoCo-format plans: the twin grammar, the parser (file:line:col) and the ordered checks."""

from __future__ import annotations

import json

import pytest

from cellspec.cli import main
from cellspec.dsl.errors import CellspecError
from cellspec.dsl.parser import load_cell
from cellspec.robots.roco import check_plan, check_plan_file, parse_plan
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


def test_parse_roundtrip_with_path(sort_cell):
    p = parse_plan((PLANS / "sort_cubes_ok.txt").read_text(), "ok.txt", sort_cell)
    bob = p.action("Bob")
    assert (bob.obj, bob.target) == ("yellow_trapezoid", "panel5")
    assert bob.path == ((-0.2, 0.5, 0.2), (0.0, 0.5, 0.25), (0.2, 0.5, 0.2))
    assert parse_plan("\n".join(a.to_text() for a in p.actions), "x", sort_cell) == \
        parse_plan("\n".join(a.to_text() for a in p.actions), "x", sort_cell)
    assert p.action("Alice").wait


@pytest.mark.parametrize("name, check, robot, obj", [
    ("ok", None, None, None),
    ("parse", "parse", None, None),
    ("task", "task", "Bob", "yellow_trapezoid"),
    ("all_wait", "task", None, None),
    ("reach", "reach", "Alice", "blue_square"),
    ("ik", "ik", "Chad", "blue_square"),
    ("collision", "collision", "Bob", "yellow_trapezoid"),
    ("waypoints", "waypoints", "Bob", "yellow_trapezoid"),
    ("spacing", "spacing", "Bob", "yellow_trapezoid"),
])
def test_each_check_fails_in_order(sort_cell, name, check, robot, obj):
    r = check_plan_file(sort_cell, PLANS / f"sort_cubes_{name}.txt")
    assert (r.check, r.robot, r.obj) == (check, robot, obj)
    assert r.ok == (check is None)
    if check not in (None, "parse"):
        assert r.passed == ("parse", "task", "reach", "ik", "collision", "waypoints",
                            "spacing")[:("parse", "task", "reach", "ik", "collision",
                                          "waypoints", "spacing").index(check)]
    if robot:
        assert robot in r.feedback and obj in r.feedback


def test_feedback_names_pose_and_limits(sort_cell):
    r = check_plan_file(sort_cell, PLANS / "sort_cubes_reach.txt")
    assert r.pose == pytest.approx((0.8, 0.5, 0.03))
    assert "(0.800, 0.500, 0.030)" in r.feedback and "x [-1.40, -0.25]" in r.feedback
    r = check_plan_file(sort_cell, PLANS / "sort_cubes_task.txt")
    assert r.feedback == ("Bob's ACTION is not valid, yellow_trapezoid cube can only be placed "
                          "on panel6, panel1, panel3, panel5, panel7, but not on panel4")


def test_waypoint_tolerance_is_an_option(sort_cell):
    from cellspec.robots.roco import load_plan

    plan = load_plan(PLANS / "sort_cubes_waypoints.txt", sort_cell)
    assert check_plan(sort_cell, plan).check == "waypoints"
    relaxed = check_plan(sort_cell, plan, max_failed_waypoints=2)
    assert relaxed.failed_waypoints == 2 and relaxed.check != "waypoints"


def test_check_plan_cli_json_and_exit_codes(capsys):
    assert main(["check-plan", str(SORT), str(PLANS / "sort_cubes_ik.txt"), "--format",
                 "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["verdict"], out["check"], out["robot"], out["object"]) == (
        "fail", "ik", "Chad", "blue_square")
    assert main(["check-plan", str(SORT), str(PLANS / "sort_cubes_ok.txt")]) == 0
    assert capsys.readouterr().out.startswith("pass: parse, task, reach, ik, collision")


def test_check_plan_bad_input_exit_2_with_location():
    r = run_cellspec("check-plan", SORT, PLANS / "sort_cubes_parse.txt")
    assert r.returncode == 2
    assert "sort_cubes_parse.txt:3:1: error: missing action for robot(s) Chad" in r.stderr
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
    f.write_text(SORT.read_text().split("// RoCo plans")[0].replace(
        'import physical', f'import "{(REPO / "cellspec" / "rules" / "physical.cell")}"')
        + f'test t {{\n    plan "{PLANS / "sort_cubes_ik.txt"}"\n'
        "    expect fail reach(Chad, blue_square)\n}\n")
    cell = load_cell(f)
    status, det = evaluate_plan_test(cell, cell.tests[0])
    assert status == "failed"
    assert det["actual"] == ("ik(Chad, blue_square)",)
    assert "expected reach(Chad, blue_square) to fail first" in det["message"]
