"""The planning pass of ``cellspec sim``: per action, in sequence, the gripper and reach
checks, IK of every pose (collision-checked: a pose whose only solutions collide is a
``collision``) and RRT-Connect motions home → approach → grasp → lift → transport →
place → retreat → home.

Every action is planned even after a failure (the failed part is put at its place), so
the report names every failing action. Part of the pipeline in :mod:`cellspec.robots.sim`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cellspec.core import progress
from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots import motion
from cellspec.robots.allocation import grip_kind, ik_near, too_wide
from cellspec.robots.execute import Segment
from cellspec.robots.reports import ActionReport, SimResult
from cellspec.robots.tasks import PlaceAction, compile_action, part_shape, part_size, supply_for
from cellspec.solver.cpsat.results import Step

if TYPE_CHECKING:
    from cellspec.robots.twin import Twin

MOTION_TIME_LIMIT = 5.0


def classify(reason: str | None) -> str:
    """The check a failed IK belongs to: ``collision`` when the reason says so, else ``ik``."""
    return "collision" if reason and "collision" in reason.lower() else "ik"


def _p(v: Any) -> str:
    return f"({v[0]:.3f}, {v[1]:.3f}, {v[2]:.3f})"


def plan_all(twin: Twin, cell: Cell, layout: Layout, steps: tuple[Step, ...],
             alloc: dict[str, str | None], seed: int, mtl: float) -> SimResult:
    """Plan every action of the sequence on its allocated robot (``mtl``: the motion
    planner's time limit per motion); the result holds a report per action, and the
    compiled actions, joints and motions of those that pass."""
    idx = {pid: i for i, pid in enumerate(layout.ids)}
    homes = {r: twin.home(r) for r in twin.robot_names}
    for r, q in homes.items():
        twin.set_q(r, q)
    res = SimResult(Status.PASS, None, [], steps=steps,
                    homes={r: np.round(q, 9).tolist() for r, q in homes.items()})
    for k, s in enumerate(steps):
        progress.tick("plan motions", k, len(steps), f"action {k + 1}: {s.part}")
        _plan_one(twin, cell, layout, res, homes, k, s, idx[s.part], alloc.get(s.part),
                  seed, mtl)
    return res


def _plan_one(twin: Twin, cell: Cell, layout: Layout, res: SimResult,
              homes: dict[str, np.ndarray], k: int, s: Step, i: int, robot: str | None,
              seed: int, mtl: float) -> None:
    """Plan action k (part i on ``robot``) and add its report (and, when it passes, its
    action, joints and motions) to ``res``; the part is left at its place."""
    size = part_size(cell, layout, i)
    yaw, shape = part_shape(cell, layout, i)
    place = tuple(float(v) for v in layout.pos[i])

    def fail(check: str, why: str) -> None:
        res.actions.append(ActionReport(k, robot, s.part, False, check, why))
        twin.add_box(s.part, size, place, kind="part", yaw=yaw, shape=shape)

    a, refusal = _compile(twin, cell, layout, k, s, i, robot, size, place, seed)
    if a is None or robot is None:
        fail(*refusal)  # type: ignore[misc]
        return
    twin.add_box(s.part, size, a.pick, kind="part", yaw=yaw, shape=shape)
    key = f"part:{s.part}"
    qs, bad = _solve_poses(twin, robot, a, key, homes[robot], seed)
    twin.detach(robot)
    if bad is not None:
        twin.remove(key)
        fail(*bad)
        return
    twin.set_pose(key, a.pick)
    segs, failed = _plan_legs(twin, robot, k, s.part, key, qs, homes[robot], seed, mtl)
    twin.detach(robot)
    twin.set_q(robot, homes[robot])
    twin.set_pose(key, place)
    if failed is not None:
        res.actions.append(ActionReport(k, robot, s.part, False,
                                        classify(failed) if "collision" in failed
                                        else "motion", failed))
        return
    res.compiled.append(a)
    res.joints[k] = {n: np.round(q, 9).tolist() for n, q in qs.items()}
    res.segments.extend(segs)
    res.actions.append(ActionReport(k, robot, s.part, True))


def _compile(twin: Twin, cell: Cell, layout: Layout, k: int, s: Step, i: int,
             robot: str | None, size: tuple[float, float, float], place: tuple[float, ...],
             seed: int
             ) -> tuple[PlaceAction | None, tuple[str, str] | None]:
    """The compiled action, or the (check, why) that refuses it first: no robot with the
    gripper, jaws too narrow, no reachable supply, a pose beyond the robot's reach."""
    if robot is None:
        kind = grip_kind(cell, layout, i, s)
        return None, ("gripper", f"no robot has a {kind} gripper for {s.part}")
    wide = too_wide(twin, robot, size, s.axis)
    if wide is not None:
        return None, ("gripper", wide)
    yaw, shape = part_shape(cell, layout, i)
    z, why = supply_for(twin, robot, size, s.axis, seed, yaw, shape)
    if z is None:
        return None, ("reach", f"{robot} reaches no supply area: {why}")
    a = compile_action(cell, k, robot, s.part, size, place, s.axis, z, yaw, shape)
    rob = next(r for r in cell.robots if r.name == robot)
    if rob.reach is not None:
        base = np.array([float(v) for v in rob.base])
        far = [p for p in a.poses
               if np.linalg.norm(np.array(p.pos) - base) > float(rob.reach)]
        if far:
            d = float(np.linalg.norm(np.array(far[0].pos) - base))
            return None, ("reach", f"{far[0].name} pose {_p(far[0].pos)} is {d:.3f} m from "
                          f"{robot}'s base, beyond its reach {float(rob.reach):g} m")
    return a, None


def _solve_poses(twin: Twin, robot: str, a: PlaceAction, key: str, home: np.ndarray, seed: int
                 ) -> tuple[dict[str, np.ndarray], tuple[str, str] | None]:
    """IK of every pose in turn, each seeded from the previous (the part attached from the
    lift to the retreat); (joints per pose, None) or (so far, (check, why))."""
    qs: dict[str, np.ndarray] = {}
    prev = home
    for pose in a.poses:
        if pose.name == "release":
            qs["release"] = qs["place"]
            continue
        if pose.name == "lift":
            twin.set_q(robot, qs["grasp"])
            twin.attach(robot, key)
        if pose.name == "retreat":
            twin.set_q(robot, qs["place"])
            twin.detach(robot)
        ign = (key,) if pose.name in ("grasp", "retreat") else ()
        r = ik_near(twin, robot, pose.pos, pose.quat, prev, seed=seed, ignore=ign,
                    vacuum=a.yaw_free)
        if not r.ok or r.q is None:  # an ok answer has its q
            return qs, (classify(r.reason), f"{pose.name} pose {_p(pose.pos)}: {r.reason}")
        qs[pose.name] = r.q
        prev = r.q
    return qs, None


def _plan_legs(twin: Twin, robot: str, k: int, part: str, key: str,
               qs: dict[str, np.ndarray], home: np.ndarray, seed: int, mtl: float
               ) -> tuple[list[Segment], str | None]:
    """The RRT-Connect motions of the action's legs; (segments, None) or (so far, why)."""
    legs = [("approach", home, qs["approach"], (), False, False),
            ("grasp", qs["approach"], qs["grasp"], (key,), True, False),
            ("lift", qs["grasp"], qs["lift"], (key,), False, False),
            ("transport", qs["lift"], qs["transport"], (), False, False),
            ("place", qs["transport"], qs["place"], (), False, True),
            ("retreat", qs["place"], qs["retreat"], (key,), False, False),
            ("home", qs["retreat"], home, (), False, False)]
    segs: list[Segment] = []
    for n, (name, qa, qb, ign, grasp, release) in enumerate(legs):
        if name == "lift":
            twin.set_q(robot, qs["grasp"])
            twin.attach(robot, key)
        if name == "retreat":
            twin.set_q(robot, qs["place"])
            twin.detach(robot)
        m = motion.plan_motion(twin, {robot: qa}, {robot: qb}, seed=seed + 101 * k + n,
                               time_limit=mtl, ignore=frozenset(ign))
        if not m.ok:
            return segs, f"motion {name}: {m.reason}"
        segs.append(Segment(k, robot, part, name, tuple(x[robot] for x in m.path[1:]),
                            grasp=grasp, release=release))
    return segs, None
