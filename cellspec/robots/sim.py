"""The pipeline behind ``cellspec sim``: sequence → actions → checks → motions → execution.

0. The layout is verified against the cell's rules: one that fails them is not simulated
   (``fail``; ``unverified=True`` simulates it, but never with a ``pass``).
1. The sequence: the sequencer's plan (``cpsat.sequence.plan``: order and grip axes), or
   the steps of a given plan JSON.
2. The twin (``Twin``, no layout parts: parts appear at the supply one at a time and stay
   where they are placed); every part size must be reachable at some supply, else the cell
   is bad input.
3. Allocation: with one robot per gripper kind, the robot whose gripper the part needs;
   with several candidate arms, CP-SAT (``cpsat.schedule``) allocates and schedules the
   placements (per-arm IK feasibility, durations from the velocity limits, order
   precedences, the shared zone), and the speedup over the best single arm is reported.
4. Per action, in sequence: reach (the robot's ``reach``), IK of every pose (collision-
   checked; a pose whose only solutions collide is a ``collision``), then RRT-Connect
   motions home → approach → grasp → lift → transport → place → retreat → home.
5. Execution (``execute``) of every motion in a separate physics client with the faults;
   δ(Q_plan, Q_exec) ≤ ε per action, parts at their places, no blocked-region contact.
   Several arms run the schedule concurrently when the concurrent timeline is free of
   contacts between the arms, the parts they carry and the parts they have placed
   (``arm_clash``; clashes are resolved by making one action wait, ``dispatch``).
6. Optionally (``compare_single``) the best single arm is planned and executed alone, so the
   executed speedup can be reported next to CP-SAT's estimate.

Every action is checked even after a failure (the failed part is put at its place), so
the report names every failing action. The verdict is ``pass`` only when every action
passes; a motion planner time limit is reported with the reason ``time limit`` and, when
the only failures are time limits, makes the verdict ``unknown`` (never ``pass``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.execute import (
    DWELL,
    SPEED,
    Execution,
    Fault,
    Segment,
    Timeline,
    execute,
    time_parameterise,
)
from cellspec.robots.tasks import (
    Action,
    check_supplies,
    compile_action,
    part_size,
    supply_for,
)
from cellspec.solver.cpsat.results import Step

MOTION_TIME_LIMIT = 5.0
CLASH_ROUNDS = 6  # tries to resolve arm-arm contacts of a concurrent timeline
SEED = 0


@dataclass(frozen=True)
class ActionReport:
    """One action's outcome: pass, or the check that failed and why."""

    index: int
    robot: str | None
    part: str
    ok: bool
    check: str | None = None  # gripper | reach | ik | collision | motion | execution
    reason: str | None = None
    delta: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "robot": self.robot, "part": self.part,
                "result": "pass" if self.ok else "fail", "check": self.check,
                "reason": self.reason,
                "delta": None if self.delta is None else round(self.delta, 6)}


@dataclass(frozen=True)
class SingleArm:
    """The best single arm (by CP-SAT's estimate) planned and executed alone, to compare."""

    arm: str
    verdict: str
    estimated: float  # the arm's makespan estimate (s), CP-SAT's best single arm
    executed: float | None  # its executed motion time (s); None unless it passed
    speedup_estimated: float | None  # CP-SAT: best single estimate / multi-arm makespan
    speedup_executed: float | None  # executed: single-arm motion time / multi-arm one
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 3)

        out = {"arm": self.arm, "verdict": self.verdict, "estimated": r(self.estimated),
               "executed": r(self.executed), "speedup_estimated": r(self.speedup_estimated),
               "speedup_executed": r(self.speedup_executed)}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class SimResult:
    """The outcome of ``simulate``: verdict, per-action reports and what to write out."""

    verdict: str  # pass | fail | unknown
    reason: str | None
    actions: list[ActionReport]
    steps: tuple[Step, ...] = ()
    compiled: list[Action] = field(default_factory=list)
    joints: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    timeline: Timeline | None = None
    execution: Execution | None = None
    schedule: Any = None
    homes: dict[str, list[float]] = field(default_factory=dict)
    concurrent: bool = False  # the arms executed the schedule concurrently
    sequential_end: float | None = None  # the motions one after another, seconds
    notes: list[str] = field(default_factory=list)
    single: SingleArm | None = None  # the best single arm executed alone (compare_single)

    def to_json(self) -> dict[str, Any]:
        """The report (no samples) as plain JSON data."""
        out: dict[str, Any] = {"verdict": self.verdict,
                               "actions": [a.to_json() for a in self.actions]}
        if self.reason:
            out["reason"] = self.reason
        out["execution"] = self.execution.to_json() if self.execution else None
        if self.schedule is not None:
            out["schedule"] = self.schedule.to_json()
        out["concurrent"] = self.concurrent
        if self.timeline is not None:
            out["motion_time"] = {"executed": round(self.timeline.end, 3),
                                  "sequential": round(self.sequential_end or 0.0, 3)}
        if self.single is not None:
            out["single_arm"] = self.single.to_json()
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def plan_json(self, cell: Cell, layout: Layout) -> dict[str, Any]:
        """The plan: sequence, allocation, compiled actions with joints, motions, timing.

        Each action's ``start`` is its start time (s) on the executed timeline (None when
        nothing was executed): with it ``time_parameterise`` rebuilds that timeline, so a
        replay runs concurrently executed arms concurrently."""
        t0 = {w[0]: w[1] for w in self.timeline.windows} if self.timeline is not None else {}
        return {
            "cell": cell.path, "layout": layout.path, "verdict": self.verdict,
            "steps": [s.to_json() for s in self.steps],
            "homes": self.homes,
            "actions": [dict(a.to_json(), joints=self.joints.get(a.index, {}),
                             start=round(t0[a.index], 9) if a.index in t0 else None)
                        for a in self.compiled],
            "motions": [{"action": s.action, "robot": s.robot, "part": s.part, "kind": s.kind,
                         "grasp": s.grasp, "release": s.release,
                         "path": [np.round(q, 9).tolist() for q in s.path]}
                        for s in self.segments],
            "schedule": self.schedule.to_json() if self.schedule is not None else None,
            "concurrent": self.concurrent,
            "execution": self.execution.to_json() if self.execution else None,
        }


def _grip_kind(cell: Cell, layout: Layout, i: int, step: Step) -> str:
    return step.gripper or layout.grippers[i] or cell.default_gripper.kind


def _precedences(cell: Cell, layout: Layout, steps: tuple[Step, ...]) -> list[tuple[str, str]]:
    """Pairs (a, b): a must be placed before b (support, contact, grip access by the axis)."""
    from cellspec.solver.cpsat.sequence import order_problem
    from cellspec.solver.instance import build_instance

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


def _in_zone(cell: Cell, pt) -> bool:
    z = cell.twin.shared_zone
    if z is None:
        return True  # no shared zone declared: the whole cell is shared
    return all(float(z.lo[d]) <= pt[d] <= float(z.hi[d]) for d in range(3))


def _joint_time(a: np.ndarray, b: np.ndarray, vel: np.ndarray) -> float:
    """``ik.joint_time`` at the plan's SPEED of the velocity limits."""
    from cellspec.robots.ik import joint_time

    return joint_time(a, b, vel * SPEED)


IK_TRIES = 4  # IK seeds tried when the solution nearest the previous pose does not converge


def ik_near(twin: Any, robot: str, pos, quat, prev: np.ndarray, *, seed: int,
            ignore: tuple[str, ...] = (), vacuum: bool = False) -> Any:
    """IK seeded from the previous pose; when that attempt fails, the solution nearest to
    it (in time at the velocity limits) among ``IK_TRIES`` seeded restarts."""
    from cellspec.robots.ik import solve_ik

    v = twin.spec(robot).vel_limits
    best = None
    for j in range(IK_TRIES):
        r = solve_ik(twin, robot, pos, quat, seed=seed + 7919 * j, q_init=prev, ignore=ignore,
                     yaw_free=vacuum)
        if not r.ok:
            return best or r
        if np.allclose(r.q, prev, atol=1e-12) or _joint_time(prev, r.q, v) < 0.5:
            return r
        if best is None or _joint_time(prev, r.q, v) < _joint_time(prev, best.q, v):
            best = r
    return best


def allocate(twin: Any, cell: Cell, layout: Layout, steps: tuple[Step, ...],
             time_limit: float = 10.0, arms: tuple[str, ...] | None = None
             ) -> tuple[dict[str, str | None], Any]:
    """Each part's robot: the only candidate, or CP-SAT's allocation among several
    (``arms``: only these robots work; the others stay at home)."""
    from cellspec.solver.cpsat.schedule import ArmTimes, Job, schedule

    idx = {pid: i for i, pid in enumerate(layout.ids)}
    use = [r for r in cell.robots if arms is None or r.name in arms]
    cands: dict[str, list[str]] = {}
    for s in steps:
        kind = _grip_kind(cell, layout, idx[s.part], s)
        # a vacuum cup places any part (support order leaves its top free when it is
        # placed); parallel jaws need the part planned for them (the sequencer's axis)
        c = [r.name for r in use if r.gripper.kind == kind or r.gripper.kind == "vacuum"]
        size = part_size(cell, layout, idx[s.part])
        fit = [r for r in c if too_wide(twin, r, size, s.axis) is None]
        cands[s.part] = fit or c  # none fits: keep them, the planning pass says why
    if all(len(c) <= 1 for c in cands.values()) and len(use) <= 1:
        return {p: (c[0] if c else None) for p, c in cands.items()}, None
    arms = [r.name for r in use]
    for r in arms:  # the same IK seeds as the planning pass
        twin.set_q(r, twin.home(r))
    jobs = []
    for s in steps:
        i = idx[s.part]
        size = part_size(cell, layout, i)
        times: dict[str, ArmTimes] = {}
        for r in cands[s.part]:
            z, _ = supply_for(twin, r, size, s.axis)
            if z is None:
                continue
            a = compile_action(cell, 0, r, s.part, size, layout.pos[i], s.axis, z)
            spec = twin.spec(r)
            q = twin.home(r)
            qs = [q]
            ok = True
            for pose in a.poses:
                ign = (f"part:{s.part}",) if pose.name in ("grasp", "retreat") else ()
                res = ik_near(twin, r, pose.pos, pose.quat, qs[-1], seed=SEED, ignore=ign,
                              vacuum=a.gripper == "vacuum")
                if not res.ok:
                    ok = False
                    break
                qs.append(res.q)
            if not ok:
                continue
            qs.append(q)
            v = spec.vel_limits
            pick = sum(_joint_time(x, y, v) for x, y in zip(qs[:2], qs[1:3], strict=True)) + DWELL
            place = sum(_joint_time(x, y, v) for x, y in zip(qs[2:-1], qs[3:], strict=True)) + DWELL
            times[r] = ArmTimes(pick=pick, place=place, pick_shared=_in_zone(cell, a.pick),
                                place_shared=_in_zone(cell, a.place))
        jobs.append(Job(s.part, times))
    res = schedule(jobs, arms, _precedences(cell, layout, steps), time_limit=time_limit)
    if res.status not in ("optimal", "feasible"):
        return {p: (c[0] if c else None) for p, c in cands.items()}, res
    return {s.part: res.arm_of(s.part) for s in steps}, res


def simulate(cell: Cell, layout: Layout, *, steps: tuple[Step, ...] | None = None,
             faults: tuple[Fault, ...] = (), seed: int = SEED,
             motion_time_limit: float = MOTION_TIME_LIMIT, time_limit: float = 10.0,
             snapshots: str | None = None, arms: tuple[str, ...] | None = None,
             unverified: bool = False) -> SimResult:
    """Check, plan and execute every placement of the layout in the twin (``arms``: only
    these robots work, the others stay at home; default all).

    The layout is verified first (``cellspec.solver.verify.check``, the cell's rules): a
    layout that fails them is not simulated (verdict ``fail``, the violations named), one
    that cannot be verified within ``time_limit`` gives ``unknown``. ``unverified=True``
    simulates it anyway, but the verdict is then never ``pass``. A motion planner time limit
    is not a proof that no motion exists: when the only failures are time limits the
    verdict is ``unknown``."""
    if not cell.robots:
        s = cell.source
        raise CellspecError(Diagnostic(s.file, s.line, s.col, f"cell {cell.name} has no "
                                       "robots: nothing can place the parts"))
    if len(layout) == 0:
        raise CellspecError(Diagnostic(layout.path, 0, 0, "the layout has no parts: nothing "
                                       "to simulate"))
    if arms is not None:
        names = [r.name for r in cell.robots]
        bad = [a for a in arms if a not in names]
        if bad or not arms:
            raise CellspecError(f"arms: unknown robot {bad[0]!r} (robots: {', '.join(names)})"
                                if bad else "arms: name at least one robot")
    gate = _verify_gate(cell, layout, steps, time_limit)
    if gate is not None and not unverified:
        return SimResult(gate[0], gate[1] + "; not simulated (fix the layout, or simulate it "
                         "anyway with --unverified)", [])
    res = _simulate(cell, layout, steps=steps, faults=faults, seed=seed,
                    motion_time_limit=motion_time_limit, time_limit=time_limit,
                    snapshots=snapshots, arms=arms)
    if gate is not None and res.verdict == "pass":
        res.verdict, res.reason = gate[0], gate[1] + "; every action passes in the twin"
    elif gate is not None:
        res.notes.insert(0, gate[1])
    return res


def _verify_gate(cell: Cell, layout: Layout, steps: tuple[Step, ...] | None,
                 time_limit: float) -> tuple[str, str] | None:
    """None when the layout verifies (with the plan's order when steps are given, else its
    rules that need no order); else (verdict, why): fail with the violations, or unknown."""
    from cellspec.solver.verify import check

    if steps is not None:
        ids = sorted(layout.ids)
        got = sorted(s.part for s in steps)
        if got != ids:
            missing = sorted(set(ids) - set(got))
            extra = sorted(set(got) - set(ids))
            dup = sorted({p for p in got if got.count(p) > 1})
            why = "; ".join(x for x in (
                f"missing {', '.join(missing[:8])}" if missing else "",
                f"not in the layout: {', '.join(extra[:8])}" if extra else "",
                f"placed twice: {', '.join(dup[:8])}" if dup else "") if x)
            raise CellspecError(Diagnostic(layout.path, 0, 0, "the plan's steps must place "
                                           f"every part of the layout once ({why}): is the "
                                           "plan for another layout?"))
        lay = layout.with_order(tuple(s.part for s in steps))
    else:
        lay = layout.with_order(None)  # the sequencer chooses the order
    v = check(cell, lay, timeout=time_limit)
    if v.verdict == "unknown":
        return "unknown", f"the layout could not be verified: {v.reason}"
    if v.verdict == "fail":
        names = [f"{x.rule}({', '.join(x.parts)})" for x in v.violations]
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        what = "the layout with the plan's order" if steps is not None else "the layout"
        return "fail", f"{what} fails its rules: {', '.join(names[:6])}{more}"
    return None


def _simulate(cell: Cell, layout: Layout, *, steps: tuple[Step, ...] | None,
              faults: tuple[Fault, ...], seed: int, motion_time_limit: float,
              time_limit: float, snapshots: str | None,
              arms: tuple[str, ...] | None) -> SimResult:
    from cellspec.robots.twin import Twin

    if steps is None:
        from cellspec.solver.cpsat.sequence import plan

        pr = plan(cell, layout, time_limit=time_limit)
        if pr.status not in ("optimal", "feasible"):
            verdict = "fail" if pr.status == "infeasible" else "unknown"
            return SimResult(verdict, f"no assembly sequence: {pr.reason}", [])
        steps = pr.steps
    notes: list[str] = []
    with Twin(cell) as twin:
        sizes = [part_size(cell, layout, i) for i in range(len(layout))]
        check_supplies(twin, sizes, seed)
        alloc, sched = allocate(twin, cell, layout, steps, time_limit, arms)
        res = _plan_all(twin, cell, layout, steps, alloc, seed, motion_time_limit)
        res.schedule = sched
        res.notes = notes
        if snapshots:
            from cellspec.robots.render import snapshot_twin

            snapshot_twin(twin, f"{snapshots}/planned.png")
    if any(not a.ok for a in res.actions):
        bad = [a for a in res.actions if not a.ok]
        limit = all(a.check == "motion" and (a.reason or "").endswith("time limit")
                    for a in bad)
        res.verdict = "unknown" if limit else "fail"
        res.reason = f"{len(bad)} of {len(res.actions)} actions fail before execution" + (
            ": the motion planner hit its time limit (not a proof that no motion exists; "
            "raise --motion-time-limit)" if limit else "")
        return res
    idx = {pid: i for i, pid in enumerate(layout.ids)}
    start = {r: np.array(q) for r, q in res.homes.items()}
    with Twin(cell) as twin:
        vel = {r: twin.spec(r).vel_limits for r in twin.robot_names}
        tl = time_parameterise(res.segments, start, vel)
        res.sequential_end = tl.end
        if sched is not None and sched.slots and len({x.arm for x in sched.slots}) > 1:
            carried = {a.part: (a.size, a.pick, a.place) for a in res.compiled}
            after: set[tuple[int, int]] = set()
            for _ in range(CLASH_ROUNDS):
                starts = dispatch(cell, layout, steps, res, sched, vel, after)
                ctl = time_parameterise(res.segments, start, vel, starts)
                clash = arm_clash(twin, ctl, parts=carried)
                if clash is None:
                    tl = ctl
                    res.concurrent = True
                    break
                if clash.placed is not None:
                    # a part placed earlier than in the sequence is in the way of a motion
                    # planned without it: its placing waits for that action to end
                    x = next(a.index for a in res.compiled if a.part == clash.placed)
                    placer = next(a.robot for a in res.compiled if a.index == x)
                    ys = [w[0] for w in ctl.windows if w[1] <= clash.t <= w[2] + DWELL
                          and w[3] in clash.robots and w[3] != placer]
                    if not ys or (x, ys[0]) in after:
                        break
                    after.add((x, ys[0]))
                    continue
                # serialise the two actions that meet: the later one waits for the other
                act = [w for w in ctl.windows if w[1] <= clash.t <= w[2] + DWELL
                       and w[3] in clash.robots]
                if len(act) < 2:
                    break
                first, second = sorted(act[:2], key=lambda w: (w[1], w[0]))
                after.add((second[0], first[0]))
            if not res.concurrent:
                res.notes.append(f"the arms were executed one after another: concurrently "
                                 f"they would collide ({clash.text})")
        t0 = {w[0]: w[1] for w in tl.windows}
        parts = {}
        for a in res.compiled:
            i = idx[a.part]
            pt = cell.part_types.get(layout.types[i])
            parts[a.part] = {"size": a.size, "start": a.pick, "place": a.place,
                             "mass": float(pt.mass) if pt is not None and pt.mass else 0.1,
                             "appear": t0[a.index]}
        hook = None
        if snapshots:
            from cellspec.robots.render import snapshot_client

            def hook(cid: int) -> None:
                snapshot_client(cid, cell, f"{snapshots}/final.png")

        ex = execute(twin, tl, parts, faults, on_end=hook)
    res.timeline = tl
    res.execution = ex
    out = []
    for a in res.actions:
        comp = next(c for c in res.compiled if c.part == a.part)
        d = ex.per_action.get(comp.index, 0.0)
        why = []
        if d > ex.epsilon:
            why.append(f"δ = {d:.4f} rad > ε = {ex.epsilon:g} rad")
        if a.part in ex.misplaced:
            off = ex.misplaced[a.part]
            why.append(f"{a.part} ends {off:.3f} m from its place" if math.isfinite(off)
                       else f"{a.part} never appeared")
        hits = [b for b, t in ex.blocked_at.items()
                if any(w[0] == comp.index and w[1] <= t <= w[2] + DWELL for w in tl.windows)]
        if hits:
            why.append("contact with the blocked region: " + ", ".join(hits))
        out.append(ActionReport(a.index, a.robot, a.part, not why,
                                None if not why else "execution",
                                "; ".join(why) or None, d))
    res.actions = out
    res.verdict = "pass" if ex.ok and all(a.ok for a in out) else "fail"
    if res.verdict == "fail":
        res.reason = "execution: " + "; ".join(ex.reasons) if ex.reasons else \
            "an action failed in execution"
    return res


def compare_single(cell: Cell, layout: Layout, res: SimResult, *, seed: int = SEED,
                   motion_time_limit: float = MOTION_TIME_LIMIT, time_limit: float = 10.0
                   ) -> SingleArm | None:
    """Plan and execute the best single arm's allocation (CP-SAT's best single-arm estimate:
    every part to that arm, the other arms at home, the same sequence) so that the executed
    speedup can be reported next to the estimated one. None unless ``res`` executed a
    multi-arm schedule and some single arm can do every job. Also stored in ``res.single``."""
    s = res.schedule
    if res.timeline is None or s is None or len({x.arm for x in s.slots}) < 2:
        return None
    est = {a: v for a, v in (s.single_arm or {}).items() if v is not None}
    if not est:
        return None
    arm = min(est, key=lambda a: (est[a], a))
    one = simulate(cell, layout, steps=res.steps, seed=seed,
                   motion_time_limit=motion_time_limit, time_limit=time_limit, arms=(arm,))
    ok = one.verdict == "pass" and one.timeline is not None
    executed = one.timeline.end if ok and one.timeline is not None else None
    res.single = SingleArm(
        arm=arm, verdict=one.verdict, estimated=est[arm], executed=executed,
        speedup_estimated=s.speedup,
        speedup_executed=None if executed is None or res.timeline.end <= 0
        else executed / res.timeline.end,
        reason=None if ok else one.reason)
    return res.single


def _dispatch_order(slots, index: dict[str, int], after: set[tuple[int, int]]) -> list:
    """The slots by place start, except that a job waits in line until the jobs it must
    follow (``after``) are in (when every job left waits, as in a cycle, the first goes)."""
    todo = sorted(slots, key=lambda x: (x.place_start, x.part))
    out: list = []
    placed: set[int] = set()
    while todo:
        k = next((j for j, s in enumerate(todo)
                  if all(y in placed for x, y in after if x == index[s.part])), 0)
        s = todo.pop(k)
        out.append(s)
        placed.add(index[s.part])
    return out


def dispatch(cell: Cell, layout: Layout, steps: tuple[Step, ...], res: SimResult, sched: Any,
             vel: dict[str, np.ndarray], after: set[tuple[int, int]] | None = None
             ) -> dict[int, float]:
    """Start times of the actions with their real motion times: CP-SAT's allocation and
    order (by place start), list-scheduled so that each arm does one job at a time, the
    precedences hold and no two phases inside the shared zone overlap; ``after`` holds
    pairs (x, y): action x starts only when action y has ended (to keep arms apart)."""
    from cellspec.robots.execute import segment_times

    idx = {a.part: a for a in res.compiled}
    durs = segment_times(res.segments, {r: np.array(q) for r, q in res.homes.items()}, vel)
    pick: dict[int, float] = {}
    place: dict[int, float] = {}
    for s, d in zip(res.segments, durs, strict=True):
        extra = DWELL if (s.grasp or s.release) else 0.0
        tgt = pick if s.kind in ("approach", "grasp") else place
        tgt[s.action] = tgt.get(s.action, 0.0) + d + extra
    preds: dict[str, list[str]] = {}
    for a, b in _precedences(cell, layout, steps):
        preds.setdefault(b, []).append(a)
    free: dict[str, float] = {}
    end: dict[str, float] = {}
    busy: list[tuple[float, float]] = []
    starts: dict[int, float] = {}
    done: dict[int, float] = {}
    for slot in _dispatch_order(sched.slots, {a.part: a.index for a in res.compiled},
                                after or set()):
        a = idx[slot.part]
        dp, dq = pick[a.index], place[a.index]
        t = max([free.get(a.robot, 0.0)] + [end[p] - dp for p in preds.get(a.part, ())
                                            if p in end]
                + [done[y] for x, y in (after or ()) if x == a.index and y in done])
        zones = [(0.0, dp)] if _in_zone(cell, a.pick) else []
        if _in_zone(cell, a.place):
            zones.append((dp, dp + dq))
        moved = True
        while moved:
            moved = False
            for o0, o1 in zones:
                for b0, b1 in busy:
                    if t + o0 < b1 - 1e-9 and b0 < t + o1 - 1e-9:
                        t = b1 - o0
                        moved = True
        for o0, o1 in zones:
            busy.append((t + o0, t + o1))
        starts[a.index] = t
        free[a.robot] = t + dp + dq
        end[a.part] = t + dp + dq
        done[a.index] = t + dp + dq
    return starts


def carried_intervals(tl: Timeline) -> list[tuple[float, float, str, str]]:
    """(t_grasp, t_release, robot, part) for every part a robot holds along a timeline (a
    part never released is held to the end)."""
    held: dict[str, tuple[float, str]] = {}
    out = []
    for t, r, kind, part in tl.events:
        if kind == "grasp":
            held[r] = (t, part)
        elif r in held:
            t0, pt = held.pop(r)
            out.append((t0, t, r, pt))
    out += [(t0, tl.end, r, pt) for r, (t0, pt) in held.items()]
    return sorted(out)


Vec3 = tuple[float, float, float]


class Clash(NamedTuple):
    """A contact between arms on a concurrent timeline: text, time, the two robots and the
    placed part involved (None: arm or carried part against arm or carried part)."""

    text: str
    t: float
    robots: tuple[str, str]
    placed: str | None = None


def arm_clash(twin: Any, tl: Timeline, every: float = 0.05,
              parts: dict[str, tuple[Vec3, Vec3, Vec3 | None]] | None = None
              ) -> Clash | None:
    """The first contact between arms along a concurrent timeline (sampled every ``every``
    s): a link of one arm with a link of another; with ``parts`` (part -> size, centre at
    the pick, centre at the place or None) also a part one arm carries, or has placed,
    with another arm or with a part another arm carries. A part is attached to its robot
    from its grasp to its release (as planned: at its pick centre at the grasp
    configuration), then stays at its place (when given). Returns the ``Clash`` (a part
    stands for the robot that carries or placed it); None when the arms never touch. The
    twin is left as it was found (robots where they were)."""
    from cellspec.robots.collision import CollisionChecker

    robots = list(tl.t)
    before = {r: twin.get_q(r) for r in robots}
    holds = [h for h in carried_intervals(tl) if parts and h[3] in parts]
    owner: dict[str, tuple[str, str]] = {}  # part body -> (robot, "carried by"|"placed by")
    chk = CollisionChecker(twin)
    try:
        for k in range(int(tl.end / every) + 2):
            t = min(k * every, tl.end)
            for t0, t1, r, part in holds:
                key = f"part:{part}"
                size, pick, place = parts[part]  # type: ignore[index]
                if t0 <= t < t1 and key not in owner:
                    twin.add_box(part, size, pick, kind="part")
                    twin.set_q(r, tl.at(r, t0))
                    twin.attach(r, key)
                    owner[key] = (r, "carried by")
                elif t >= t1 and owner.get(key, ("", ""))[1] == "carried by":
                    twin.detach(r)
                    if place is None:
                        twin.remove(key)
                        del owner[key]
                    else:
                        twin.set_pose(key, place)
                        owner[key] = (r, "placed by")
            for c in chk.contacts({r: tl.at(r, t) for r in robots}):
                ra = owner[c.a][0] if c.a in owner else c.a.split("/")[0]
                rb = owner[c.b][0] if c.b in owner else c.b.split("/")[0]
                if ra in robots and rb in robots and ra != rb:
                    what = [f"{x} ({owner[x][1]} {owner[x][0]})" if x in owner else x
                            for x in (c.a, c.b)]
                    placed = [x[5:] for x in (c.a, c.b) if owner.get(x, ("", ""))[1]
                              == "placed by"]
                    return Clash(f"{what[0]} with {what[1]} at t = {t:.2f} s", t, (ra, rb),
                                 placed[0] if placed else None)
        return None
    finally:
        for key, (r, how) in list(owner.items()):
            if how == "carried by":
                twin.detach(r)
            twin.remove(key)
        twin.set_qs(before)


def too_wide(twin: Any, robot: str, size, axis: str | None) -> str | None:
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


def _classify(reason: str | None) -> str:
    return "collision" if reason and "collision" in reason.lower() else "ik"


def _plan_all(twin: Any, cell: Cell, layout: Layout, steps: tuple[Step, ...],
              alloc: dict[str, str | None], seed: int, mtl: float) -> SimResult:
    from cellspec.robots.motion import plan_motion

    idx = {pid: i for i, pid in enumerate(layout.ids)}
    homes = {r: twin.home(r) for r in twin.robot_names}
    for r, q in homes.items():
        twin.set_q(r, q)
    res = SimResult("pass", None, [], steps=steps,
                    homes={r: np.round(q, 9).tolist() for r, q in homes.items()})
    from cellspec.core import progress

    for k, s in enumerate(steps):
        progress.tick("plan motions", k, len(steps), f"action {k + 1}: {s.part}")
        i = idx[s.part]
        size = part_size(cell, layout, i)
        place = tuple(float(v) for v in layout.pos[i])
        robot = alloc.get(s.part)
        kind = _grip_kind(cell, layout, i, s)

        def fail(check: str, why: str, robot: str | None = robot, k: int = k,
                 part: str = s.part, size=size, place=place) -> None:
            res.actions.append(ActionReport(k, robot, part, False, check, why))
            twin.add_box(part, size, place, kind="part")

        if robot is None:
            fail("gripper", f"no robot has a {kind} gripper for {s.part}")
            continue
        wide = too_wide(twin, robot, size, s.axis)
        if wide is not None:
            fail("gripper", wide)
            continue
        z, why = supply_for(twin, robot, size, s.axis, seed)
        if z is None:
            fail("reach", f"{robot} reaches no supply area: {why}")
            continue
        a = compile_action(cell, k, robot, s.part, size, place, s.axis, z)
        rob = next(r for r in cell.robots if r.name == robot)
        if rob.reach is not None:
            base = np.array([float(v) for v in rob.base])
            far = [p for p in a.poses
                   if np.linalg.norm(np.array(p.pos) - base) > float(rob.reach)]
            if far:
                d = float(np.linalg.norm(np.array(far[0].pos) - base))
                fail("reach", f"{far[0].name} pose {_p(far[0].pos)} is {d:.3f} m from {robot}'s "
                     f"base, beyond its reach {float(rob.reach):g} m")
                continue
        twin.add_box(s.part, size, a.pick, kind="part")
        key = f"part:{s.part}"
        qs: dict[str, np.ndarray] = {}
        prev = homes[robot]
        bad = None
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
                        vacuum=a.gripper == "vacuum")
            if not r.ok:
                bad = (_classify(r.reason), f"{pose.name} pose {_p(pose.pos)}: {r.reason}")
                break
            qs[pose.name] = r.q
            prev = r.q
        twin.detach(robot)
        if bad is not None:
            twin.remove(key)
            fail(*bad)
            continue
        twin.set_pose(key, a.pick)
        # motions
        legs = [("approach", homes[robot], qs["approach"], (), False, False),
                ("grasp", qs["approach"], qs["grasp"], (key,), True, False),
                ("lift", qs["grasp"], qs["lift"], (key,), False, False),
                ("transport", qs["lift"], qs["transport"], (), False, False),
                ("place", qs["transport"], qs["place"], (), False, True),
                ("retreat", qs["place"], qs["retreat"], (key,), False, False),
                ("home", qs["retreat"], homes[robot], (), False, False)]
        segs = []
        failed = None
        for n, (name, qa, qb, ign, grasp, release) in enumerate(legs):
            if name == "lift":
                twin.set_q(robot, qs["grasp"])
                twin.attach(robot, key)
            if name == "retreat":
                twin.set_q(robot, qs["place"])
                twin.detach(robot)
            m = plan_motion(twin, {robot: qa}, {robot: qb}, seed=seed + 101 * k + n,
                            time_limit=mtl, ignore=frozenset(ign))
            if not m.ok:
                failed = f"motion {name}: {m.reason}"
                break
            segs.append(Segment(k, robot, s.part, name, tuple(x[robot] for x in m.path[1:]),
                                grasp=grasp, release=release))
        twin.detach(robot)
        twin.set_q(robot, homes[robot])
        twin.set_pose(key, place)
        if failed is not None:
            res.actions.append(ActionReport(k, robot, s.part, False,
                                            _classify(failed) if "collision" in failed
                                            else "motion", failed))
            continue
        res.compiled.append(a)
        res.joints[k] = {n: np.round(q, 9).tolist() for n, q in qs.items()}
        res.segments.extend(segs)
        res.actions.append(ActionReport(k, robot, s.part, True))
    return res


def _p(v) -> str:
    return f"({v[0]:.3f}, {v[1]:.3f}, {v[2]:.3f})"
