"""What a closed-loop run reports: one ``RunStep`` per executed action and the ``RunResult``.

Plain data, kept apart from the loop (:mod:`cellspec.world.run`) so the command and the
benchmark read results without the simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cellspec.world.faults import Fault

ENGINE = "kinematic-gripper"
ENGINE_NOTE = ("actions are executed by a KINEMATIC GRIPPER BODY in a pybullet physics "
               "simulation (a force-limited pad moved along straight paths, a fixed "
               "constraint as the grasp), NOT by the robot arm of the twin")

def arm_note(robot: str) -> str:
    """The run header for the arm engine."""
    return (f"actions are executed by the robot arm {robot} of the twin: the gripper pad in "
            "the pybullet physics simulation follows the arm's tool centre point (IK every "
            "2 cm, joint interpolation, forward kinematics); the arm's links are kinematic "
            "and not in the physics scene (only the pad and the parts make contact)")


@dataclass
class RunStep:
    """One executed action: what it was, whether it committed, and what was diagnosed."""

    label: str
    kind: str
    part: str
    outcome: str  # committed | rolled_back
    failed: tuple[str, ...] = ()
    causes: list[dict[str, Any]] = field(default_factory=list)
    ambiguous: bool = False
    recovery: str | None = None
    fault: str | None = None
    note: str | None = None
    sim_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"action": self.label, "kind": self.kind, "part": self.part,
                "outcome": self.outcome, "failed": list(self.failed), "causes": self.causes,
                "ambiguous": self.ambiguous, "recovery": self.recovery, "fault": self.fault,
                "note": self.note, "sim_seconds": round(self.sim_s, 3)}


@dataclass
class RunResult:
    """A whole run: the steps, the outcome and the figures the benchmark needs."""

    steps: list[RunStep]
    success: bool
    reason: str
    mode: str
    faults: tuple[Fault, ...]
    planned: int
    sim_seconds: float
    wall_seconds: float
    max_error: float
    first_diagnosis: dict[str, str | None]  # fault -> first cause diagnosed after it
    recovery_times: list[float]  # sim seconds from detection to the recovered commit
    skipped_faults: list[str]
    engine: str = ENGINE
    note: str = ENGINE_NOTE
    refused: bool = False  # the layout failed verification: nothing was built or written
    lifecycle: list[dict[str, Any]] = field(default_factory=list)  # entity state changes
    place_corrections: int = 0  # back-offs of the guarded place

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (wall time excluded so the output is byte-identical across runs)."""
        rolled = sum(1 for s in self.steps if s.outcome == "rolled_back")
        return {"engine": self.engine, "note": self.note, "mode": self.mode,
                "faults": [str(f) for f in self.faults],
                "skipped_faults": self.skipped_faults,
                "steps": [s.to_json() for s in self.steps],
                "lifecycle": self.lifecycle,
                "summary": {"success": self.success, "reason": self.reason,
                            "refused": self.refused,
                            "place_corrections": self.place_corrections,
                            "actions": len(self.steps), "planned": self.planned,
                            "rolled_back": rolled,
                            "max_error_m": (round(self.max_error, 4)
                                            if math.isfinite(self.max_error) else None),
                            "sim_seconds": round(self.sim_seconds, 3),
                            "diagnosed": self.first_diagnosis,
                            "recovery_sim_seconds": [round(t, 3) for t in self.recovery_times]}}
