"""cellspec check-plan: check a RoCo-format multi-robot plan in the twin, in RoCo's order."""

from __future__ import annotations

import argparse
import json

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_format
from cellspec.dsl.errors import CellspecError, Diagnostic


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``check-plan`` verb."""
    c = sub.add_parser("check-plan", help="check a RoCo-format multi-robot sub-task plan",
                       description="Check a plan (one `NAME ROBOT ACTION PICK OBJ PLACE PANEL "
                       "[PATH [(x,y,z), ...]]` or `NAME ROBOT ACTION WAIT` line per robot) in "
                       "RoCo's order: parse, task constraints, reach, IK, collision, waypoints, "
                       "waypoint spacing. The first failure prints feedback naming the robot, "
                       "the object and the pose. Exit 0 pass, 1 a check fails, 2 bad input "
                       "(a parse error, with file:line:col).")
    c.add_argument("cell", help="the .cell file (robots, reach boxes, panels, objects)")
    c.add_argument("plan", help="the plan text file")
    c.add_argument("--max-failed-waypoints", type=int, default=1, metavar="N",
                   help="PATH points allowed to fail (RoCo's code: 1; the paper: 0)")
    c.add_argument("--spacing-std", type=float, default=0.1, metavar="M",
                   help="largest standard deviation of PATH step lengths, metres (default 0.1)")
    c.add_argument("--seed", type=int, default=0, help="IK restart seed (default 0)")
    add_format(c)
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    from cellspec.robots import quiet_pybullet

    quiet_pybullet()
    from cellspec.dsl.parser import load_cell
    from cellspec.robots.models import check_models
    from cellspec.robots.roco import check_plan, load_plan

    if a.max_failed_waypoints < 0:
        raise CellspecError("--max-failed-waypoints must be 0 or more")
    if not (0 < a.spacing_std < 100):
        raise CellspecError("--spacing-std must be a positive length below 100 m (an "
                            "infinite one would skip the spacing check)")
    if a.seed < 0:
        raise CellspecError("--seed must be 0 or more")
    cell = load_cell(a.cell)
    if not cell.robots:
        src = cell.source
        raise CellspecError(Diagnostic(src.file, src.line, src.col, f"cell {cell.name} has no "
                                       "robots to plan for"))
    check_models(cell)
    plan = load_plan(a.plan, cell)  # parse errors: exit 2 with file:line:col
    r = check_plan(cell, plan, max_failed_waypoints=a.max_failed_waypoints,
                   spacing_std=a.spacing_std, seed=a.seed)
    if a.format == "json":
        print(json.dumps(r.to_json(), indent=2))
    elif r.ok:
        extra = (f"; skipped (did not apply, no PATH given): {', '.join(r.skipped)}"
                 if r.skipped else "")
        print(f"pass: {', '.join(r.passed)}{extra}")
    else:
        print(f"fail: {r.check}")
        print(r.feedback)
    return EXIT_OK if r.ok else EXIT_FAIL
