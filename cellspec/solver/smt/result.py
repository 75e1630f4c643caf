"""Results of the formal checks: frozen, JSON-serialisable, with invariants that run.

Status is ``proved``, ``refuted`` (with a witness) or ``unknown`` (with the reason);
``unknown`` is never success.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from cellspec.core.status import ExplainStatus, LintStatus, Status

# the words of the robust check (core.status); explain and lint keep their own words
# ("explained", "consistent", "inconsistent"), which their JSON has always used
ROBUST_STATUSES = frozenset({Status.PROVED, Status.REFUTED, Status.UNKNOWN})


class RobustResult(BaseModel):
    """Does the verdict of a layout hold for every placement error up to ``tolerance``?"""

    model_config = ConfigDict(frozen=True)
    status: Status
    tolerance: float  # metres, what was decided: ``steps`` grid steps (the asked one rounded up)
    steps: int  # the tolerance in 0.1 mm grid steps (what was proved)
    requested: float | None = None  # metres, as asked (when it differs from ``tolerance``)
    verdict: Literal[Status.PASS, Status.FAIL, Status.UNKNOWN]  # the nominal verdict
    witness: dict[str, Any] | None = None  # displaced layout (layout JSON) that changes it
    rule: str | None = None  # the rule that breaks at the witness (nominal pass)
    parts: tuple[str, ...] = ()  # its parts
    displacement: dict[str, list[float]] = {}  # part -> [dx, dy] metres (moved parts only)
    witness_verdict: dict[str, Any] | None = None  # the clingo verdict of the witness
    reason: str | None = None
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    stats: dict[str, float] = {}

    @model_validator(mode="after")
    def _consistent(self) -> RobustResult:
        if self.status not in ROBUST_STATUSES:
            raise ValueError(f"a robust check is proved, refuted or unknown, not {self.status}")
        if self.status == Status.REFUTED and self.witness is None:
            raise ValueError("a refuted robust check needs a witness layout")
        if self.status != Status.REFUTED and self.witness is not None:
            raise ValueError("only a refuted robust check carries a witness")
        if self.status == Status.UNKNOWN and not self.reason:
            raise ValueError("an unknown robust check must say why")
        if self.status == Status.PROVED and self.verdict == Status.UNKNOWN:
            raise ValueError("an unknown verdict cannot be proved robust")
        if self.tolerance < 0 or self.steps < 0:
            raise ValueError("tolerance must not be negative")
        return self

    @property
    def ok(self) -> bool:
        """A robust pass: the only outcome that is success."""
        return self.status == Status.PROVED and self.verdict == Status.PASS

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"status": str(self.status), "tolerance": self.tolerance,
                               "witness": self.witness, "rule": self.rule}
        if self.requested is not None and self.requested != self.tolerance:
            out["requested"] = self.requested
        if self.parts:
            out["parts"] = list(self.parts)
        if self.displacement:
            out["displacement"] = self.displacement
        if self.reason:
            out["reason"] = self.reason
        if self.notes:
            out["notes"] = list(self.notes)
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out


class RuleRef(BaseModel):
    model_config = ConfigDict(frozen=True)
    rule: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "source": self.source}


class Cause(BaseModel):
    """One failing core: rules and parts that alone already fail, and what they violate."""

    model_config = ConfigDict(frozen=True)
    rules: tuple[RuleRef, ...]
    parts: tuple[str, ...]
    violations: tuple[dict[str, Any], ...]
    minimal: bool

    def to_json(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules], "parts": list(self.parts),
                "violations": list(self.violations), "minimal": self.minimal}


class Explanation(BaseModel):
    """A minimal subset of rules and parts that alone already fails (an MUS)."""

    model_config = ConfigDict(frozen=True)
    status: ExplainStatus
    rules: tuple[RuleRef, ...] = ()
    parts: tuple[str, ...] = ()
    violations: tuple[dict[str, Any], ...] = ()  # of the sub-layout, re-checked by clingo
    total_violations: int = 0  # of the full layout
    minimal: bool = False  # deletion-minimised (every element is needed)
    causes: tuple[Cause, ...] = ()  # the first is (rules, parts, violations); then disjoint ones
    reason: str | None = None
    seconds: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> Explanation:
        if self.causes and (self.causes[0].parts != self.parts
                            or self.causes[0].rules != self.rules):
            raise ValueError("the first cause is the explanation itself")
        if self.status == ExplainStatus.EXPLAINED and not (self.rules and self.violations):
            raise ValueError("an explanation names rules and the violations they cause")
        if self.status == ExplainStatus.UNKNOWN and not self.reason:
            raise ValueError("an unknown explanation must say why")
        return self

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "rules": [r.to_json() for r in self.rules],
                               "parts": list(self.parts), "violations": list(self.violations),
                               "total_violations": self.total_violations,
                               "minimal": self.minimal,
                               "causes": [c.to_json() for c in self.causes]}
        if self.reason:
            out["reason"] = self.reason
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out


class FindingKind(StrEnum):
    """What one lint finding says (``cellspec lint``'s ``kind`` word)."""

    INCONSISTENT = "inconsistent"  # a minimal set of error rules no layout satisfies
    NEVER_FIRES = "never_fires"  # an error rule no layout of the part set violates
    IMPLIED = "implied"  # an error rule the others imply (redundant)
    UNKNOWN = "unknown"  # not decided (a limit)
    PREFERENCE_NEVER_MET = "preference_never_met"  # no layout meets the preference
    PREFERENCE_CONFLICT = "preference_conflict"  # the preference conflicts with error rules


class LintFinding(BaseModel):
    """One finding of ``cellspec lint``: its kind, the words and the rules it concerns."""

    model_config = ConfigDict(frozen=True)
    kind: FindingKind
    message: str
    rules: tuple[RuleRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message,
                "rules": [r.to_json() for r in self.rules]}


class LintReport(BaseModel):
    """Lint of one cell for one part set."""

    model_config = ConfigDict(frozen=True)
    cell: str
    part_set: dict[str, int]
    status: LintStatus
    findings: tuple[LintFinding, ...] = ()
    example: dict[str, Any] | None = None  # a layout satisfying every error rule (consistent)
    reason: str | None = None
    seconds: float = 0.0

    @model_validator(mode="after")
    def _consistent(self) -> LintReport:
        if self.status == LintStatus.INCONSISTENT and not any(f.kind == FindingKind.INCONSISTENT
                                                     for f in self.findings):
            raise ValueError("an inconsistent cell needs a conflict set")
        if self.status == LintStatus.UNKNOWN and not self.reason:
            raise ValueError("an unknown lint must say why")
        if (self.example is not None) != (self.status == LintStatus.CONSISTENT):
            raise ValueError("a consistent cell comes with an example layout, only then")
        return self

    @property
    def clean(self) -> bool:
        return self.status == LintStatus.CONSISTENT and not self.findings

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"cell": self.cell, "parts": self.part_set, "status": self.status,
                               "findings": [f.to_json() for f in self.findings],
                               "example": self.example}
        if self.reason:
            out["reason"] = self.reason
        if timing:
            out["seconds"] = round(self.seconds, 4)
        return out
