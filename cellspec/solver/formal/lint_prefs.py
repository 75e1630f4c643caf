"""Lint of a cell's preferences (``cellspec lint``), on the Z3 problem :mod:`lint` builds:
a preference no layout of the part set meets in full (every layout violates it for some
binding), and one that the error rules rule out (every layout meeting the error rules
violates it: the error wins, so the preference's weight is never all met).

Kept apart from :func:`cellspec.solver.formal.lint.lint`, which calls
:func:`preference_findings` once the error rules are known to be consistent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cellspec.core.severity import Severity
from cellspec.dsl.model import Rule
from cellspec.solver.formal.common import deletion_mus
from cellspec.solver.smt.result import FindingKind, LintFinding, RuleRef


def preference_findings(solver: Any, rules: Sequence[Rule], holds: Sequence[Any],
                        errors: Sequence[int], what: str, ref: Callable[[int], RuleRef]
                        ) -> tuple[list[LintFinding], list[str]]:
    """(findings, undecided questions) for the preference rules among ``rules``.
    ``holds[k]``: a Z3 literal implying rule k holds for every binding (an assumption of
    ``solver``); ``errors``: the indices of the error rules; ``what``: the part set in
    words; ``ref``: a rule's reference by index."""
    import z3  # lazy: z3 only when a proof runs

    findings: list[LintFinding] = []
    open_: list[str] = []
    label = {holds[j].get_id(): j for j in errors}
    for k, r in enumerate(rules):
        if r.severity != Severity.PREFERENCE:
            continue
        alone = solver.check(holds[k])
        if alone == z3.unsat:
            findings.append(LintFinding(
                kind=FindingKind.PREFERENCE_NEVER_MET, rules=(ref(k),),
                message=f"preference {r.name} can never be met: every layout of {what} "
                f"violates it (for some binding), whatever the other rules say"))
            continue
        if alone == z3.unknown:
            open_.append(f"whether preference {r.name} can be met")
            continue
        res = solver.check(holds[k], *[holds[j] for j in errors])
        if res == z3.unknown:
            open_.append(f"whether preference {r.name} can be met with the error rules")
            continue
        if res == z3.sat:
            continue
        core, minimal = deletion_mus(solver, list(solver.unsat_core()))
        ks = sorted(label[c.get_id()] for c in core if c.get_id() in label)
        names = ", ".join(rules[j].name for j in ks)
        word = "" if minimal else " (not proved minimal: a time limit was hit)"
        findings.append(LintFinding(
            kind=FindingKind.PREFERENCE_CONFLICT, rules=(ref(k), *(ref(j) for j in ks)),
            message=f"preference {r.name} conflicts with the error rule(s) {names}{word}: "
            f"every layout of {what} that meets them violates it; the error rules win, "
            f"so its weight is never all met"))
    return findings, open_
