"""Verdicts: frozen, JSON-serialisable results whose invariants really run (their status
words are :class:`cellspec.core.status.Status`, an ``unknown`` names its :class:`Reason`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from cellspec.core.severity import Severity
from cellspec.core.status import Reason, Status

VERDICTS = frozenset({Status.PASS, Status.FAIL, Status.UNKNOWN})


class Violation(BaseModel):
    """One violated rule: its name, the parts involved, an explanation and where it is written."""

    model_config = ConfigDict(frozen=True)
    rule: str
    parts: tuple[str, ...]
    message: str
    source: str
    severity: Severity = Severity.ERROR
    zones: tuple[str, ...] = ()
    weight: int = 1  # an unmet preference's cost (its rule's weight); 1 otherwise

    def to_json(self) -> dict[str, Any]:
        """The violation object (docs/formats.md) (rule, parts, message, source; and the
        weight of an unmet preference)."""
        out: dict[str, Any] = {"rule": self.rule, "parts": list(self.parts),
                               "message": self.message, "source": self.source}
        if self.severity == Severity.PREFERENCE:
            out["weight"] = self.weight
        return out


class PreferenceScore(BaseModel):
    """The weight of the preferences a layout meets (docs/language.md, Preferences): each
    binding of a preference's outer forall variables costs its weight when the body is
    false; ``total`` is the weight of every binding, ``met`` what is left after the unmet
    ones (all of them, listed or not). ``met`` is None when the check could not decide it
    (``reason`` says why: a preference reads an undecided structure or grid rounding)."""

    model_config = ConfigDict(frozen=True)
    met: int | None
    total: int
    reason: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PreferenceScore:
        if self.met is not None and not 0 <= self.met <= self.total:
            raise ValueError(f"a preference score needs 0 <= met <= total, not {self.met} of "
                             f"{self.total}")
        if (self.met is None) != (self.reason is not None):
            raise ValueError("an undecided preference score says why, and only then")
        return self

    @property
    def decided(self) -> bool:
        return self.met is not None

    @property
    def unmet(self) -> int | None:
        """The weight of the unmet bindings (None: undecided)."""
        return None if self.met is None else self.total - self.met

    def to_json(self, unmet: tuple[Violation, ...]) -> dict[str, Any]:
        """The verdict's ``preferences`` object (docs/formats.md)."""
        out: dict[str, Any] = {"met": self.met, "total": self.total,
                               "unmet": [v.to_json() for v in unmet]}
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    def sentence(self) -> str:
        """``preferences: 9 of 12 weight met`` (or why it is not decided)."""
        if self.met is None:
            return f"preferences: not decided ({self.total} weight in all): {self.reason}"
        return f"preferences: {self.met} of {self.total} weight met"


class Verdict(BaseModel):
    """pass, fail or unknown; unknown is never a pass and says why (``reason``: the human
    sentence, ``reason_code``: the :class:`Reason` when the backend named one)."""

    model_config = ConfigDict(frozen=True)
    verdict: Status
    violations: tuple[Violation, ...] = ()
    warnings: tuple[Violation, ...] = ()
    # unmet preferences (never part of pass/fail), listed like warnings, and their score:
    # None when the cell has no preference or the check stopped before evaluating the rules
    preferences: tuple[Violation, ...] = ()
    preference_score: PreferenceScore | None = None
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
        if any(v.severity != Severity.ERROR for v in self.violations):
            raise ValueError("violations must all be errors; warnings go in `warnings`")
        if any(v.severity != Severity.WARNING for v in self.warnings):
            raise ValueError("warnings must all be warnings; preferences go in `preferences`")
        if any(v.severity != Severity.PREFERENCE for v in self.preferences):
            raise ValueError("`preferences` lists unmet preferences only")
        sc = self.preference_score
        unmet = None if sc is None else sc.unmet
        if unmet is not None and unmet < sum(v.weight for v in self.preferences):
            raise ValueError("the listed unmet preferences weigh more than the score's unmet "
                             "weight")
        if unmet is not None and (unmet == 0) != (not self.preferences):
            raise ValueError("a preference score below its total lists an unmet preference, "
                             "and only then")
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
        }
        if self.preference_score is not None:  # only for a cell with preferences
            out["preferences"] = self.preference_score.to_json(self.preferences)
        out["stats"] = stats
        if self.notes:
            out["notes"] = list(self.notes)
        if self.skipped_rules:
            out["skipped_rules"] = list(self.skipped_rules)
        if self.reason:
            out["reason"] = self.reason
        if self.reason_code is not None:
            out["reason_code"] = str(self.reason_code)
        return out
