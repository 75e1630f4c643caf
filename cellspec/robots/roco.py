"""RoCo's multi-robot sub-task plans (seed 002): the text format and its ordered checks.

A plan file holds one line per robot, optionally after a line ``EXECUTE``::

    EXECUTE
    NAME Alice ACTION WAIT
    NAME Bob ACTION PICK yellow_trapezoid PLACE panel5 PATH [(-0.2, 0.5, 0.2), (0.2, 0.5, 0.2)]
    NAME Chad ACTION PICK blue_square PLACE panel5

Blank lines and ``#`` comments are ignored. Every robot of the cell has exactly one line.
Checks, in RoCo's order, each run only when the previous ones pass (seed 002, Section
3.2; the reach check comes from RoCo's code):

1. ``parse``: the format, known robots, one line each, a known action;
2. ``task``: PICK comes with PLACE, the object and panel exist, an object goes only to its
   own goal panel or to a panel that is nobody's goal, no object is picked twice, and not
   every robot waits (RoCo's Sort Cubes feedback);
3. ``reach``: every pick and place pose lies in the robot's reach box (``reachable``),
   else within its ``reach`` radius;
4. ``ik``: every pose has a joint solution (damped least squares, ``ik.solve_ik``);
5. ``collision``: all arms together at their pick poses, then at their place poses, are
   collision-free (the objects being carried are ignored);
6. ``waypoints``: every ``PATH`` point (the i-th points of all arms together) passes
   reach, IK and collision; at most ``max_failed_waypoints`` may fail (RoCo's code: 1);
7. ``spacing``: per arm, the standard deviation of the step lengths along pick, PATH,
   place stays under ``spacing_std`` metres (RoCo: a per-task threshold).

The first failure returns feedback text naming the robot, the object and the pose: what
an LLM planner needs to try again.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cellspec.dsl.errors import CellspecError, Diagnostic
from cellspec.dsl.model import Box, Cell
from cellspec.dsl.twin import PLAN_CHECKS
from cellspec.robots.tasks import grasp_orientation, tcp_for

MAX_FAILED_WAYPOINTS = 1
SPACING_STD = 0.1
MAX_PLAN_BYTES = 1 << 20
MAX_PATH_POINTS = 200  # per robot: each point is an IK and collision check

_LINE = re.compile(r"NAME\s+(?P<robot>\S+)\s+ACTION\b\s*(?P<action>.*)$")
_ACTION = re.compile(
    r"^(?:(?P<wait>WAIT)|(?:PICK\s+(?P<obj>\S+))?\s*(?:PLACE\s+(?P<target>\S+))?)\s*"
    r"(?:PATH\s*(?P<path>\[.*\]))?\s*$")
_POINT = re.compile(r"\(\s*([^,()]+)\s*,\s*([^,()]+)\s*,\s*([^,()]+)\s*\)")
_P = r"\(\s*[^,()]+\s*,\s*[^,()]+\s*,\s*[^,()]+\s*\)"
_POINTS = re.compile(rf"(?:{_P}(?:\s*,\s*{_P})*)?\s*,?")  # one comma between points
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)",
                     re.ASCII | re.IGNORECASE)  # plain decimals (not 1_0 or other digits)


@dataclass(frozen=True)
class RocoAction:
    """One robot's sub-task: ``WAIT``, or PICK an object and PLACE it on a panel."""

    robot: str
    wait: bool
    obj: str | None
    target: str | None
    path: tuple[tuple[float, float, float], ...]
    line: int
    text: str

    def to_text(self) -> str:
        """The action in RoCo's syntax."""
        if self.wait:
            body = "WAIT"
        else:
            body = " ".join(x for x in (f"PICK {self.obj}" if self.obj else "",
                                        f"PLACE {self.target}" if self.target else "") if x)
        if self.path:
            body += " PATH [" + ", ".join(f"({x:g}, {y:g}, {z:g})" for x, y, z in self.path) + "]"
        return f"NAME {self.robot} ACTION {body}"


@dataclass(frozen=True)
class RocoPlan:
    """A parsed plan: one action per robot, in the cell's robot order."""

    path: str
    actions: tuple[RocoAction, ...]

    def action(self, robot: str) -> RocoAction:
        """The action of one robot."""
        return next(a for a in self.actions if a.robot == robot)


@dataclass(frozen=True)
class PlanCheck:
    """The outcome of RoCo's ordered checks: pass, or the first failed check with feedback."""

    ok: bool
    check: str | None = None  # the failed check (PLAN_CHECKS) or None
    robot: str | None = None
    obj: str | None = None
    pose: tuple[float, float, float] | None = None
    feedback: str = ""
    passed: tuple[str, ...] = ()
    failed_waypoints: int = 0
    skipped: tuple[str, ...] = ()  # checks that did not apply (no PATH): neither passed nor failed
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.ok == (self.check is None), "a failed plan names its check"
        assert self.check is None or self.check in PLAN_CHECKS

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data."""
        return {"verdict": "pass" if self.ok else "fail", "check": self.check,
                "robot": self.robot, "object": self.obj,
                "pose": [round(v, 4) for v in self.pose] if self.pose else None,
                "feedback": self.feedback, "passed": list(self.passed),
                "skipped": list(self.skipped), "failed_waypoints": self.failed_waypoints}


# -- parsing -----------------------------------------------------------------------------
def parse_plan(text: str, path: str, cell: Cell) -> RocoPlan:
    """Parse RoCo's plan text; every problem is a diagnostic with file:line:col."""
    robots = [r.name for r in cell.robots]
    diags: list[Diagnostic] = []
    lines = text.splitlines()
    start = 0
    for k, raw in enumerate(lines):
        if raw.strip() == "EXECUTE":
            start = k + 1
            break
    seen: dict[str, RocoAction] = {}
    for k in range(start, len(lines)):
        raw = lines[k]
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        col = len(raw) - len(raw.lstrip()) + 1
        m = _LINE.match(s)
        if m is None:
            diags.append(Diagnostic(path, k + 1, col, "expected `NAME ROBOT ACTION ...` "
                                    f"(got {s[:40]!r})"))
            continue
        robot = m.group("robot")
        acol = col + m.start("action")
        if robot not in robots:
            diags.append(Diagnostic(path, k + 1, col + m.start("robot"),
                                    f"unknown robot '{robot}' (robots: {', '.join(robots)})"))
            continue
        if robot in seen:
            diags.append(Diagnostic(path, k + 1, col, f"robot {robot} has a second action "
                                    f"(first on line {seen[robot].line}); give exactly one"))
            continue
        a = _ACTION.match(m.group("action").strip())
        body = m.group("action").strip()
        if not body:
            diags.append(Diagnostic(path, k + 1, col + m.end("robot") + 1, f"{robot}: missing "
                                    "action after ACTION (WAIT or PICK OBJECT PLACE PANEL)"))
            continue
        pm = re.search(r"\bPATH\b", body)
        if a is None and pm is not None:
            diags.append(Diagnostic(path, k + 1, acol + pm.start(), f"{robot}: PATH must be "
                                    "one bracketed list `[(x, y, z), ...]` at the end of the "
                                    "line (is a `]` or `)` missing?)"))
            continue
        if a is None or not body or (not a.group("wait") and not a.group("obj")
                                     and not a.group("target")):
            diags.append(Diagnostic(path, k + 1, acol, f"{robot}: unknown action {body[:40]!r} "
                                    "(expected WAIT or PICK OBJECT PLACE PANEL [PATH [...]])"))
            continue
        if a.group("wait") and a.group("path"):
            diags.append(Diagnostic(path, k + 1, acol + a.start("path"), f"{robot}: WAIT takes "
                                    "no PATH (a PATH belongs to PICK ... PLACE ...)"))
            continue
        pts: list[tuple[float, float, float]] = []
        if a.group("path"):
            inner = a.group("path")[1:-1].strip()
            pcol = acol + a.start("path")
            if not _POINTS.fullmatch(inner):
                bad = _POINT.sub("", inner).replace(",", "").strip()
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH must be a list of "
                                        "(x, y, z) points separated by commas"
                                        + ("" if bad else " (one comma between two points)")))
                continue
            if not all(_NUMBER.fullmatch(v.strip()) for pt in _POINT.findall(inner)
                       for v in pt):
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH points must be "
                                        "numbers"))
                continue
            try:
                pts = [tuple(float(v) for v in p) for p in _POINT.findall(inner)]  # type: ignore
            except ValueError:
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH points must be "
                                        "numbers"))
                continue
            if not all(math.isfinite(v) and abs(v) < 100 for p in pts for v in p):
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH points must be "
                                        "finite numbers within 100 m of the origin (metres)"))
                continue
            if len(pts) > MAX_PATH_POINTS:
                diags.append(Diagnostic(path, k + 1, pcol, f"{robot}: PATH has {len(pts)} "
                                        f"points; at most {MAX_PATH_POINTS}"))
                continue
        seen[robot] = RocoAction(robot=robot, wait=bool(a.group("wait")), obj=a.group("obj"),
                                 target=a.group("target"), path=tuple(pts), line=k + 1, text=s)
    missing = [r for r in robots if r not in seen]
    if missing and not diags:
        where = len(lines) if lines else 1
        diags.append(Diagnostic(path, max(where, 1), 1, "missing action for robot(s) "
                                f"{', '.join(missing)}: every robot needs one `NAME ROBOT ACTION "
                                "...` line"))
    if diags:
        raise CellspecError(diags)
    return RocoPlan(path=path, actions=tuple(seen[r] for r in robots))


def load_plan(path: str | Path, cell: Cell) -> RocoPlan:
    """Read and parse a plan file (exit-2 errors for unreadable files)."""
    from cellspec.dsl.parser import display_path

    p = Path(path)
    shown = display_path(p)
    from cellspec.core.io import TooLarge, read_text_bounded

    try:
        text = read_text_bounded(p, MAX_PLAN_BYTES)
    except TooLarge:
        raise CellspecError(Diagnostic(shown, 0, 0, f"plan file too large (more than "
                                       f"{MAX_PLAN_BYTES} bytes)")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CellspecError(Diagnostic(shown, 0, 0, f"cannot read plan: {exc}")) from None
    return parse_plan(text, shown, cell)


# -- geometry of the task ------------------------------------------------------------------
def _f3(v) -> tuple[float, float, float]:
    return (float(v[0]), float(v[1]), float(v[2]))


def object_size(cell: Cell, name: str) -> tuple[float, float, float]:
    """The size of a twin object (its part type's), metres."""
    obj = next(o for o in cell.twin.objects if o.name == name)
    return _f3(cell.part_types[obj.type].size)


def rest_pos(cell: Cell, obj: str, panel: str) -> tuple[float, float, float]:
    """Where an object's centre is when it rests on a panel."""
    p = cell.twin.panels[panel]
    s = object_size(cell, obj)
    return (float(p.pos[0]), float(p.pos[1]), float(p.pos[2] + p.size[2] / 2) + s[2] / 2)


def grasp_point(cell: Cell, robot: str, obj: str, centre) -> np.ndarray:
    """The TCP position that grasps an object with its centre at ``centre`` from above."""
    return tcp_for(cell, robot, centre, object_size(cell, obj))


def grasp_quat_for(cell: Cell, robot: str) -> np.ndarray:
    """Tool pointing down; parallel jaws closing along world x."""
    return grasp_orientation(cell, robot, None)


def in_reach(cell: Cell, robot: str, pos) -> tuple[bool, str]:
    """RoCo's reach check: the reach box if the cell declares one, else the reach radius."""
    box = cell.twin.reach_boxes.get(robot)
    if box is not None:
        ok = all(float(box.lo[d]) <= pos[d] <= float(box.hi[d]) for d in range(3))
        return ok, f"{robot} reaches {_box_text(box)}"
    r = next(x for x in cell.robots if x.name == robot)
    if r.reach is not None:
        d = float(np.linalg.norm(np.asarray(pos) - np.array(_f3(r.base))))
        return d <= float(r.reach), f"{robot} reaches {float(r.reach):g} m from its base " \
            f"(this is {d:.3f} m)"
    return True, ""


def _box_text(b: Box) -> str:
    return " ".join(f"{a} [{float(b.lo[d]):.2f}, {float(b.hi[d]):.2f}]"
                    for d, a in enumerate("xyz"))


def _p(v) -> str:
    return f"({v[0]:.3f}, {v[1]:.3f}, {v[2]:.3f})"


# -- checks --------------------------------------------------------------------------------
def _task(cell: Cell, plan: RocoPlan) -> PlanCheck | None:
    objs = {o.name: o for o in cell.twin.objects}
    goals = {o.goal for o in cell.twin.objects}
    picked: dict[str, str] = {}
    for a in plan.actions:
        if a.wait:
            continue
        if not a.obj or not a.target:
            return PlanCheck(False, "task", a.robot, a.obj, feedback=f"{a.robot}'s ACTION must "
                             "contain both PICK and PLACE")
        if a.obj not in objs:
            return PlanCheck(False, "task", a.robot, a.obj, feedback=f"{a.robot}'s ACTION is not "
                             f"valid: there is no object {a.obj} (objects: "
                             f"{', '.join(objs) or 'none: the cell declares no `object`'})")
        if a.target not in cell.twin.panels:
            return PlanCheck(False, "task", a.robot, a.obj, feedback=f"{a.robot}'s ACTION is not "
                             f"valid: there is no panel {a.target} (panels: "
                             f"{', '.join(cell.twin.panels)})")
        if a.obj in picked:
            return PlanCheck(False, "task", a.robot, a.obj, feedback=f"{a.robot} and "
                             f"{picked[a.obj]} both PICK {a.obj}; only one robot can")
        picked[a.obj] = a.robot
        o = objs[a.obj]
        if a.target in goals and a.target != o.goal:
            valid = [o.goal] + [p for p in cell.twin.panels if p not in goals]
            return PlanCheck(False, "task", a.robot, a.obj, feedback=f"{a.robot}'s ACTION is not "
                             f"valid, {a.obj} cube can only be placed on {', '.join(valid)}, but "
                             f"not on {a.target}")
    if all(a.wait for a in plan.actions):
        return PlanCheck(False, "task", feedback="You can't all WAIT. The task is not complete, "
                         "at least one robot should be acting.")
    return None


@dataclass
class _Pose:
    robot: str
    obj: str | None
    what: str  # "PICK blue_square" / "PLACE blue_square on panel3" / "PATH point 2"
    pos: np.ndarray
    quat: np.ndarray


def _goal_sets(cell: Cell, plan: RocoPlan) -> list[tuple[str, list[_Pose]]]:
    objs = {o.name: o for o in cell.twin.objects}
    pick, place = [], []
    for a in plan.actions:
        if a.wait:
            continue
        q = grasp_quat_for(cell, a.robot)
        src = rest_pos(cell, a.obj, objs[a.obj].panel)  # type: ignore[index]
        dst = rest_pos(cell, a.obj, a.target)  # type: ignore[arg-type]
        pick.append(_Pose(a.robot, a.obj, f"PICK {a.obj} on {objs[a.obj].panel}",  # type: ignore
                          grasp_point(cell, a.robot, a.obj, src), q))  # type: ignore[arg-type]
        place.append(_Pose(a.robot, a.obj, f"PLACE {a.obj} on {a.target}",
                           grasp_point(cell, a.robot, a.obj, dst), q))  # type: ignore[arg-type]
    return [("pick", pick), ("place", place)]


class _Scene:
    """The twin with the plan's objects on their panels."""

    def __init__(self, cell: Cell, seed: int) -> None:
        from cellspec.robots.collision import CollisionChecker
        from cellspec.robots.twin import Twin

        self.cell = cell
        self.seed = seed
        self.twin = Twin(cell, None)
        try:  # an error while building disconnects the twin's client (no leak)
            for o in cell.twin.objects:
                self.twin.add_box(o.name, object_size(cell, o.name),
                                  rest_pos(cell, o.name, o.panel), kind="part")
            self.checker = CollisionChecker(self.twin)
        except BaseException:
            self.twin.close()
            raise

    def close(self) -> None:
        self.twin.close()

    def check_set(self, plan: RocoPlan, poses: list[_Pose], phase: str
                  ) -> tuple[str, _Pose | None, str]:
        """Reach, IK, collision of one set of targets: ('', None, '') when all pass."""
        from cellspec.robots.ik import solve_ik

        for p in poses:
            ok, why = in_reach(self.cell, p.robot, p.pos)
            if not ok:
                return "reach", p, f"{p.robot}'s {p.what} target {_p(p.pos)} is out of reach: {why}"
        q: dict[str, np.ndarray] = {r: self.twin.home(r) for r in self.twin.robot_names}
        carried = frozenset(f"part:{a.obj}" for a in plan.actions if a.obj)
        for p in poses:
            vac = next(x for x in self.cell.robots if x.name == p.robot).gripper.kind == "vacuum"
            r = solve_ik(self.twin, p.robot, p.pos, p.quat, seed=self.seed,
                         check_collision=False, yaw_free=vac)
            if not r.ok or r.q is None:
                return "ik", p, (f"IK failed for {p.robot}'s {p.what} at {_p(p.pos)}: "
                                 f"{r.reason or 'no joint solution'} (position error "
                                 f"{r.pos_err:.3f} m)")
            q[p.robot] = r.q
        if phase == "place":  # carried objects sit where they are released
            for a in plan.actions:
                if a.obj and a.target:
                    self.twin.set_pose(a.obj, rest_pos(self.cell, a.obj, a.target))
        try:
            contacts = self.checker.contacts(q, ignore=carried)
        finally:
            if phase == "place":
                for o in self.cell.twin.objects:
                    self.twin.set_pose(o.name, rest_pos(self.cell, o.name, o.panel))
        if contacts:
            c = contacts[0]
            who = next((p for p in poses if c.a.startswith(p.robot + "/")
                        or c.b.startswith(p.robot + "/")), poses[0] if poses else None)
            return "collision", who, (f"Collision: with {who.robot} at {_p(who.pos)} for "
                                      f"{who.what}, {c.a} hits {c.b} (distance "
                                      f"{c.distance:.3f} m)" if who else
                                      f"Collision: {c.a} hits {c.b}")
        return "", None, ""


def check_plan(cell: Cell, plan: RocoPlan, *, max_failed_waypoints: int = MAX_FAILED_WAYPOINTS,
               spacing_std: float = SPACING_STD, seed: int = 0) -> PlanCheck:
    """Run RoCo's checks in order on a parsed plan; the first failure gives the feedback."""
    passed = ["parse"]
    bad = _task(cell, plan)
    if bad is not None:
        return PlanCheck(False, bad.check, bad.robot, bad.obj, bad.pose, bad.feedback,
                         tuple(passed))
    passed.append("task")
    scene = _Scene(cell, seed)
    try:
        for phase, poses in _goal_sets(cell, plan):
            check, who, text = scene.check_set(plan, poses, phase)
            if check:
                return PlanCheck(False, check, who.robot if who else None,
                                 who.obj if who else None,
                                 _f3(who.pos) if who else None, text,
                                 tuple(passed + [c for c in ("reach", "ik") if
                                                 PLAN_CHECKS.index(c) < PLAN_CHECKS.index(check)]))
        passed += ["reach", "ik", "collision"]
        # waypoints: the i-th PATH points of all robots together
        failed: list[str] = []
        first: _Pose | None = None
        n = max((len(a.path) for a in plan.actions), default=0)
        for i in range(n):
            poses = []
            for a in plan.actions:
                if i < len(a.path):
                    poses.append(_Pose(a.robot, a.obj, f"PATH point {i + 1} carrying {a.obj}",
                                       np.array(a.path[i]), grasp_quat_for(cell, a.robot)))
            check, who, text = scene.check_set(plan, poses, "path")
            if check:
                failed.append(f"{text} [{check}]")
                first = first or who
        if len(failed) > max_failed_waypoints:
            return PlanCheck(False, "waypoints", first.robot if first else None,
                             first.obj if first else None, _f3(first.pos) if first else None,
                             feedback=f"{len(failed)} PATH waypoint(s) "
                             f"failed (at most {max_failed_waypoints} allowed): "
                             + "; ".join(failed), passed=tuple(passed),
                             failed_waypoints=len(failed))
        skipped: list[str] = []
        (passed if n else skipped).append("waypoints")  # no PATH point: nothing was checked
        measured = 0
        for a in plan.actions:
            if not a.path or a.wait or not a.obj:  # only PICK ... PLACE ... carries a PATH
                continue
            ends = [[p for p in poses if p.robot == a.robot]
                    for _, poses in _goal_sets(cell, plan)]
            if any(len(e) != 1 for e in ends):
                continue
            (src,), (dst,) = ends
            measured += 1
            pts = np.array([src.pos] + [list(p) for p in a.path] + [dst.pos])
            steps = np.linalg.norm(np.diff(pts, axis=0), axis=1)
            std = float(np.std(steps))
            if std > spacing_std:
                k = int(np.argmax(np.abs(steps - steps.mean())))
                return PlanCheck(False, "spacing", a.robot, a.obj, _f3(pts[k + 1]),
                                 f"{a.robot}'s PATH for {a.obj} is unevenly spaced: step lengths "
                                 f"{', '.join(f'{s:.3f}' for s in steps)} m have a standard "
                                 f"deviation of {std:.3f} m (at most {spacing_std:g}); the step "
                                 f"to {_p(pts[k + 1])} is the odd one out",
                                 tuple(passed), len(failed), tuple(skipped))
        (passed if measured else skipped).append("spacing")
        return PlanCheck(True, passed=tuple(passed), failed_waypoints=len(failed),
                         skipped=tuple(skipped))
    finally:
        scene.close()


def check_plan_file(cell: Cell, path: str | Path, **kw: Any) -> PlanCheck:
    """Parse and check a plan file; a parse error is the failed ``parse`` check."""
    try:
        plan = load_plan(path, cell)
    except CellspecError as exc:
        return PlanCheck(False, "parse", feedback="; ".join(str(d) for d in exc.diagnostics))
    return check_plan(cell, plan, **kw)


def evaluate_plan_test(cell: Cell, test: Any) -> tuple[str, dict]:
    """A rule-file test ``plan "file" expect pass | fail CHECK(ROBOT, OBJECT)``."""
    r = check_plan_file(cell, test.plan_path)
    actual = ("pass",) if r.ok else (
        f"{r.check}({', '.join(x for x in (r.robot, r.obj) if x)})",)
    expected = tuple(f"{e.rule}({', '.join(e.parts)})" for e in test.expected) or (test.expect,)
    det = {"expected": expected, "actual": actual}
    if test.expect == "pass":
        return ("passed", det) if r.ok else ("failed", {**det, "message": f"expected pass; "
                                                         f"{r.check} failed: {r.feedback}"})
    if r.ok:
        return "failed", {**det, "message": "expected the plan to fail, it passes every check"}
    for e in test.expected:
        want = (e.rule,) + tuple(e.parts)
        got = (r.check,) + tuple(x for x in (r.robot, r.obj) if x)[:len(e.parts)]
        if want != got:
            return "failed", {**det, "missing": (expected[0],),
                              "message": f"expected {expected[0]} to fail first; got "
                              f"{actual[0]}: {r.feedback}"}
    return "passed", det
