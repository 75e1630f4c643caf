"""The preference score (docs/language.md, Preferences): what a layout's unmet preferences
cost against the weight of every binding of the preferences' outer forall variables.

One definition for every verb: each binding of a preference rule's outer forall variables
(:func:`cellspec.core.ir.top_domains`) under which its body is false costs the rule's
``weight``; ``total`` is the sum over the preference rules of ``weight`` times the number of
bindings of those variables (1 for a rule with no outer forall), ``met`` is ``total`` minus
the cost of the violated bindings (every one, listed or not).

The bindings counted are the ones the backends evaluate (cellspec/solver/reference.py):
the outer chain binds distinct parts, ``forall p, q`` ordered pairs, ``forall {p, q}``
unordered pairs (each once), keep-out and robot variables range over every zone or robot.
On ``n`` parts that is ``n`` for ``forall p``, ``n (n - 1)`` for ``forall p, q`` and
``n (n - 1) / 2`` for ``forall {p, q}``: a binding that does not exist (``p`` = ``q``) is
never counted, so a fully violated preference scores 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import comb, perm

from cellspec.core import ir
from cellspec.core.severity import Severity
from cellspec.dsl.model import Rule
from cellspec.solver.result import PreferenceScore


def is_preference(rule: Rule) -> bool:
    """True for a ``severity preference`` rule (never fails a verdict; scored instead)."""
    return rule.severity == Severity.PREFERENCE


def bindings(rule: Rule, parts: int, keepouts: int, robots: int) -> int:
    """How many bindings of the rule's outer forall variables a layout of ``parts`` parts
    has in a cell of ``keepouts`` keep-out zones and ``robots`` robots (1 with none)."""
    chain, _ = ir.top_foralls(rule.body)
    count, bound = 1, 0
    for q in chain:
        k = len(q.vars)
        if q.domain == "part":
            left = max(parts - bound, 0)
            count *= comb(left, k) if q.unordered else perm(left, k)
            bound += k
        else:
            count *= (keepouts if q.domain == "keepout" else robots) ** k
    return count


def total_weight(rules: Iterable[Rule], parts: int, keepouts: int, robots: int) -> int:
    """The weight of every binding of the preference rules among ``rules``."""
    return sum(r.weight * bindings(r, parts, keepouts, robots)
               for r in rules if is_preference(r))


def score(rules: Sequence[Rule], found: Iterable[tuple[int, tuple]], parts: int,
          keepouts: int, robots: int) -> PreferenceScore | None:
    """The score of a checked layout: ``found`` holds a backend's (rule index into
    ``rules``, binding) pairs, every violated binding once; None when ``rules`` has no
    preference."""
    if not any(is_preference(r) for r in rules):
        return None
    unmet = sum(rules[k].weight for k, _ in found if is_preference(rules[k]))
    total = total_weight(rules, parts, keepouts, robots)
    return PreferenceScore(met=total - unmet, total=total)
