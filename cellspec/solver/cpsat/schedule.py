"""Dual-arm (multi-arm) allocation and scheduling with CP-SAT (seed 000, Section IV-E).

Each placement (a *job*) goes to exactly one arm that can do it (its IK succeeds for every
pose of the job); a job is a pick phase (supply to lift) followed at once by a place phase
(transport, place, release, retreat). Constraints:

* an arm does one job at a time (no-overlap of its optional job intervals);
* order precedences: when part i must come before part j, i's place phase ends before j's
  place phase starts;
* the shared zone: phases that enter it, of all arms, never overlap in time (one interval
  no-overlap over every optional phase interval flagged as shared);
* minimise the makespan.

Durations are seconds, scheduled on an integer grid of ``RESOLUTION`` seconds. The search
is deterministic (one worker, a fixed seed). The speedup is the best single arm's makespan
(the sum of its durations, when one arm can do every job) over the multi-arm makespan.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cellspec.core.errors import CellspecError
from cellspec.core.status import Status

RESOLUTION = 0.01  # seconds per tick
SEED = 1


@dataclass(frozen=True)
class ArmTimes:
    """How long one arm takes for a job's phases (s) and whether each enters the shared zone."""

    pick: float
    place: float
    pick_shared: bool = False
    place_shared: bool = True


@dataclass(frozen=True)
class Job:
    """One placement: the part and, per arm that can do it, its phase times."""

    part: str
    arms: dict[str, ArmTimes]


@dataclass(frozen=True)
class Slot:
    """A scheduled job: the arm, the start of its pick and place phases and its end (s)."""

    part: str
    arm: str
    start: float
    place_start: float
    end: float

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "arm": self.arm, "start": round(self.start, 3),
                "place_start": round(self.place_start, 3), "end": round(self.end, 3)}


@dataclass(frozen=True)
class ScheduleResult:
    """The schedule (``optimal`` or ``feasible``), ``infeasible`` or ``unknown`` (limit)."""

    status: Status
    slots: tuple[Slot, ...] = ()
    makespan: float | None = None
    single_arm: dict[str, float | None] | None = None  # arm -> its makespan alone (None: cannot)
    best_single: float | None = None
    speedup: float | None = None
    reason: str | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        found = (Status.OPTIMAL, Status.FEASIBLE)
        assert self.status in (*found, Status.INFEASIBLE, Status.UNKNOWN)
        assert (self.status in found) == bool(self.slots) or not self.slots
        assert self.status in found or self.reason

    def arm_of(self, part: str) -> str:
        """The arm a part is allocated to."""
        return next(s.arm for s in self.slots if s.part == part)

    def to_json(self, timing: bool = False) -> dict[str, Any]:
        """The result as plain JSON data."""
        out: dict[str, Any] = {"status": str(self.status),
                               "slots": [s.to_json() for s in self.slots],
                               "makespan": None if self.makespan is None else
                               round(self.makespan, 3),
                               "single_arm": {k: (None if v is None else round(v, 3)) for k, v in
                                              (self.single_arm or {}).items()},
                               "best_single": None if self.best_single is None else
                               round(self.best_single, 3),
                               "speedup": None if self.speedup is None else round(self.speedup, 3)}
        if self.reason:
            out["reason"] = self.reason
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out


def _ticks(s: float) -> int:
    return max(1, int(round(s / RESOLUTION)))


def schedule(jobs: list[Job], arms: list[str], precedences: Sequence[tuple[str, str]] = (),
             *, time_limit: float = 10.0) -> ScheduleResult:
    """Allocate every job to an arm and schedule it; minimise the makespan."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    parts = [j.part for j in jobs]
    if len(set(parts)) != len(parts):
        raise CellspecError("schedule: a part appears in two jobs")
    for a, b in precedences:
        if a not in parts or b not in parts:
            raise CellspecError(f"schedule: precedence ({a}, {b}) names an unknown part")
    for j in jobs:
        bad = [a for a in j.arms if a not in arms]
        if bad:
            raise CellspecError(f"schedule: job {j.part} names unknown arm {bad[0]}")
        if not j.arms:
            return ScheduleResult(Status.INFEASIBLE, reason=f"no arm can place {j.part} (IK fails "
                                  "for every arm)", seconds=time.perf_counter() - t0)
    single: dict[str, float | None] = {}
    for a in arms:
        single[a] = sum(_ticks(j.arms[a].pick) + _ticks(j.arms[a].place) for j in jobs
                        ) * RESOLUTION if all(a in j.arms for j in jobs) else None
    horizon = sum(max(_ticks(t.pick) + _ticks(t.place) for t in j.arms.values()) for j in jobs)
    m = cp_model.CpModel()
    start, pstart, end = {}, {}, {}
    arm_iv: dict[str, list] = {a: [] for a in arms}
    shared_iv = []
    choice: dict[tuple[str, str], Any] = {}
    for j in jobs:
        s = m.new_int_var(0, horizon, f"s_{j.part}")
        ps = m.new_int_var(0, horizon, f"ps_{j.part}")
        e = m.new_int_var(0, horizon, f"e_{j.part}")
        start[j.part], pstart[j.part], end[j.part] = s, ps, e
        lits = []
        for a in sorted(j.arms):
            t = j.arms[a]
            x = m.new_bool_var(f"x_{j.part}_{a}")
            choice[(j.part, a)] = x
            lits.append(x)
            dp, dq = _ticks(t.pick), _ticks(t.place)
            m.add(ps == s + dp).OnlyEnforceIf(x)
            m.add(e == ps + dq).OnlyEnforceIf(x)
            arm_iv[a].append(m.new_optional_interval_var(s, dp + dq, e, x, f"job_{j.part}_{a}"))
            if t.pick_shared:
                shared_iv.append(m.new_optional_fixed_size_interval_var(s, dp, x,
                                                                        f"zp_{j.part}_{a}"))
            if t.place_shared:
                shared_iv.append(m.new_optional_fixed_size_interval_var(ps, dq, x,
                                                                        f"zq_{j.part}_{a}"))
        m.add_exactly_one(lits)
    for a in arms:
        if arm_iv[a]:
            m.add_no_overlap(arm_iv[a])
    if shared_iv:
        m.add_no_overlap(shared_iv)
    for a, b in precedences:
        m.add(pstart[b] >= end[a])
    mk = m.new_int_var(0, horizon, "makespan")
    m.add_max_equality(mk, list(end.values()))
    m.minimize(mk)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    solver.parameters.max_deterministic_time = max(0.01, time_limit)
    st = solver.Solve(m)
    secs = time.perf_counter() - t0
    best = min((v for v in single.values() if v is not None), default=None)
    if st == cp_model.INFEASIBLE:
        return ScheduleResult(Status.INFEASIBLE, single_arm=single, best_single=best,
                              reason="the precedences and the shared zone admit no schedule",
                              seconds=secs)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ScheduleResult(Status.UNKNOWN, single_arm=single, best_single=best,
                              reason=f"CP-SAT stopped at the time limit ({time_limit:g})",
                              seconds=secs)
    slots = []
    for j in jobs:
        arm = next(a for a in sorted(j.arms) if solver.Value(choice[(j.part, a)]))
        slots.append(Slot(j.part, arm, solver.Value(start[j.part]) * RESOLUTION,
                          solver.Value(pstart[j.part]) * RESOLUTION,
                          solver.Value(end[j.part]) * RESOLUTION))
    slots.sort(key=lambda s: (s.start, s.part))
    makespan = solver.Value(mk) * RESOLUTION
    status = Status.OPTIMAL if st == cp_model.OPTIMAL else Status.FEASIBLE
    return ScheduleResult(status, tuple(slots),
                          makespan, single, best,
                          None if best is None or makespan <= 0 else best / makespan,
                          seconds=secs)
