"""cellspec run: build a layout in the simulation with the world model in the loop."""

from __future__ import annotations

import argparse
import json
import sys

from cellspec.commands.common import EXIT_FAIL, EXIT_OK, add_shared
from cellspec.core.errors import CellspecError
from cellspec.core.extras import require_extra


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``run`` verb."""
    c = sub.add_parser("run", help="build a layout in the simulation, committing, rolling "
                       "back and diagnosing each action",
                       description="Build the layout action by action (pick, place) in a "
                       "pybullet physics simulation; after each action observe (ground truth "
                       "plus seeded noise), decide the action's commit condition with clingo, "
                       "commit or roll back the world database transition, diagnose any "
                       "discrepancy with the cell's diagnose rules and apply the recovery. "
                       "NOTE: with the arm engine the twin's arm drives a gripper pad; the "
                       "physics contacts are the pad's and the parts', not the arm links'. "
                       "Exit 0 built, 1 not built, 2 bad input.")
    add_shared(c, cell="the .cell file (commit and diagnose rules: `import diagnosis`)",
               layout="the layout JSON file (its order, else the planner's)")
    c.add_argument("--world", required=True, metavar="DB",
                   help="the world database to create (SQLite, WAL)")
    c.add_argument("--faults", default=None, metavar="LIST",
                   help="induced faults, e.g. slip@3,obstacle@5,moved@7,support@5 (planned action "
                   "numbers; support@N: a pick N whose part stands on another)")
    c.add_argument("--seed", type=int, default=0, help="seed of the noise and faults (0)")
    c.add_argument("--noise", type=float, default=0.0005, metavar="M",
                   help="standard deviation of the observed positions, metres (0.0005)")
    c.add_argument("--occlusion", type=float, default=0.0, metavar="P",
                   help="probability (seeded) that an object other than the action's part is "
                   "hidden from an observation; hidden entities lose confidence (0)")
    c.add_argument("--mode", choices=("diagnose", "nodiag", "blind"), default="diagnose",
                   help="diagnose (default); nodiag: restart the part on failure; blind: "
                   "retry the failed action as is (the benchmark's baselines)")
    c.add_argument("--engine", choices=("auto", "arm", "gripper"), default="auto",
                   help="arm: the twin's robot arm drives the gripper pad (IK along every "
                   "path); gripper: a kinematic gripper body on straight paths; auto "
                   "(default): arm when the twin is available")
    c.set_defaults(func=run)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code."""
    require_extra("twin", verb="run")
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the world model)
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.world.run import ENGINE_NOTE, parse_faults, run_layout

    faults = parse_faults(a.faults)
    if a.seed < 0:
        raise CellspecError("--seed must not be negative")
    cell = load_cell(a.cell)
    layout = load_layout(a.layout)

    # lazy: CLI start-up time (every verb loads for --help; small, but only this verb needs it)
    from cellspec.core import progress

    with progress.reporting(quiet=getattr(a, "quiet", False)):  # stderr, a terminal only
        r = run_layout(cell, layout, a.world, faults=faults, seed=a.seed, noise=a.noise,
                       mode=a.mode, engine=a.engine, occlusion=a.occlusion)
    if r.refused:
        print(f"{a.layout}: {r.reason}", file=sys.stderr)
        if a.format == "json":
            print(json.dumps(r.to_json(), indent=2))
        return EXIT_FAIL
    if a.format == "json":
        print(json.dumps(r.to_json(), indent=2))
    else:
        print(f"NOTE: {r.note}." if r.engine == "arm" else f"NOTE: {ENGINE_NOTE}.")
        print(f"run: {len(layout)} parts, {r.planned} planned actions, mode {r.mode}, faults "
              f"{', '.join(map(str, r.faults)) or 'none'}, seed {a.seed}")
        for s in r.steps:
            head = f"{s.label:>6}  {s.kind:<5} {s.part:<6}"
            if s.outcome == "committed":
                line = f"{head} committed"
            elif s.outcome == "rejected":
                line = f"{head} rejected ({'; '.join(s.failed)})"
            else:
                line = f"{head} rolled back ({'; '.join(s.failed) or 'condition failed'})"
            if s.causes:
                c0 = s.causes[0]
                line += f": {c0['cause']}({', '.join(c0['objects'])}) -> {s.recovery}"
                if s.ambiguous:
                    others = ", ".join(f"{c['cause']}({', '.join(c['objects'])})"
                                       for c in s.causes[1:])
                    line += f" [AMBIGUOUS: also {others}; took the top-ranked]"
            elif s.recovery:
                line += f": no cause diagnosed -> {s.recovery}"
            if s.note:
                line += f"  [{s.note}]"
            elif s.fault:
                line += f"  [fault {s.fault}]"
            print(line)
        rolled = sum(1 for s in r.steps if s.outcome == "rolled_back")
        diag = ", ".join(f"{f} -> {c or 'undiagnosed'}" for f, c in r.first_diagnosis.items())
        print(f"summary: {'built' if r.success else 'NOT built'} ({r.reason}); "
              f"{len(r.steps)} actions ({r.planned} planned), {rolled} rolled back; "
              f"max part error {r.max_error * 1000:.1f} mm; simulated {r.sim_seconds:.1f} s"
              + (f"; diagnosed {diag}" if diag else ""))
        if r.lifecycle:
            moves = [f"{x['entity']} {x['from']}->{x['to']} ({x['action']})"
                     for x in r.lifecycle]
            print(f"lifecycle: {', '.join(moves)}")
        if r.skipped_faults:
            print(f"skipped faults: {', '.join(r.skipped_faults)}", file=sys.stderr)
    return EXIT_OK if r.success else EXIT_FAIL
