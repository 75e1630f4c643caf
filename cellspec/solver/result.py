"""Verdicts: frozen, JSON-serialisable results whose invariants really run (their status
words are :class:`cellspec.core.status.Status`, an ``unknown`` names its :class:`Reason`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from cellspec.core.status import Reason, Status

VERDICTS = frozenset({Status.PASS, Status.FAIL, Status.UNKNOWN})


class Violation(BaseModel):
    """One violated rule: its name, the parts involved, an explanation and where it is written."""

    model_config = ConfigDict(frozen=True)
    rule: str
    parts: tuple[str, ...]
    message: str
    source: str
    severity: Literal["error", "warning", "preference"] = "error"
    zones: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The violation object (docs/formats.md) (rule, parts, message, source)."""
        return {"rule": self.rule, "parts": list(self.parts), "message": self.message,
                "source": self.source}


class Verdict(BaseModel):
    """pass, fail or unknown; unknown is never a pass and says why (``reason``: the human
    sentence, ``reason_code``: the :class:`Reason` when the backend named one)."""

    model_config = ConfigDict(frozen=True)
    verdict: Status
    violations: tuple[Violation, ...] = ()
    warnings: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = ()
    reason: str | None = None
    reason_code: Reason | None = None
    parts: int = 0
    seconds: float = 0.0
    backend: str = "clingo"
    skipped_rules: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.verdict not in VERDICTS:
            raise ValueError(f"a verdict is pass, fail or unknown, not {self.verdict}")
        if any(v.severity != "error" for v in self.violations):
            raise ValueError("violations must all be errors; warnings go in `warnings`")
        if self.verdict == Status.PASS and self.violations:
            raise ValueError("a pass verdict cannot carry violations")
        if self.verdict == Status.FAIL and not self.violations:
            raise ValueError("a fail verdict needs at least one violation")
        if self.verdict == Status.UNKNOWN and not self.reason:
            raise ValueError("an unknown verdict must say why")
        if self.reason_code is not None and self.verdict != Status.UNKNOWN:
            raise ValueError("only an unknown verdict carries a reason code")
        return self

    @property
    def ok(self) -> bool:
        return self.verdict == Status.PASS

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        """The verdict object (docs/formats.md), plus warnings, notes and the reason for unknown."""
        stats: dict[str, Any] = {"parts": self.parts, "backend": self.backend}
        if timing:
            stats["seconds"] = round(self.seconds, 4)
        out: dict[str, Any] = {
            "verdict": str(self.verdict),
            "violations": [v.to_json() for v in self.violations],
            "warnings": [v.to_json() for v in self.warnings],
            "stats": stats,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.skipped_rules:
            out["skipped_rules"] = list(self.skipped_rules)
        if self.reason:
            out["reason"] = self.reason
        if self.reason_code is not None:
            out["reason_code"] = str(self.reason_code)
        return out
