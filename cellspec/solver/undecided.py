"""A check whose stability analysis leaves a structure undecided still reports what is known
(issue 28): the violations that hold whatever that structure does, and a note naming it.

:func:`violations` runs a backend with a *tolerant* stability report
(:mod:`cellspec.solver.stability`: a structure whose LP hits a limit is recorded as
:class:`~cellspec.solver.stability.UndecidedStructure` and its parts count as standing). Rules that
do not read ``stable`` or ``placed_stable`` are unaffected. For rules that do, the backend
runs a second time with the undecided parts counted as falling, and only the violations
found both times are kept: they do not depend on what the undecided structures do (for
``forall p: stable(p)`` these are the decided structures' failures). ``check`` then
answers ``fail`` when a violation remains (exit 1, the structures named in a note), else
``unknown`` with the limit's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from cellspec.core.status import BackendStatus
from cellspec.dsl.model import Rule
from cellspec.solver import checkers, stability
from cellspec.solver.instance import Instance

STABILITY_RELATIONS = ("relation stable", "relation placed_stable")
MAX_NOTES = 3  # undecided structures named one by one; the rest are counted


def violations(checker: checkers.Checker, inst: Instance, rules: Sequence[Rule],
               timeout: float | None) -> tuple[checkers.CheckerResult,
                                               tuple[stability.UndecidedStructure, ...]]:
    """The backend's result on ``inst`` (the violations certain whatever an undecided
    structure does) and the undecided structures (empty: everything decided)."""
    inst.derived.stability_tolerant = True
    try:
        res = checker.violations(inst, rules, timeout)
    except stability.StabilityLimit as exc:  # raised outside a structure (not tolerant)
        return checkers.CheckerResult(BackendStatus.UNKNOWN, reason=f"stability limit: {exc}",
                                      reason_code=exc.reason), ()
    rep = inst.derived.stability_report
    if rep is None or res.status != BackendStatus.DONE or not rep.undecided:
        return res, rep.undecided if rep is not None else ()
    undecided = rep.undecided
    reads = {k for k, r in enumerate(rules)
             if any(f in STABILITY_RELATIONS for f in checkers.features_of(r))}
    if not any(k in reads for k, _ in res.violations):
        return res, undecided
    falls = np.zeros(inst.n, dtype=bool)
    for u in undecided:
        falls[list(u.parts)] = True
    placed = None if rep.placed_stable is None else rep.placed_stable & ~falls
    # the same layout with the undecided parts counted as falling: a fresh instance whose
    # derived report says so (``inst`` keeps its own)
    falling = replace(inst)
    falling.derived.stability_tolerant = True
    falling.derived.stability_report = replace(rep, stable=rep.stable & ~falls,
                                               placed_stable=placed)
    other = checker.violations(falling, rules, timeout)
    if other.status != BackendStatus.DONE:
        return other, undecided
    both = set(other.violations)
    kept = tuple(v for v in res.violations if v[0] not in reads or v in both)
    return checkers.CheckerResult(BackendStatus.DONE, kept), undecided


def notes(undecided: Sequence[stability.UndecidedStructure], ids: tuple[str, ...]) -> list[str]:
    """The notes naming the undecided structures (the first MAX_NOTES, then a count)."""
    out = [f"stability: {u.text(ids)}; the violations listed hold whatever it does"
           for u in undecided[:MAX_NOTES]]
    if len(undecided) > MAX_NOTES:
        out.append(f"stability: {len(undecided) - MAX_NOTES} more structures are undecided")
    return out


def reason(undecided: Sequence[stability.UndecidedStructure], ids: tuple[str, ...]) -> str:
    """The ``unknown`` sentence when nothing else fails: the first undecided structure."""
    more = len(undecided) - 1
    tail = f" ({more} more structure{'s' if more != 1 else ''} undecided)" if more else ""
    return f"stability limit: {undecided[0].text(ids)}{tail}"
