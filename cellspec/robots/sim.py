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

This module is the pipeline; its stages are modules of their own: allocation
(:mod:`.allocation`), the planning pass (:mod:`.planning`), several arms at once
(:mod:`.concurrency`) and the reports (:mod:`.reports`); their names are imported from
there.
"""

from __future__ import annotations

import math

import numpy as np

from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.core.status import Reason, Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.allocation import (
    SEED,
    allocate,
)
from cellspec.robots.concurrency import (
    concurrent_timeline,
)
from cellspec.robots.execute import (
    DWELL,
    Execution,
    InjectedFault,
    Timeline,
    execute,
    time_parameterise,
)
from cellspec.robots.planning import MOTION_TIME_LIMIT, plan_all
from cellspec.robots.render import snapshot_client, snapshot_twin
from cellspec.robots.reports import ActionReport, SimResult, SingleArm
from cellspec.robots.tasks import check_supplies, part_size
from cellspec.robots.twin import Twin
from cellspec.solver.cpsat.results import Step
from cellspec.solver.cpsat.schedule import ScheduleResult
from cellspec.solver.cpsat.sequence import plan
from cellspec.solver.verify import check

__all__ = ["compare_single", "simulate"]

def simulate(cell: Cell, layout: Layout, *, steps: tuple[Step, ...] | None = None,
             faults: tuple[InjectedFault, ...] = (), seed: int = SEED,
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
    if gate is not None and res.verdict == Status.PASS:
        res.verdict, res.reason = gate[0], gate[1] + "; every action passes in the twin"
    elif gate is not None:
        res.notes.insert(0, gate[1])
    return res


def _verify_gate(cell: Cell, layout: Layout, steps: tuple[Step, ...] | None,
                 time_limit: float) -> tuple[str, str] | None:
    """None when the layout verifies (with the plan's order when steps are given, else its
    rules that need no order); else (verdict, why): fail with the violations, or unknown."""
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
    if v.verdict == Status.UNKNOWN:
        return Status.UNKNOWN, f"the layout could not be verified: {v.reason}"
    if v.verdict == Status.FAIL:
        names = [f"{x.rule}({', '.join(x.parts)})" for x in v.violations]
        more = f" and {len(names) - 6} more" if len(names) > 6 else ""
        what = "the layout with the plan's order" if steps is not None else "the layout"
        return Status.FAIL, f"{what} fails its rules: {', '.join(names[:6])}{more}"
    return None


def _simulate(cell: Cell, layout: Layout, *, steps: tuple[Step, ...] | None,
              faults: tuple[InjectedFault, ...], seed: int, motion_time_limit: float,
              time_limit: float, snapshots: str | None,
              arms: tuple[str, ...] | None) -> SimResult:
    """Sequence (unless ``steps`` are given), allocate and plan, then execute."""
    if steps is None:
        pr = plan(cell, layout, time_limit=time_limit)
        if pr.status not in (Status.OPTIMAL, Status.FEASIBLE):
            verdict = Status.FAIL if pr.status == Status.INFEASIBLE else Status.UNKNOWN
            return SimResult(verdict, f"no assembly sequence: {pr.reason}", [])
        steps = pr.steps
    res, sched = _plan(cell, layout, steps, seed, motion_time_limit, time_limit, snapshots,
                       arms)
    if any(not a.ok for a in res.actions):
        bad = [a for a in res.actions if not a.ok]
        limit = all(a.check == "motion" and (a.reason or "").endswith(Reason.TIME_LIMIT)
                    for a in bad)
        res.verdict = Status.UNKNOWN if limit else Status.FAIL
        res.reason = f"{len(bad)} of {len(res.actions)} actions fail before execution" + (
            ": the motion planner hit its time limit (not a proof that no motion exists; "
            "raise --motion-time-limit)" if limit else "")
        return res
    tl, ex = _execute(cell, layout, steps, res, sched, faults, snapshots)
    res.timeline = tl
    res.execution = ex
    res.actions = _execution_reports(res, tl, ex)
    res.verdict = Status.PASS if ex.ok and all(a.ok for a in res.actions) else Status.FAIL
    if res.verdict == Status.FAIL:
        res.reason = "execution: " + "; ".join(ex.reasons) if ex.reasons else \
            "an action failed in execution"
    return res


def _plan(cell: Cell, layout: Layout, steps: tuple[Step, ...], seed: int,
          motion_time_limit: float, time_limit: float, snapshots: str | None,
          arms: tuple[str, ...] | None) -> tuple[SimResult, ScheduleResult | None]:
    """In a twin without the layout's parts: check the supplies, allocate, plan every
    action; (the result so far, CP-SAT's schedule or None)."""
    with Twin(cell) as twin:
        sizes = [part_size(cell, layout, i) for i in range(len(layout))]
        check_supplies(twin, sizes, seed)
        alloc, sched = allocate(twin, cell, layout, steps, time_limit, arms)
        res = plan_all(twin, cell, layout, steps, alloc, seed, motion_time_limit)
        res.schedule = sched
        res.notes = []
        if snapshots:
            snapshot_twin(twin, f"{snapshots}/planned.png")
    return res, sched


def _execute(cell: Cell, layout: Layout, steps: tuple[Step, ...], res: SimResult,
             sched: ScheduleResult | None,
             faults: tuple[InjectedFault, ...],
             snapshots: str | None) -> tuple[Timeline, Execution]:
    """The timeline (concurrent when several arms can run without clashing, else one
    motion after another) executed in the physics with the faults."""
    idx = {pid: i for i, pid in enumerate(layout.ids)}
    start = {r: np.array(q) for r, q in res.homes.items()}
    with Twin(cell) as twin:
        vel = {r: twin.spec(r).vel_limits for r in twin.robot_names}
        tl = time_parameterise(res.segments, start, vel)
        res.sequential_end = tl.end
        if sched is not None and sched.slots and len({x.arm for x in sched.slots}) > 1:
            ctl, clash = concurrent_timeline(twin, cell, layout, steps, res, sched, start, vel)
            if ctl is not None:
                tl = ctl
                res.concurrent = True
            else:
                res.notes.append(f"the arms were executed one after another: concurrently "
                                 f"they would collide ({clash})")
        t0 = {w[0]: w[1] for w in tl.windows}
        parts = {}
        for a in res.compiled:
            i = idx[a.part]
            pt = cell.part_types.get(layout.types[i])
            parts[a.part] = {"size": a.size, "start": a.pick, "place": a.place,
                             "mass": float(pt.mass) if pt is not None and pt.mass else 0.1,
                             "appear": t0[a.index]}
            if a.yaw or a.shape != "box":  # its end pose is checked too (execute._turned)
                parts[a.part].update(yaw=a.yaw, shape=a.shape)
        hook = None
        if snapshots:
            def hook(cid: int) -> None:
                snapshot_client(cid, cell, f"{snapshots}/final.png")

        return tl, execute(twin, tl, parts, faults, on_end=hook)


def _execution_reports(res: SimResult, tl: Timeline, ex: Execution) -> list[ActionReport]:
    """Per action its executed outcome: δ within ε, the part at its place, no contact with
    the blocked region during its window."""
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
        if a.part in ex.turned:
            why.append(f"{a.part} ends turned {ex.turned[a.part]:.1f} deg from its pose")
        hits = [b for b, t in ex.blocked_at.items()
                if any(w[0] == comp.index and w[1] <= t <= w[2] + DWELL for w in tl.windows)]
        if hits:
            why.append("contact with the blocked region: " + ", ".join(hits))
        out.append(ActionReport(a.index, a.robot, a.part, not why,
                                None if not why else "execution",
                                "; ".join(why) or None, d))
    return out


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
    ok = one.verdict == Status.PASS and one.timeline is not None
    executed = one.timeline.end if ok and one.timeline is not None else None
    res.single = SingleArm(
        arm=arm, verdict=one.verdict, estimated=est[arm], executed=executed,
        speedup_estimated=s.speedup,
        speedup_executed=None if executed is None or res.timeline.end <= 0
        else executed / res.timeline.end,
        reason=None if ok else one.reason)
    return res.single
