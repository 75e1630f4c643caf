"""Execute a checked RoCo plan in the twin: joint-space motion per sub-step, then the new state.

RoCo executes a plan that passed its checks with its multi-arm RRT-Connect
(``rocobench/rrt_multi_arm.py``) and MuJoCo physics. Here every sub-step is a joint motion
of all arms together, from their current joints to the sub-step's IK solutions
(``RocoResult.qs``), planned by cellspec's RRT-Connect (``motion.plan_motion``) with cube
contacts allowed as in RoCo's Sort task. A cube is grasped at a pick sub-step and released at
a place sub-step, landing on whatever lies below the release point (a panel, the table or a
cube's top): kinematic, not a physics settle. Environment steps are the densified joint
waypoints (0.05 rad apart), RoCo's "env steps" counterpart. An arm that released a cube
returns home afterwards (RoCo's ``return_home`` on the place sub-step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cellspec.robots.roco_check import RocoChecker, RocoResult
from cellspec.robots.roco_task import TOP_SITE, SortState

MOTION_TIME = 3.0  # seconds per sub-step motion
STEP = 0.05  # rad between environment steps


@dataclass(frozen=True)
class Executed:
    """The outcome of executing one plan: ok, the new state, the steps, why not."""

    ok: bool
    state: SortState
    env_steps: int
    reason: str = ""


def _landing(ch: RocoChecker, state: SortState, obj: str, pos) -> tuple[float, float, float]:
    """Where a cube released above ``pos`` comes to rest (highest support below it)."""
    task = ch.task
    s = task.size(obj)
    top = max((float(x.z) for x in ch.cell.surfaces), default=0.0)
    for p in task.panels.values():
        if (abs(pos[0] - float(p.pos[0])) <= float(p.size[0]) / 2
                and abs(pos[1] - float(p.pos[1])) <= float(p.size[1]) / 2):
            top = max(top, float(p.pos[2]) + float(p.size[2]) / 2)
    for o, c in state.centres.items():
        if o == obj or o in state.holding.values():
            continue
        so = task.size(o)
        if abs(pos[0] - c[0]) < (s[0] + so[0]) / 2 and abs(pos[1] - c[1]) < (s[1] + so[1]) / 2:
            top = max(top, c[2] + so[2] / 2)
    return (float(pos[0]), float(pos[1]), top + s[2] / 2)


def execute_plan(ch: RocoChecker, state: SortState, result: RocoResult,
                 seed: int = 0) -> Executed:
    """Move the arms through the plan's sub-steps in the checker's twin; the new state."""
    # lazy: the twin extra (pybullet), through cellspec.robots
    from cellspec.robots.motion import densify, plan_motion

    if not result.ok:
        raise ValueError("only a plan that passed its checks is executed")
    q = {a: np.array(v) for a, v in state.q.items()}
    st = state
    steps = 0
    ignore = frozenset(ch.task.objects) | frozenset(f"part:{o}" for o in ch.task.objects)
    for i, (step, goal) in enumerate(zip(result.parsed.steps, result.qs, strict=True)):
        ch._place_objects(st)
        tgt = {a: np.array(goal[a]) for a in q}
        m = plan_motion(ch.twin, q, tgt, seed=seed + i, time_limit=MOTION_TIME,
                        checker=ch.checker, ignore=ignore)
        if not m.ok:
            return Executed(False, st, steps, f"sub-step {i + 1}: no collision-free motion "
                            f"({m.reason})")
        steps += len(densify(list(m.path), STEP)) - 1
        q = tgt
        holding = dict(st.holding)
        centres = dict(st.centres)
        for a, t in step.items():
            if t.grasp and t.grasp[1] == 1:
                holding[a] = t.grasp[0]
            elif t.grasp and t.grasp[1] == 0 and holding.get(a) == t.grasp[0]:
                holding[a] = None
                centres[t.grasp[0]] = _landing(ch, st.with_(holding=holding), t.grasp[0], t.pos)
        for a, obj in holding.items():  # a held cube hangs below the gripper (its top site)
            if obj:
                centres[obj] = (step[a].pos[0], step[a].pos[1], step[a].pos[2] - TOP_SITE)
        st = _state(ch, centres, holding, q)
    # RoCo's place sub-step has return_home=True: an arm that released a cube goes home
    back = {a for step in result.parsed.steps for a, t in step.items()
            if t.grasp and t.grasp[1] == 0}
    if back:
        ch._place_objects(st)
        tgt = {a: (ch.twin.home(a) if a in back else q[a]) for a in q}
        m = plan_motion(ch.twin, q, tgt, seed=seed + 97, time_limit=MOTION_TIME,
                        checker=ch.checker, ignore=ignore)
        if not m.ok:
            return Executed(False, st, steps, f"return home: no collision-free motion "
                            f"({m.reason})")
        steps += len(densify(list(m.path), STEP)) - 1
        st = _state(ch, dict(st.centres), dict(st.holding), tgt)
    return Executed(True, st, steps)


def _state(ch: RocoChecker, centres, holding, q) -> SortState:
    ee = {a: tuple(float(v) for v in ch.twin.tool_pose(a, q[a])[0]) for a in q}
    return SortState(centres=centres, holding=holding, ee=ee,  # type: ignore[arg-type]
                     q={a: tuple(float(v) for v in q[a]) for a in q})
