"""Frozen results of planning and repair, with invariants that really run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from cellspec.core.status import FOUND, Status
from cellspec.solver.result import Verdict

# the words of repair, generate and plan (core.status)
SolveStatus = Literal[Status.OPTIMAL, Status.FEASIBLE, Status.INFEASIBLE, Status.UNKNOWN]


class Step(BaseModel):
    """One placement: the part, the gripper that places it and, for a parallel gripper,
    the lateral axis its fingers close along."""

    model_config = ConfigDict(frozen=True)
    part: str
    gripper: Literal["vacuum", "parallel"]
    axis: Literal["x", "y"] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "gripper": self.gripper, "axis": self.axis}


class PlanResult(BaseModel):
    """A complete assembly sequence, a proof that none exists, or unknown (limit hit).

    ``optimal`` means a sequence was found (sequencing has nothing to optimise): it
    satisfies every order rule and was re-verified with clingo (``verdict``).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    status: SolveStatus
    steps: tuple[Step, ...] = ()
    method: str = ""
    reason: str | None = None
    conflict: tuple[str, ...] = ()  # parts of an infeasible core
    verdict: Verdict | None = None
    order_rules: tuple[str, ...] = ("support_order", "grip_access")
    unstable: bool = False  # infeasible because the finished layout itself cannot stand
    seconds: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> PlanResult:
        if self.status in FOUND:
            ids = [s.part for s in self.steps]
            if len(set(ids)) != len(ids):
                raise ValueError("a sequence places every part exactly once")
            if self.verdict is None:
                raise ValueError("a found sequence must carry its re-verification verdict")
            if any(v.rule in self.order_rules for v in self.verdict.violations):
                raise ValueError("a found sequence cannot violate an order rule")
            for s in self.steps:
                if (s.gripper == "parallel") != (s.axis is not None):
                    raise ValueError("a parallel grip names its axis, a vacuum grip none")
        else:
            if self.steps:
                raise ValueError("no sequence unless one was found")
            if not self.reason:
                raise ValueError(f"status {self.status} must say why")
        return self

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(s.part for s in self.steps)

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "method": self.method,
                               "order": list(self.order),
                               "steps": [s.to_json() for s in self.steps]}
        if self.reason:
            out["reason"] = self.reason
        if self.conflict:
            out["conflict"] = list(self.conflict)
        if self.verdict is not None:
            out["verdict"] = self.verdict.verdict
            out["violations"] = [v.to_json() for v in self.verdict.violations]
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out


class Move(BaseModel):
    """One part moved by a repair: from, to (centres, metres) and why."""

    model_config = ConfigDict(frozen=True)
    part: str
    src: tuple[float, float, float]
    dst: tuple[float, float, float]
    how: Literal["shift", "free"]
    why: str
    yaw: float | None = None  # the new yaw (degrees) of a part turned by --allow-rotate,
    # or (yaw_kept) the unchanged yaw of a yawed box that was only translated
    yaw_kept: bool = False

    @property
    def l1(self) -> float:
        return sum(abs(a - b) for a, b in zip(self.src, self.dst, strict=True))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"part": self.part, "from": list(self.src), "to": list(self.dst),
               "how": self.how, "why": self.why}
        if self.yaw is not None:
            out["yaw"] = self.yaw
        if self.yaw_kept:
            out["yaw_kept"] = True
        return out


class ClusterInfo(BaseModel):
    """One independent repair cluster: the parts that could move, how many fixed parts
    around them were in its model, how many moved, and whether CP-SAT proved its answer
    minimal (within the move bound)."""

    model_config = ConfigDict(frozen=True)
    parts: tuple[str, ...]
    context: int
    moved: int
    proved: bool

    def to_json(self) -> dict[str, Any]:
        return {"parts": list(self.parts), "context": self.context, "moved": self.moved,
                "proved": self.proved}


class RepairResult(BaseModel):
    """A repaired layout (re-verified: ``verdict`` is a pass), a proof that none exists,
    or unknown. ``optimal``: fewest parts moved, then least L1 displacement, proved (with
    decomposition: among moves of the violating structures by at most ``move_bound_m``,
    every cluster proved); ``feasible``: a verified repair, optimality not proved within
    the limits."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    status: SolveStatus
    layout: dict[str, Any] | None = None  # the repaired layout JSON (docs/formats.md)
    moves: tuple[Move, ...] = ()
    reordered: bool = False
    already_valid: bool = False
    reason: str | None = None
    conflict: tuple[str, ...] = ()  # rule names of an infeasible core
    verdict: Verdict | None = None
    before: Verdict | None = None
    seconds: float = 0.0
    first_seconds: float | None = None  # when the first verified repair was in hand
    proved_seconds: float | None = None  # when every cluster was first proved minimal
    move_bound_m: float | None = None  # the scope of the proof: how far a part may move
    clusters: tuple[ClusterInfo, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> RepairResult:
        if self.status in FOUND:
            if self.layout is None or self.verdict is None or self.verdict.verdict != Status.PASS:
                raise ValueError("a repair must carry its layout and a passing re-verification")
        else:
            if self.layout is not None or self.moves:
                raise ValueError("no layout unless a repair was found")
            if not self.reason:
                raise ValueError(f"status {self.status} must say why")
        return self

    @property
    def parts_moved(self) -> int:
        return len(self.moves)

    @property
    def displacement(self) -> float:
        return sum(m.l1 for m in self.moves)

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "already_valid": self.already_valid,
                               "parts_moved": self.parts_moved,
                               "displacement_m": round(self.displacement, 6),
                               "reordered": self.reordered,
                               "moves": [m.to_json() for m in self.moves]}
        if self.before is not None:
            out["violations_before"] = [v.to_json() for v in self.before.violations]
        if self.reason:
            out["reason"] = self.reason
        if self.conflict:
            out["conflict"] = list(self.conflict)
        if self.clusters:
            out["clusters"] = [c.to_json() for c in self.clusters]
        if self.move_bound_m is not None:
            out["move_bound_m"] = self.move_bound_m
        if self.layout is not None:
            out["layout"] = self.layout
        if timing:
            out["seconds"] = round(self.seconds, 4)
            if self.first_seconds is not None:
                out["first_seconds"] = round(self.first_seconds, 4)
            if self.proved_seconds is not None:
                out["proved_seconds"] = round(self.proved_seconds, 4)
        return out
