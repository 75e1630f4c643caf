"""Commit conditions and diagnosis rules decided: the term trees the DSL builds
(cellspec/dsl/world.py) are lowered to ASP and solved with clingo; nothing is decided in
Python.

The fixed part of each program is package data next to this module (``events.lp``,
``commit.lp``, ``diagnose.lp``, each with a header naming its input and output
predicates); the rule-specific part (one ``t/1`` rule per node of a commit condition, one
``cause/2`` rule per diagnose pattern) and the facts are written here. Every program is
run by the one clingo runner (cellspec/solver/asp/backend.py) under a time limit: when it
is reached the result is ``unknown`` (:class:`Undecided`, exit 2), never a commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib import resources
from typing import Any

from cellspec.core.errors import CellspecError
from cellspec.core.status import InternalError, Reason, SolverLimit
from cellspec.dsl.model import Cell, Source, WorldRule
from cellspec.dsl.world import (
    ACTIONS,
    DIAG_PREDS,
    EVENTS,
    FORCES,
    MEASURES,
    RECOVERIES,
    build_world,
    disjuncts,
    is_var,
    literals,
    show,
)
from cellspec.solver.asp.backend import solve_program

DEFAULT_FORCES = {"grasp": (Fraction(5), None), "collision": (Fraction(15), None),
                  "contact": (Fraction(10), Fraction(1, 2))}
# the programs are small and fixed in size (a commit condition over ten measures, a
# diagnose table over one action's discrepancy): far below a second; the limit guards a bug
TIME_LIMIT_S = 10.0


class Undecided(CellspecError, SolverLimit):
    """clingo did not decide a world rule within its time limit: ``unknown`` (exit 2)."""

    reason = Reason.TIME_LIMIT

    def __init__(self, what: str, message: str, reason: Reason = Reason.TIME_LIMIT):
        super().__init__(f"unknown ({reason}): {what}: {message}")
        self.reason = reason


@cache
def _lp(name: str) -> str:
    """A fixed program of the package (``events``, ``commit``, ``diagnose``)."""
    return resources.files("cellspec.world").joinpath(f"{name}.lp").read_text("utf-8")


# -- lowering to ASP -------------------------------------------------------------------
def force_thresholds(cell: Cell) -> dict[str, tuple[Fraction, Fraction | None]]:
    """Each force threshold (N) with its duration (s): the cell's, else the default."""
    out = dict(DEFAULT_FORCES)
    for name, f in cell.world.forces.items():
        out[name] = (f.value, f.duration if f.duration is not None else
                     (DEFAULT_FORCES[name][1] if name == "contact" else None))
    return out


def _thr_facts(cell: Cell) -> str:
    lines = []
    for name, (v, dur) in sorted(force_thresholds(cell).items()):
        lines.append(f"thr({name}, {round(v * 100)}).")
        if name == "contact":
            lines.append(f"dur(contact, {round((dur or 0) * 1000)}).")
    return "\n".join(lines)


def _measure_facts(measures: dict[str, float | bool]) -> str:
    out = []
    for k in sorted(measures):
        if k not in MEASURES:
            raise CellspecError(f"unknown measure '{k}' (measures: {', '.join(MEASURES)})")
        v = measures[k]
        if isinstance(v, bool):
            iv = int(v)
        else:
            fv = float(v)
            if fv != fv or fv in (float("inf"), float("-inf")):
                raise CellspecError(f"measure '{k}' is NaN or infinite")
            iv = int(round(fv * MEASURES[k][1]))
        out.append(f"m({k}, {iv}).")
    return "\n".join(out)


def _ival(measure: str, v: Fraction) -> int:
    return int(round(v * MEASURES[measure][1]))


class _Lower:
    def __init__(self, cell: Cell) -> None:
        self.n = 0
        self.lines: list[str] = []
        self.forces = force_thresholds(cell)

    def node(self, t: Any) -> int:
        self.n += 1
        me = self.n
        k = t[0]
        if k == "and":
            kids = [self.node(x) for x in t[1]]
            self.lines.append(f"t({me}) :- {', '.join(f't({c})' for c in kids)}.")
        elif k == "or":
            for x in t[1]:
                self.lines.append(f"t({me}) :- t({self.node(x)}).")
        elif k == "not":
            self.lines.append(f"t({me}) :- not t({self.node(t[1])}).")
        elif k == "bool":
            if t[1]:
                self.lines.append(f"t({me}).")
        elif k == "ref":
            self.lines.append(f"t({me}) :- m({t[1]}, V), V != 0.")
        elif k == "call":
            self.lines.append(f"t({me}) :- event({t[2][0]}).")
        elif k == "cmp":
            meas, rhs = t[2][1], t[3]
            if rhs[0] == "num":
                c = _ival(meas, rhs[1])
                self.lines.append(f"t({me}) :- m({meas}, V), V {_asp_op(t[1])} {c}.")
            else:
                self.lines.append(f"t({me}) :- m({meas}, V), thr({rhs[1]}, T), "
                                  f"V {_asp_op(t[1])} T.")
        return me


def _asp_op(op: str) -> str:
    return {"==": "=", "!=": "!="}.get(op, op)


@dataclass(frozen=True)
class CommitDecision:
    """Whether an action's commit condition holds, and which conjuncts failed."""

    action: str
    ok: bool
    failed: tuple[str, ...]
    events: tuple[str, ...]
    rule: str  # the condition as written
    source: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"action": self.action, "commit": self.ok, "failed": list(self.failed),
                "events": list(self.events), "condition": self.rule, "source": self.source}


def commit_rule(cell: Cell, action: str) -> WorldRule:
    """The commit condition of an action kind; bad input when the cell has none."""
    for r in cell.world.commits:
        if r.name == action:
            return r
    raise CellspecError(f"{cell.path}: the cell has no commit condition for '{action}': "
                        "`import diagnosis` (the standard library) or write "
                        f"`commit {action} \"...\" : ...`")


def decide_commit(cell: Cell, action: str, measures: dict[str, float | bool],
                  timeout: float | None = TIME_LIMIT_S) -> CommitDecision:
    """Decide the action's commit condition with clingo over the observed measures;
    :class:`Undecided` when clingo does not finish within ``timeout`` seconds."""
    rule = commit_rule(cell, action)
    low = _Lower(cell)
    conj = literals(rule.body)
    if rule.body[0] != "and":
        conj = [rule.body]
    ids = [low.node(c) for c in conj]
    prog = "\n".join([_thr_facts(cell), _measure_facts(measures), *low.lines,
                      *(f"conj({k}, {i})." for k, i in enumerate(ids))])
    atoms = _solve([_lp("events"), _lp("commit"), prog], timeout,
                   f"the commit condition of '{action}' ({rule.source})")
    failed = sorted(int(a.arguments[0].number) for a in atoms if a.name == "failed")
    events = sorted(str(a.arguments[0]) for a in atoms if a.name == "event")
    ok = any(a.name == "commit" for a in atoms)
    def why(t: Any) -> str:
        missing = sorted(m for m in _measures_of(t) if m not in measures)
        return show(t) + (f" (not measured: {', '.join(missing)})" if missing else "")

    return CommitDecision(action=action, ok=ok, failed=tuple(why(conj[k]) for k in failed),
                          events=tuple(events), rule=show(rule.body), source=str(rule.source))


def _measures_of(t: Any) -> set[str]:
    """The measures a commit term reads (events read theirs through the thresholds)."""
    if not isinstance(t, tuple):
        return set()
    k = t[0]
    if k in ("and", "or"):
        return set().union(*(_measures_of(x) for x in t[1]))
    if k == "not":
        return _measures_of(t[1])
    if k == "ref" and t[1] in MEASURES:
        return {t[1]}
    if k == "cmp":
        return _measures_of(t[2])
    if k == "call" and t[1] == "event":
        return {"grasp_weak": {"grasp_force"}, "collision": {"ext_force"},
                "contact": {"contact_force", "contact_time"}}.get(t[2][0], set())
    return set()


def _solve(texts: list[str], timeout: float | None, what: str) -> list[Any]:
    """The shown atoms of the program's model (the one clingo runner, with its limit)."""
    res = solve_program(texts, timeout)
    if res.satisfiable is None:
        raise Undecided(what, res.message, res.reason or Reason.TIME_LIMIT)
    if not res.satisfiable:  # the programs are stratified with no constraints: a bug
        raise InternalError(f"clingo found no model for {what}")
    return list(res.atoms)


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Finding:
    """A derived cause with its bindings, message and recovery."""

    cause: str
    args: tuple[str, ...]
    message: str
    recovery: str
    priority: int
    source: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"cause": self.cause, "objects": list(self.args), "message": self.message,
                "recovery": self.recovery, "recovery_means": RECOVERIES[self.recovery],
                "priority": self.priority, "source": self.source}


def _var(a: str) -> str:
    return "V_" + a


def _obj(a: str, surfaces: set[str]) -> str:
    if a == "_":
        return "_"
    return _var(a) if is_var(a, surfaces) else _q(a)


def diagnose_bodies(cell: Cell) -> list[tuple[int, str, list[tuple[bool, str, Any]]]]:
    """Each alternative of the cell's diagnose rules lowered to ASP: (rule index, head,
    body), the body as (negated?, ASP text, the literal) per literal, in the order written."""
    surfaces = {s.name for s in cell.surfaces} | {"table"}
    out = []
    for k, r in enumerate(cell.world.diagnoses):
        comma = "," if len(r.params) == 1 else ""
        head = f"cause({k}, ({', '.join(_var(p) for p in r.params)}{comma}))"
        for d in disjuncts(r.body):
            body: list[tuple[bool, str, Any]] = []
            dn = 0
            for lit in literals(d):
                neg = lit[0] == "not"
                if neg:
                    lit = lit[1]
                if lit[0] == "call":
                    sig = DIAG_PREDS[lit[1]]
                    args = [(_obj(a, surfaces) if kind == "obj" else a)
                            for a, kind in zip(lit[2], sig, strict=True)]
                    body.append((neg, f"{lit[1]}({', '.join(args)})", lit))
                elif lit[0] == "cmp" and lit[2][0] == "call":
                    dn += 1
                    o = _obj(lit[2][2][0], surfaces)
                    c = int(round(lit[3][1] * 10_000))
                    # (a comparison is never negated in the lowering, as before)
                    body.append((False, f"drift({o}, D_{dn}), D_{dn} {_asp_op(lit[1])} {c}",
                                 lit))
                else:
                    a = _obj(lit[2][1], surfaces)
                    b = _obj(lit[3][1], surfaces)
                    body.append((False, f"{a} {_asp_op(lit[1])} {b}", lit))
            out.append((k, head, body))
    return out


def diagnose_program(cell: Cell) -> str:
    """The ASP rules of the cell's diagnose table (one `cause(K, (args))` head per pattern)."""
    return "\n".join(f"{head} :- {', '.join(('not ' if neg else '') + t for neg, t, _ in body)}."
                     for _, head, body in diagnose_bodies(cell))


def diagnose_facts(cell: Cell, facts: str,
                   timeout: float | None = TIME_LIMIT_S) -> list[Finding]:
    """Every cause the diagnose rules derive from Δ facts, ranked (priority, rule order);
    :class:`Undecided` when clingo does not finish within ``timeout`` seconds."""
    prog = "\n".join([_thr_facts(cell), facts, diagnose_program(cell)])
    atoms = _solve([_lp("events"), _lp("diagnose"), prog], timeout,
                   f"the diagnose rules of {cell.path}")
    found = []
    for a in atoms:
        k = a.arguments[0].number
        args = tuple(x.string if x.type.name == "String" else str(x)
                     for x in a.arguments[1].arguments)
        r = cell.world.diagnoses[k]
        msg = r.message
        for p, v in zip(r.params, args, strict=True):
            msg = msg.replace("{" + p + "}", v)
        found.append((-r.priority, k, args, Finding(cause=r.name, args=args, message=msg,
                                                    recovery=r.recovery or "stop",
                                                    priority=r.priority,
                                                    source=str(r.source))))
    found.sort(key=lambda x: x[:3])
    return [f[3] for f in found]


__all__ = ["ACTIONS", "DEFAULT_FORCES", "EVENTS", "FORCES", "MEASURES", "RECOVERIES",
           "TIME_LIMIT_S", "CommitDecision", "Finding", "Source", "Undecided", "WorldRule",
           "build_world", "commit_rule", "decide_commit", "diagnose_facts",
           "diagnose_program", "force_thresholds", "show"]
