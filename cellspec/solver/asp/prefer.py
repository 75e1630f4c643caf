"""Preference scores with clingo: the violated weight of a layout (the check backend's
count), and a proof of the least violated weight a cell admits (``#minimize``).

The score (shared with ``check``): every binding of a preference rule's outer forall
variables under which its body is false costs the rule's weight; ``total`` is the weight
of every binding; ``met = total - violated``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout


@dataclass(frozen=True)
class Score:
    """A layout's preference score: weight met of the total, the violated bindings per rule
    (rule name -> count), or ``unknown`` with the reason when the backend hit a limit."""

    met: int
    total: int
    violated: dict[str, int]
    unknown: str | None = None


def preference_rules(cell: Cell) -> list[Rule]:
    """The cell's preference rules, in the order written."""
    return [r for r in cell.rules if r.severity == "preference"]


def preference_cost(cell: Cell, layout: Layout, *, backend: str = "clingo",
                    timeout: float | None = None) -> Score:
    """The violated weight of ``layout`` (as a :class:`Score`), counted by a check backend
    (clingo by default; ``reference`` for the brute-force oracle): every violating binding,
    none capped. The one place the solver layer computes a layout's score."""
    from cellspec.solver import checkers
    from cellspec.solver.cpsat.prefer import binding_count
    from cellspec.solver.instance import build_instance

    rules = preference_rules(cell)
    inst = build_instance(cell, layout)
    total = sum(r.weight * binding_count(r, inst.n, len(inst.keepouts), len(inst.robots))
                for r in rules)
    if not rules:
        return Score(0, 0, {})
    chk = checkers.get(backend)
    refused = chk.supported(rules)
    if refused:
        return Score(0, total, {}, unknown="; ".join(r.sentence() for r in refused))
    res = chk.violations(inst, rules, timeout)
    if res.status != "done":
        return Score(0, total, {}, unknown=res.reason or "solver limit")
    violated: dict[str, int] = {}
    cost = 0
    for k, _binding in res.violations:
        violated[rules[k].name] = violated.get(rules[k].name, 0) + 1
        cost += rules[k].weight
    return Score(total - cost, total, violated)


def score_json(score: Score, optimal: bool, notes: list[str] | tuple[str, ...] = ()
               ) -> dict[str, Any]:
    """The ``"preferences"`` object of generate, design and repair: met, total, whether the
    score is proved optimal (and the notes saying why not, when there are any)."""
    out: dict[str, Any] = {"met": score.met, "total": score.total,
                           "optimal": bool(optimal and score.unknown is None)}
    why = list(notes) + ([f"the score could not be counted: {score.unknown}"]
                         if score.unknown else [])
    if why:
        out["notes"] = why
    return out


def score_line(prefs: dict[str, Any]) -> str:
    """The pretty line: ``preferences: 9 of 12 weight met (optimal)``."""
    how = "optimal" if prefs["optimal"] else "best found"
    return f"preferences: {prefs['met']} of {prefs['total']} weight met ({how})"


__all__ = ["Score", "preference_cost", "preference_rules", "score_json", "score_line"]
