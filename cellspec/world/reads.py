"""Which relations an action's commit condition and the cell's diagnosis rules actually read
(the ground truth of the context benchmark, bench/world_context.py).

* **Commit conditions** read measures and force events only (``m/2``, ``thr/2``,
  ``event/1`` in ``commit.lp``/``events.lp``): no relation. :func:`commit_reads` derives
  that from the condition's term tree and says which measures it reads.
* **Diagnosis rules** read relations through ``missing(REL, A, B)`` and
  ``unexpected(REL, A, B)``. :func:`diagnose_reads` instruments the cell's own lowered
  rules (:func:`cellspec.world.rules.diagnose_bodies`) and runs them with clingo on the
  action's Δ: for every relation literal of an alternative, a rule
  ``read(K, KIND, REL, A, B) :- <the alternative's positive literals>`` — the ground
  instances clingo builds, i.e. the relation atoms a rule consults once its positive body
  matched (a negated literal is read too: the rule asks whether that relation went
  missing). A negated literal's argument that the positive body does not bind reads every
  relation of that shape (``*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cellspec.dsl.model import Cell
from cellspec.world.db import WorldRelation
from cellspec.world.rules import (
    TIME_LIMIT_S,
    _lp,
    _measures_of,
    _solve,
    _thr_facts,
    commit_rule,
    diagnose_bodies,
    literals,
)

if TYPE_CHECKING:
    from clingo import Symbol

REL_PREDS = ("missing", "unexpected")
ANY = "*"


@dataclass(frozen=True)
class Read:
    """One relation atom a diagnose rule read: rule index, missing|unexpected, relation
    (an argument may be ``*``: every entity)."""

    rule: int
    kind: str
    rel: WorldRelation

    def matches(self, r: WorldRelation) -> bool:
        """Whether a graph relation is the one read (``*`` matches any entity)."""
        return (r.rel == self.rel.rel and self.rel.a in (ANY, r.a)
                and self.rel.b in (ANY, r.b))


def commit_reads(cell: Cell, action: str) -> tuple[tuple[WorldRelation, ...], tuple[str, ...]]:
    """(relations read, measures read) by the commit condition of an action kind: a commit
    condition is written over measures and events only, so the relations are none."""
    rule = commit_rule(cell, action)
    conj = literals(rule.body) if rule.body[0] == "and" else [rule.body]
    meas: set[str] = set()
    for c in conj:
        meas |= _measures_of(c)
    return (), tuple(sorted(meas))


def _bound(body: list[tuple[bool, str, Any]]) -> set[str]:
    """The ASP variables a body's positive literals bind."""
    out: set[str] = set()
    for neg, text, _ in body:
        if neg:
            continue
        for tok in text.replace("(", " ").replace(")", " ").replace(",", " ").split():
            if tok.startswith(("V_", "D_")):
                out.add(tok)
    return out


def read_program(cell: Cell) -> str:
    """The instrumented rules: one ``read/5`` rule per relation literal of each alternative."""
    lines = []
    for k, _head, body in diagnose_bodies(cell):
        pos = [t for neg, t, _ in body if not neg]
        bound = _bound(body)
        for j, (neg, text, lit) in enumerate(body):
            if lit[0] != "call" or lit[1] not in REL_PREDS:
                continue
            inner = text[text.index("(") + 1:-1]
            rel, a, b = (x.strip() for x in inner.split(","))
            args = []
            atom_args = [rel]
            for n, x in enumerate((a, b)):
                if x == "_" and not neg:
                    v = f"W_{j}_{n}"
                    args.append(v)
                    atom_args.append(v)
                elif x == "_" or (x.startswith("V_") and x not in bound):
                    args.append(f'"{ANY}"')
                    atom_args.append(x)
                else:
                    args.append(x)
                    atom_args.append(x)
            body_txt = list(pos)
            if not neg:
                body_txt[pos.index(text)] = f"{lit[1]}({', '.join(atom_args)})"
            head = f"read({k}, {lit[1]}, {rel}, {args[0]}, {args[1]})"
            lines.append(f"{head} :- {', '.join(body_txt)}." if body_txt else f"{head}.")
    lines.append("#show read/5.")
    return "\n".join(lines)


def diagnose_reads(cell: Cell, facts: str, timeout: float | None = TIME_LIMIT_S
                   ) -> tuple[Read, ...]:
    """The relation atoms the cell's diagnose rules read on one Δ (its clingo facts,
    :meth:`cellspec.world.discrepancy.Delta.facts`), sorted."""
    prog = "\n".join([_thr_facts(cell), facts, read_program(cell)])
    atoms = _solve([_lp("events"), prog], timeout, f"the diagnose rules of {cell.path} "
                   "(instrumented)")
    out = set()
    for a in atoms:
        if a.name != "read":
            continue
        k, kind, rel, x, y = a.arguments
        def s(t: Symbol) -> str:
            return t.string if t.type.name == "String" else str(t)
        out.add(Read(k.number, str(kind), WorldRelation(str(rel), s(x), s(y))))
    return tuple(sorted(out, key=lambda r: (r.rule, r.kind, r.rel.rel, r.rel.a, r.rel.b)))
