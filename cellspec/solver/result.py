"""Verdicts: frozen, JSON-serialisable results whose invariants really run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator


class Violation(BaseModel):
    """One violated rule: its name, the parts involved, an explanation and where it is written."""

    model_config = ConfigDict(frozen=True)
    rule: str
    parts: tuple[str, ...]
    message: str
    source: str
    severity: Literal["error", "warning"] = "error"
    zones: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The DESIGN.md violation object (rule, parts, message, source)."""
        return {"rule": self.rule, "parts": list(self.parts), "message": self.message,
                "source": self.source}


class Verdict(BaseModel):
    """pass, fail or unknown; unknown is never a pass."""

    model_config = ConfigDict(frozen=True)
    verdict: Literal["pass", "fail", "unknown"]
    violations: tuple[Violation, ...] = ()
    warnings: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = ()
    reason: str | None = None
    parts: int = 0
    seconds: float = 0.0
    backend: str = "clingo"
    skipped_rules: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if any(v.severity != "error" for v in self.violations):
            raise ValueError("violations must all be errors; warnings go in `warnings`")
        if self.verdict == "pass" and self.violations:
            raise ValueError("a pass verdict cannot carry violations")
        if self.verdict == "fail" and not self.violations:
            raise ValueError("a fail verdict needs at least one violation")
        if self.verdict == "unknown" and not self.reason:
            raise ValueError("an unknown verdict must say why")
        return self

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        """The DESIGN.md verdict object, plus warnings, notes and the reason for unknown."""
        stats: dict[str, Any] = {"parts": self.parts, "backend": self.backend}
        if timing:
            stats["seconds"] = round(self.seconds, 4)
        out: dict[str, Any] = {
            "verdict": self.verdict,
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
        return out
