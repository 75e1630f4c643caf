"""Which arm does what: the robots that can grip a part (gripper kind, jaw opening), the
IK seeded from the previous pose, the precedences between placements, the shared zone,
and CP-SAT's allocation and schedule when several arms can do a job.

Used by the planning pass (:mod:`cellspec.robots.planning`) and the concurrent dispatch
(:mod:`cellspec.robots.concurrency`) of the ``cellspec sim`` pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from cellspec.core.status import Status
from cellspec.dsl.model import Cell, Robot
from cellspec.layout import Layout
from cellspec.robots.execute import DWELL, SPEED
from cellspec.robots.ik import IKResult, joint_time, solve_ik
from cellspec.robots.tasks import compile_action, part_shape, part_size, supply_for
from cellspec.solver.cpsat.results import Step
from cellspec.solver.cpsat.schedule import ArmTimes, Job, ScheduleResult, schedule
from cellspec.solver.cpsat.sequence import order_problem
from cellspec.solver.instance import build_instance

if TYPE_CHECKING:
    from cellspec.robots.twin import Twin

SEED = 0
IK_TRIES = 4  # IK seeds tried when the solution nearest the previous pose does not converge


def grip_kind(cell: Cell, layout: Layout, i: int, step: Step) -> str:
    """The gripper kind part i needs: the plan's, the layout's, else the cell's default."""
    return step.gripper or layout.grippers[i] or cell.default_gripper.kind


def precedences(cell: Cell, layout: Layout, steps: tuple[Step, ...]) -> list[tuple[str, str]]:
    """Pairs (a, b): a must be placed before b (support, contact, grip access by the axis)."""
    op = order_problem(build_instance(cell, layout))
    ids = layout.ids
    pos = {s.part: k for k, s in enumerate(steps)}
    out = set()
    for a in range(op.n):
        for b in op.succ[a]:
            out.add((ids[a], ids[b]))
        st = steps[pos[ids[a]]]
        if st.axis is not None:
            for b in op.block[a][0 if st.axis == "x" else 1]:
                out.add((ids[a], ids[b]))
    return sorted(p for p in out if pos[p[0]] < pos[p[1]])


def in_zone(cell: Cell, pt: Sequence[float]) -> bool:
    """The point lies in the shared zone (everywhere when the cell declares none)."""
    z = cell.twin.shared_zone
    if z is None:
        return True  # no shared zone declared: the whole cell is shared
    return all(float(z.lo[d]) <= pt[d] <= float(z.hi[d]) for d in range(3))


def plan_joint_time(a: np.ndarray, b: np.ndarray, vel: np.ndarray) -> float:
    """``ik.joint_time`` at the plan's SPEED of the velocity limits."""
    return joint_time(a, b, vel * SPEED)


def ik_near(twin: Twin, robot: str, pos: Sequence[float], quat: Sequence[float],
            prev: np.ndarray, *, seed: int, ignore: tuple[str, ...] = (),
            vacuum: bool = False) -> IKResult:
    """IK seeded from the previous pose; when that attempt fails, the solution nearest to
    it (in time at the velocity limits) among ``IK_TRIES`` seeded restarts."""
    v = twin.spec(robot).vel_limits
    best: IKResult | None = None
    best_t = math.inf
    for j in range(IK_TRIES):
        r = solve_ik(twin, robot, pos, quat, seed=seed + 7919 * j, q_init=prev, ignore=ignore,
                     yaw_free=vacuum)
        if not r.ok or r.q is None:  # an ok answer has its q
            return best or r
        t = plan_joint_time(prev, r.q, v)
        if np.allclose(r.q, prev, atol=1e-12) or t < 0.5:
            return r
        if best is None or t < best_t:
            best, best_t = r, t
    assert best is not None  # IK_TRIES > 0: each try returns or keeps its ok answer
    return best


def too_wide(twin: Twin, robot: str, size: Sequence[float], axis: str | None) -> str | None:
    """Why the robot's parallel jaws cannot close on the part (its width across the jaws,
    along the grip axis, exceeds the opening), or None (it fits, or a vacuum cup). The
    twin's fingers are kinematic and the grasped part is exempt from collision checks at
    the grasp, so without this a part wider than the jaws would pass."""
    g = twin.robot(robot).gripper
    if g.kind != "parallel":
        return None
    ax = axis or "x"  # no axis: a top grasp with the jaws along x (``grasp_quat``)
    w = float(size[0] if ax == "x" else size[1])
    if w <= g.opening + 1e-9:
        return None
    return (f"the part is {w:.3f} m wide along {ax}, the grip axis: wider than {robot}'s "
            f"jaw opening {g.opening:g} m")


def _candidates(twin: Twin, cell: Cell, layout: Layout, steps: tuple[Step, ...],
                use: list[Robot]) -> dict[str, list[str]]:
    """Per part the robots that may place it (gripper kind; jaws wide enough, when any)."""
    idx = {pid: i for i, pid in enumerate(layout.ids)}
    cands: dict[str, list[str]] = {}
    for s in steps:
        kind = grip_kind(cell, layout, idx[s.part], s)
        # a vacuum cup places any part (support order leaves its top free when it is
        # placed); parallel jaws need the part planned for them (the sequencer's axis)
        c = [r.name for r in use if r.gripper.kind == kind or r.gripper.kind == "vacuum"]
        size = part_size(cell, layout, idx[s.part])
        fit = [r for r in c if too_wide(twin, r, size, s.axis) is None]
        cands[s.part] = fit or c  # none fits: keep them, the planning pass says why
    return cands


def _arm_times(twin: Twin, cell: Cell, layout: Layout, s: Step, r: str) -> ArmTimes | None:
    """Robot r's pick and place times for the step (IK of every pose from home, at the
    plan's speed), or None when it reaches no supply or some pose has no IK."""
    i = layout.ids.index(s.part)
    size = part_size(cell, layout, i)
    yaw, shape = part_shape(cell, layout, i)
    z, _ = supply_for(twin, r, size, s.axis, 0, yaw, shape)
    if z is None:
        return None
    a = compile_action(cell, 0, r, s.part, size, layout.pos[i], s.axis, z, yaw, shape)
    spec = twin.spec(r)
    q = twin.home(r)
    qs = [q]
    for pose in a.poses:
        ign = (f"part:{s.part}",) if pose.name in ("grasp", "retreat") else ()
        res = ik_near(twin, r, pose.pos, pose.quat, qs[-1], seed=SEED, ignore=ign,
                      vacuum=a.yaw_free)
        if not res.ok or res.q is None:  # an ok answer has its q
            return None
        qs.append(res.q)
    qs.append(q)
    v = spec.vel_limits
    pick = sum(plan_joint_time(x, y, v) for x, y in zip(qs[:2], qs[1:3], strict=True)) + DWELL
    place = sum(plan_joint_time(x, y, v) for x, y in zip(qs[2:-1], qs[3:], strict=True)) + DWELL
    return ArmTimes(pick=pick, place=place, pick_shared=in_zone(cell, a.pick),
                    place_shared=in_zone(cell, a.place))


def allocate(twin: Twin, cell: Cell, layout: Layout, steps: tuple[Step, ...],
             time_limit: float = 10.0, arms: tuple[str, ...] | None = None
             ) -> tuple[dict[str, str | None], ScheduleResult | None]:
    """Each part's robot: the only candidate, or CP-SAT's allocation among several
    (``arms``: only these robots work; the others stay at home)."""
    use = [r for r in cell.robots if arms is None or r.name in arms]
    cands = _candidates(twin, cell, layout, steps, use)
    if all(len(c) <= 1 for c in cands.values()) and len(use) <= 1:
        return {p: (c[0] if c else None) for p, c in cands.items()}, None
    names = [r.name for r in use]
    for r in names:  # the same IK seeds as the planning pass
        twin.set_q(r, twin.home(r))
    jobs = []
    for s in steps:
        times: dict[str, ArmTimes] = {}
        for r in cands[s.part]:
            t = _arm_times(twin, cell, layout, s, r)
            if t is not None:
                times[r] = t
        jobs.append(Job(s.part, times))
    res = schedule(jobs, names, precedences(cell, layout, steps), time_limit=time_limit)
    if res.status not in (Status.OPTIMAL, Status.FEASIBLE):
        return {p: (c[0] if c else None) for p, c in cands.items()}, res
    return {s.part: res.arm_of(s.part) for s in steps}, res
