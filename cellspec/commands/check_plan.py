"""cellspec check-plan: check a RoCo response (a multi-robot plan) as RoCo does, then ours."""

from __future__ import annotations

import argparse
import json
import math

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.extras import require_extra
from cellspec.robots import quiet_pybullet


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``check-plan`` verb."""
    c = sub.add_parser("check-plan", help="check a RoCo-format multi-robot sub-task plan",
                       description="Check a RoCo response: the plan after EXECUTE, one "
                       "`NAME ROBOT ACTION PICK OBJ PLACE PANEL` or `NAME ROBOT ACTION WAIT` "
                       "line per robot (in action_and_path mode every line also carries "
                       "`PATH [(x,y,z), ...]`, the gripper's way to that sub-step's goal); "
                       "other lines are ignored as RoCo ignores them. RoCo's checks run in "
                       "RoCo's order per sub-step (task, reach, IK, collision; then "
                       "waypoints and spacing in path mode), every failing robot named; "
                       "cellspec's own checks follow, labelled. Exit 0 pass, 1 a check "
                       "fails (including a response RoCo cannot parse), 2 bad input (with "
                       "--strict: any format problem, with file:line:col).")
    add_shared(c, cell="the .cell file (robots, reach boxes, panels, objects)")
    c.add_argument("plan", help="the plan or response text file")
    c.add_argument("--mode", choices=("action_only", "action_and_path"), default=None,
                   help="RoCo's output mode (default: the plan file's `# cellspec: mode M` "
                   "line, else action_only as in RoCo's Sort task)")
    c.add_argument("--feedback", choices=("ours", "roco"), default="ours",
                   help="print cellspec's feedback (default) or RoCo's wording and layout")
    c.add_argument("--strict", action="store_true",
                   help="cellspec's strict format first: one line per robot, nothing else but "
                   "comments, every problem an error at file:line:col (exit 2)")
    c.add_argument("--max-failed-waypoints", type=int, default=1, metavar="N",
                   help="waypoint steps allowed to fail in path mode (RoCo's default: 1)")
    c.add_argument("--spacing-std", type=float, default=None, metavar="M",
                   help="largest std of PATH step lengths, metres (default: the plan's "
                   "`# cellspec: spacing-std M` line, else RoCo's Sort threshold 1.0)")
    c.add_argument("--seed", type=int, default=0, help="IK restart seed (default 0)")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    require_extra("twin", verb="check-plan")
    quiet_pybullet()
    # lazy: CLI start-up time (every verb loads for --help; loads textX, the twin)
    from cellspec.dsl.parser import display_path, load_cell
    from cellspec.robots.models import check_models
    from cellspec.robots.roco import load_plan_text, parse_plan, plan_mode, plan_spacing_std
    from cellspec.robots.roco_check import RocoChecker
    from cellspec.robots.roco_parse import MODES

    if a.max_failed_waypoints < 0:
        raise CellspecError("--max-failed-waypoints must be 0 or more")
    if a.spacing_std is not None and not (math.isfinite(a.spacing_std)
                                          and 0 < a.spacing_std < 100):
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
    text = load_plan_text(a.plan)

    # lazy: CLI start-up time (every verb loads for --help; small, but only this verb needs it)
    from cellspec.core.stdio import STDIN_NAME, is_stdin

    shown = STDIN_NAME if is_stdin(a.plan) else display_path(a.plan)
    mode = a.mode or plan_mode(text) or "action_only"
    if mode not in MODES:
        raise CellspecError(f"{shown}: unknown mode {mode!r} in the plan's "
                            f"`# cellspec: mode` line (modes: {', '.join(MODES)})")
    std = a.spacing_std if a.spacing_std is not None else (plan_spacing_std(text) or 1.0)
    if a.strict:
        parse_plan(text, shown, cell)  # format errors: exit 2, file:line:col
    with RocoChecker(cell, mode=mode, max_failed_waypoints=a.max_failed_waypoints,
                     step_std=std, seed=a.seed) as ch:
        r = ch.check(ch.initial_state(), text)
    if a.format == "json":
        print(json.dumps({**r.to_json(), "mode": mode}, indent=2))
    elif a.feedback == "roco":
        print(r.feedback.rstrip() if not r.roco_ok else "pass")
        for f in r.failures:
            if f.source == "cellspec":
                print(f"cellspec (not a RoCo check): {f.check}: {f.text}")
    elif r.ok:
        print(f"pass ({mode}): RoCo's checks and cellspec's")
    else:
        print(f"fail: {r.check}")
        print(r.ours())
    return EXIT_OK if r.ok else EXIT_FAIL
