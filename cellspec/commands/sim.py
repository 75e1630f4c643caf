"""cellspec sim: check, plan and execute a layout's assembly in the pybullet twin."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellspec.commands.bounded import LimitHit, print_unknown, remaining, run_bounded
from cellspec.commands.common import (
    EXIT_FAIL,
    EXIT_INPUT,
    EXIT_OK,
    add_shared,
    atomic_write,
)
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.extras import require_extra
from cellspec.core.io import TooLarge, read_text_bounded
from cellspec.core.limits import check_seconds, parse_memory
from cellspec.core.status import Status
from cellspec.robots import quiet_pybullet

if TYPE_CHECKING:
    from cellspec.dsl.model import Cell

MAX_SECONDS = 86400.0  # a time limit beyond a day is a typo (and overflows solver timers)
SOLVER_TIME_LIMIT = 10.0  # seconds per solver call (verify gate, sequencer, scheduler)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``sim`` verb."""
    c = sub.add_parser("sim", help="simulate the assembly in the pybullet digital twin",
                       description="Build the twin, compile the sequence into robot actions "
                       "(approach, grasp, lift, transport, place, release, retreat from the "
                       "cell's supply area), check reach, IK and collisions, plan every motion "
                       "(RRT-Connect), execute in a separate physics client and compare planned "
                       "and executed joint trajectories (δ ≤ ε). Only a layout that verifies "
                       "is simulated (else: fail). Exit 0 all actions pass, 1 any fails or the "
                       "layout fails its rules, 2 bad input or unknown (a time or memory "
                       "limit).")
    add_shared(c, cell=True, layout=True, output=("PLAN.json", "write the plan JSON here"),
               max_memory=True,
               time_limit=(None, "time limit of the whole verb in seconds (loading, "
                           "verification, sequencing, planning, execution; default none; "
                           "unknown when hit)"))
    c.add_argument("--solver-time-limit", type=float, default=SOLVER_TIME_LIMIT, metavar="S",
                   help=f"time limit of each solver call (the rule check, the sequencer, the "
                   f"scheduler) in seconds (default {SOLVER_TIME_LIMIT:g}; capped by what is "
                   "left of --time-limit)")
    c.add_argument("--plan", metavar="PLAN", help="a plan JSON with `steps` (from `cellspec plan "
                   "--format json` or `cellspec sim -o`) instead of the sequencer's plan")
    c.add_argument("--faults", metavar="SPEC", help="inject execution faults, `;`-separated: "
                   "offset:ROBOT:J:RAD, slow:FACTOR, slow:ROBOT:FACTOR, drop:PART, "
                   "block:X0,Y0,Z0,X1,Y1,Z1")
    c.add_argument("--snapshots", metavar="DIR", help="write planned.png and final.png here")
    c.add_argument("--script", metavar="OUT.py", help="write the executable robot script here")
    c.add_argument("--gantt", metavar="FILE.png",
                   help="draw the dual-arm schedule here (per robot: actions over time, the "
                   "ones entering the shared zone outlined, waits hatched); with --format "
                   "json the bars are in the output as `gantt`")
    c.add_argument("--trajectories", metavar="FILE.json",
                   help="write every recorded (t, q_plan, q_exec) sample here")
    c.add_argument("--seed", type=int, default=0, help="seed of IK restarts and RRT (default 0)")
    c.add_argument("--motion-time-limit", type=float, default=5.0, metavar="S",
                   help="RRT-Connect time limit per motion (default 5)")
    c.add_argument("--compare-single", action="store_true",
                   help="several arms: also plan and execute the best single arm's allocation "
                   "(CP-SAT's best single-arm estimate) and report the executed speedup next to "
                   "the estimated one (about doubles the run time)")
    c.add_argument("--unverified", action="store_true",
                   help="simulate even a layout that fails the cell's rules (by default it "
                   "is not simulated: verdict fail); the verdict is then never pass")
    c.set_defaults(func=run)


def writable_file(path: str, flag: str) -> Path:
    """Check before the long run that ``path`` can be written (its folder exists and is
    writable, it is not a folder): bad input (exit 2) now, not a crash at the end."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise CellspecError(f"{flag} {path}: is a folder; give a file name")
    if not parent.is_dir():
        raise CellspecError(f"{flag} {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CellspecError(f"{flag} {path}: not writable")
    return p


def writable_dir(path: str, flag: str) -> Path:
    """Create the folder ``path`` if needed and check it can be written (exit 2 if not)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CellspecError(f"{flag} {path}: exists and is not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CellspecError(f"{flag} {path}: cannot create the folder: "
                            f"{exc.strerror or exc}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise CellspecError(f"{flag} {path}: not writable")
    return p


def _steps(path: str):
    # lazy: CLI start-up time (every verb loads for --help; loads pydantic, the solvers)
    from cellspec.core.stdio import STDIN_NAME, is_stdin, read_stdin_text
    from cellspec.layout import MAX_LAYOUT_BYTES
    from cellspec.solver.cpsat.results import Step

    try:
        if is_stdin(path):  # `--plan -`
            text, path = read_stdin_text(MAX_LAYOUT_BYTES, "the plan"), STDIN_NAME
        else:
            text = read_text_bounded(path, MAX_LAYOUT_BYTES)
        obj = json.loads(text)
    except TooLarge as exc:
        raise CellspecError(Diagnostic(path, 0, 0, f"plan file is {exc}")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CellspecError(Diagnostic(path, 0, 0, f"cannot read plan: {exc}")) from None
    except json.JSONDecodeError as exc:
        raise CellspecError(Diagnostic(path, exc.lineno, exc.colno, f"invalid JSON: {exc.msg}")
                            ) from None
    except RecursionError:
        raise CellspecError(Diagnostic(path, 0, 0, "invalid JSON: nested too deeply")) from None
    steps = obj.get("steps") if isinstance(obj, dict) else None
    if not isinstance(steps, list) or not steps:
        raise CellspecError(Diagnostic(path, 0, 0, "steps: a plan needs a non-empty `steps` "
                                       "list of {part, gripper, axis}"))
    out = []
    for k, s in enumerate(steps):
        why = None
        if not isinstance(s, dict):
            why = f"steps[{k}]: expected an object, got {type(s).__name__}"
        elif not isinstance(s.get("part"), str) or not s["part"]:
            why = f"steps[{k}].part: expected a part id"
        elif s.get("gripper") not in ("vacuum", "parallel"):
            why = f"steps[{k}].gripper: expected vacuum or parallel, got {s.get('gripper')!r}"
        elif s.get("axis") not in ("x", "y", None):
            why = f"steps[{k}].axis: expected x, y or null, got {s.get('axis')!r}"
        if why is not None:
            raise CellspecError(Diagnostic(path, 0, 0, why))
        out.append(Step(part=s["part"], gripper=s["gripper"], axis=s.get("axis")))
    return tuple(out)


def run(a: argparse.Namespace) -> int:
    """Run the verb; returns the exit code. The whole verb runs in a bounded worker
    (:mod:`cellspec.commands.bounded`; its pybullet clients are created there):
    ``--time-limit`` (none by default) and ``--max-memory``. Every output (-o, --script,
    --trajectories, --gantt, --snapshots) is written here, only when the worker finished."""
    require_extra("twin", verb="sim")
    _check_options(a)
    a.max_memory = parse_memory(a.max_memory)
    got = run_bounded(lambda: _compute(a), time_limit=a.time_limit, max_memory=a.max_memory)
    if isinstance(got, LimitHit):  # printed from plain data: nothing imported after the limit
        return print_unknown(got, a.format, {"actions": [], "execution": None,
                                             "concurrent": False}, key="verdict")
    if a.output:
        atomic_write(Path(a.output), got["plan"])
    if a.script:
        if got["script"] is None:
            print(f"note: no robot script written: {got['reason']}", file=sys.stderr)
        else:
            atomic_write(Path(a.script), got["script"])
    if a.trajectories and got["trajectories"] is not None:
        atomic_write(Path(a.trajectories), got["trajectories"])
    if a.gantt:
        if got["gantt_png"] is not None:
            atomic_write(Path(a.gantt), got["gantt_png"])
        else:
            print(f"note: no schedule to draw ({got['reason'] or 'nothing was scheduled'}); "
                  f"{a.gantt} not written", file=sys.stderr)
    if a.snapshots:
        for name, data in got["snapshots"].items():
            atomic_write(Path(a.snapshots) / name, data)
    for n in got["notes"]:
        print(f"note: {n}", file=sys.stderr)
    if a.format == "json":
        print(json.dumps(got["json"], indent=2))
    else:
        print(got["pretty"], end="")
    if got["verdict"] == Status.PASS:
        return EXIT_OK
    return EXIT_FAIL if got["verdict"] == Status.FAIL else EXIT_INPUT


def _compute(a: argparse.Namespace) -> dict[str, Any]:
    """The verb's work (in the bounded worker), as plain data for the parent: the verdict,
    the reports and the bytes of every output asked for (snapshots and the chart are drawn
    in a private folder here and handed over)."""
    quiet_pybullet()
    # lazy: CLI start-up time (every verb loads for --help; loads textX, pydantic, the twin)
    from cellspec.dsl.parser import load_cell
    from cellspec.layout import load_layout
    from cellspec.robots.custom import spec_of
    from cellspec.robots.execute import parse_faults
    from cellspec.robots.models import check_models
    from cellspec.robots.sim import compare_single, simulate

    cell = load_cell(a.cell)
    layout = load_layout(a.layout)
    check_models(cell)
    dofs = {r.name: spec_of(r).dof for r in cell.robots}
    faults = parse_faults(a.faults, tuple(r.name for r in cell.robots), layout.ids, dofs)
    steps = _steps(a.plan) if a.plan else None

    # lazy: CLI start-up time (every verb loads for --help; small, but only this verb needs it)
    from cellspec.core import progress

    left = remaining(a.time_limit)
    solver = a.solver_time_limit if left is None else min(a.solver_time_limit, left)
    with tempfile.TemporaryDirectory(prefix="cellspec-sim-") as tmp:
        shots = Path(tmp, "snapshots") if a.snapshots else None
        if shots is not None:
            shots.mkdir()
        with progress.reporting(quiet=getattr(a, "quiet", False)):  # stderr, a terminal only
            res = simulate(cell, layout, steps=steps, faults=faults, seed=a.seed,
                           motion_time_limit=a.motion_time_limit, time_limit=solver,
                           snapshots=None if shots is None else str(shots),
                           unverified=a.unverified)
            if a.compare_single and res.verdict == Status.PASS:
                compare_single(cell, layout, res, seed=a.seed,
                               motion_time_limit=a.motion_time_limit, time_limit=solver)
        gantt, png = (_gantt(Path(tmp, "gantt.png"), cell, layout, res) if a.gantt
                      else (None, None))
        snaps = {} if shots is None else {p.name: p.read_bytes()
                                          for p in sorted(shots.iterdir())}
    out = res.to_json()
    if gantt is not None:
        out["gantt"] = gantt
    script = None
    if a.script and res.timeline is not None:
        # lazy: CLI start-up time (every verb loads for --help; loads the twin)
        from cellspec.robots.script import script_text

        script = script_text(cell, res, Path(a.script).name)
    pretty = None
    if a.format != "json":
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            _print_pretty(res)
        pretty = buf.getvalue()
    return {"verdict": str(res.verdict), "reason": res.reason, "notes": list(res.notes),
            "json": out, "pretty": pretty, "script": script, "gantt_png": png,
            "snapshots": snaps,
            "plan": (json.dumps(res.plan_json(cell, layout), indent=1) + "\n"
                     if a.output else None),
            "trajectories": (json.dumps(res.execution.trajectories_json()) + "\n"
                             if a.trajectories and res.execution is not None else None)}


def _check_options(a: argparse.Namespace) -> None:
    """Bad options are bad input before the long run (exit 2)."""
    if a.time_limit is not None:
        check_seconds(a.time_limit, "--time-limit", MAX_SECONDS)
    check_seconds(a.solver_time_limit, "--solver-time-limit", MAX_SECONDS)
    check_seconds(a.motion_time_limit, "--motion-time-limit", MAX_SECONDS)
    if a.seed < 0:
        raise CellspecError("--seed must be 0 or more")
    for path, flag in ((a.output, "-o"), (a.script, "--script"),
                       (a.trajectories, "--trajectories"), (a.gantt, "--gantt")):
        if path:
            writable_file(path, flag)
    if a.snapshots:
        writable_dir(a.snapshots, "--snapshots")
    if a.faults is not None and not a.faults.strip(" ;\t"):
        raise CellspecError("--faults: no fault given (leave the option out for none)")


def _gantt(path: Path, cell: Cell, layout: Any, res: Any
           ) -> tuple[list[dict] | None, bytes | None]:
    """The schedule's bars (for the JSON) and its chart as PNG bytes, drawn into ``path``
    (a private file of the worker); no bytes when there is no schedule."""
    # lazy: CLI start-up time (every verb loads for --help; loads the charts, matplotlib)
    from cellspec.review.plots import draw_gantt, gantt_rows

    gantt = gantt_rows(cell, res)
    if not gantt:
        return gantt, None
    sched = res.schedule
    title = f"{cell.name}: {len(layout)} parts" + (
        f", makespan {sched.makespan:.2f} s" if sched and sched.makespan else "") + (
        f", speedup {sched.speedup:.2f}x" if sched and sched.speedup else "") + (
        f" ({gantt[0]['source']})")
    draw_gantt(gantt, path, title, [r.name for r in cell.robots])
    return gantt, path.read_bytes()


def _print_pretty(res: Any) -> None:
    """The pretty report of a simulation: one line per action, then the schedule."""
    for r in res.actions:
        d = f"  δ = {r.delta:.4f} rad" if r.delta is not None else ""
        if r.ok:
            print(f"{r.index + 1:4d}  {r.robot}  {r.part}  pass{d}")
        else:
            print(f"{r.index + 1:4d}  {r.robot or '-'}  {r.part}  FAIL {r.check}: {r.reason}")
    if res.schedule is not None and res.schedule.makespan is not None:
        s = res.schedule
        sp = f", speedup {s.speedup:.2f}x over the best single arm" if s.speedup else ""
        print(f"schedule ({s.status}): makespan {s.makespan:.2f} s{sp}")
    if res.concurrent and res.timeline is not None:
        print(f"executed concurrently: motions take {res.timeline.end:.2f} s "
              f"({res.sequential_end:.2f} s one after another)")
    one = res.single
    if one is not None:
        est = f"{one.speedup_estimated:.2f}x" if one.speedup_estimated else "-"
        if one.executed is not None and one.speedup_executed is not None:
            print(f"best single arm {one.arm} alone: motions take {one.executed:.2f} s "
                  f"(estimate {one.estimated:.2f} s); speedup executed "
                  f"{one.speedup_executed:.2f}x, estimated {est}")
        else:
            print(f"best single arm {one.arm} alone: {one.verdict} ({one.reason}); "
                  f"speedup estimated {est}, not executed")
    ex = res.execution
    if ex is not None:
        print(f"execution: δ = {ex.delta:.4f} rad (ε = {ex.epsilon:g}), {ex.duration:.1f} s "
              "simulated")
    print(f"sim: {res.verdict}" + (f" ({res.reason})" if res.reason else ""))
