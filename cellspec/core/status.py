"""The one status vocabulary of every verb and backend, and the reasons a run ends in
``unknown``: string enums, so JSON and text outputs keep the exact words they always had."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """What a run decided. ``unknown`` is never a pass and always carries a :class:`Reason`."""

    PASS = "pass"  # check: every rule holds
    FAIL = "fail"  # check: some rule is violated (the violations say which)
    PROVED = "proved"  # formal: the property holds for every layout in scope
    REFUTED = "refuted"  # formal: a counterexample exists (it is printed)
    OPTIMAL = "optimal"  # repair/generate/plan: the best answer, proved best
    FEASIBLE = "feasible"  # repair/generate/plan: a verified answer, not proved best
    INFEASIBLE = "infeasible"  # repair/generate/plan: proved that no answer exists
    UNKNOWN = "unknown"  # a limit, a refusal or an internal error stopped the run


VERDICTS = frozenset({Status.PASS, Status.FAIL, Status.UNKNOWN})  # check's words
SOLVED = frozenset({Status.OPTIMAL, Status.FEASIBLE, Status.INFEASIBLE, Status.UNKNOWN})
FOUND = frozenset({Status.OPTIMAL, Status.FEASIBLE})  # repair/generate/plan found an answer


class BackendStatus(StrEnum):
    """A backend's raw run (before ``verify`` makes it a verdict): every violation found, or
    stopped by a limit (then with a :class:`Reason`)."""

    DONE = "done"
    UNKNOWN = "unknown"


class ExplainStatus(StrEnum):
    """What ``explain`` found: a minimal failing core, nothing to explain, or a limit."""

    EXPLAINED = "explained"
    PASS = "pass"
    UNKNOWN = "unknown"


class LintStatus(StrEnum):
    """What ``lint`` decided about a cell's error rules for one part set."""

    CONSISTENT = "consistent"
    INCONSISTENT = "inconsistent"
    UNKNOWN = "unknown"


class PhaseStatus(StrEnum):
    """How one phase of the design orchestrator ended (its trace's words)."""

    OK = "ok"
    FAIL = "fail"
    SKIPPED = "skipped"
    UNAVAILABLE = "unavailable"  # the twin or its extra is missing: not run, said so


class TestStatus(StrEnum):
    """The outcome of one rule-file test (``cellspec test``, the language server's lens)."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    FAILED = "failed"


class Reason(StrEnum):
    """Why a run ended ``unknown``; :data:`SENTENCES` gives the human sentence beside it."""

    TIME_LIMIT = "time limit"
    GROUNDING_LIMIT = "grounding limit"
    DENSITY_LIMIT = "density limit"
    MEMORY_LIMIT = "memory limit"
    UNSUPPORTED = "unsupported"
    ROUNDING = "rounding"
    SOLVER_FAILURE = "solver failure"
    INTERNAL_ERROR = "internal error"


SENTENCES: dict[Reason, str] = {
    Reason.TIME_LIMIT: "the time limit was reached before the solver decided",
    Reason.GROUNDING_LIMIT: "the problem would ground to more than the solver is allowed",
    Reason.DENSITY_LIMIT: "the layout is denser than the backend can decide exactly",
    Reason.MEMORY_LIMIT: "the run would exceed its memory budget",
    Reason.UNSUPPORTED: "the backend cannot decide a rule exactly and refuses it",
    Reason.ROUNDING: "the 0.1 mm grid and the exact positions disagree on a relation the "
    "rules read",
    Reason.SOLVER_FAILURE: "a solver stopped without an answer, however it was retried (a "
    "numerical failure such as the LP solver's ABNORMAL)",
    Reason.INTERNAL_ERROR: "an internal error of cellspec or a solver (please report it)",
}

# Exit codes (docs/architecture.md): 0 pass/proved/optimal/feasible, 1 fail/refuted/infeasible,
# 2 bad input or unknown, 3 internal error (never reported as bad input).
EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3

_EXIT = {Status.PASS: EXIT_OK, Status.PROVED: EXIT_OK, Status.OPTIMAL: EXIT_OK,
         Status.FEASIBLE: EXIT_OK, Status.FAIL: EXIT_FAIL, Status.REFUTED: EXIT_FAIL,
         Status.INFEASIBLE: EXIT_FAIL, Status.UNKNOWN: EXIT_INPUT}


def exit_code(status: Status | str, reason: Reason | str | None = None) -> int:
    """The process exit code of a run that ended with ``status`` (and ``reason`` when
    unknown): an internal error is exit 3, every other unknown exit 2."""
    if Status(status) is Status.UNKNOWN and reason is not None and (
            str(reason) == Reason.INTERNAL_ERROR or str(reason).startswith("internal error")):
        return EXIT_INTERNAL
    return _EXIT[Status(status)]


class SolverLimit(Exception):
    """The root of every solver limit and refusal (time, grounding, density, memory, a rule
    or shape a backend cannot decide): the run ends ``unknown`` with :attr:`reason`, never
    ``pass``. Each subclass declares its reason (a class attribute) or is given one, so a
    caller turns any of them into ``unknown`` the same way, with no mapping of its own."""

    reason: Reason

    def __init__(self, message: str = "", reason: Reason | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        elif not isinstance(getattr(self, "reason", None), Reason):
            raise TypeError(f"{type(self).__name__} needs a reason (a Reason)")


class InternalError(RuntimeError):
    """A bug of cellspec or a solver (not the user's input): reported with exit code 3."""
