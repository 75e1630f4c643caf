"""What ``cellspec sim`` reports: per action (``ActionReport``), the best single arm run
alone (``SingleArm``) and the whole simulation (``SimResult``, with the plan it writes).

Plain data, apart from the pipeline (:mod:`cellspec.robots.sim`) that fills it in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.robots.execute import Execution, Segment, Timeline
from cellspec.robots.tasks import PlaceAction
from cellspec.solver.cpsat.results import Step
from cellspec.solver.cpsat.schedule import ScheduleResult


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
        """Plain JSON."""
        return {"index": self.index, "robot": self.robot, "part": self.part,
                "result": Status.PASS if self.ok else Status.FAIL, "check": self.check,
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
        """Plain JSON (times rounded to the millisecond)."""
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
    compiled: list[PlaceAction] = field(default_factory=list)
    joints: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    timeline: Timeline | None = None
    execution: Execution | None = None
    schedule: ScheduleResult | None = None
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
