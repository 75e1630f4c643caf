"""Minimal explanations of a failing layout (``cellspec explain``): a subset of the error
rules and of the parts that alone already fails, from a Z3 unsat core made minimal by
deletion, re-checked by clingo before it is reported."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from cellspec.core import ir
from cellspec.core.status import ExplainStatus, InternalError, Status
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout
from cellspec.solver.formal.common import (
    DEFAULT_MAX_BINDINGS,
    DEFAULT_TIMEOUT,
    STABILITY_RELATIONS,
    deletion_mus,
    error_rules,
    seeded_solver,
    timeout_ms,
    var_name,
)
from cellspec.solver.instance import build_instance
from cellspec.solver.smt.backend import check_fragment, fixed_problem, ground_rules
from cellspec.solver.smt.formula import Builder, Z3Lowering
from cellspec.solver.smt.ground import GroundingLimit
from cellspec.solver.smt.result import Cause, Explanation, RuleRef
from cellspec.solver.verify import check


def explain(cell: Cell, layout: Layout, *, timeout: float | None = DEFAULT_TIMEOUT,
            minimise: bool = True, max_causes: int = 1,
            max_bindings: int = DEFAULT_MAX_BINDINGS, backend: str = "clingo") -> Explanation:
    """A minimal subset of the error rules and of the parts that alone already fails.

    Every rule gets an enabling literal and every part a presence literal; the layout
    with all of them is unsatisfiable ("it passes" is false), so Z3's unsat core names
    a subset, which deletion then makes minimal: dropping any one rule or part from it
    lets the rest pass. Parts outside the subset are unconstrained in the proof, so the
    sub-layout of just these parts, checked with just these rules, fails; it is
    re-checked by clingo before it is reported. With ``max_causes`` > 1, further cores
    that use none of the earlier cores' parts follow (independent root causes).

    Yawed boxes and cylinders: the same linear encoding at zero displacement
    (cellspec/solver/smt/shapes.py; at fixed positions every atom is a constant the exact
    kernel agrees with). ``backend`` decides the verdict and re-checks each cause."""
    import z3  # lazy: z3 only when a proof runs

    t0 = time.perf_counter()
    tms = timeout_ms(timeout)
    nominal = check(cell, layout, timeout=timeout, backend=backend)
    if nominal.verdict == Status.UNKNOWN:
        return Explanation(status=ExplainStatus.UNKNOWN,
                           reason=f"the verdict is unknown: {nominal.reason}",
                           seconds=time.perf_counter() - t0)
    if nominal.verdict == Status.PASS:
        return Explanation(status=ExplainStatus.PASS, seconds=time.perf_counter() - t0)
    rules = [r for r in error_rules(cell, layout)
             if not ir.uses_relation(r.body, STABILITY_RELATIONS)]
    if not any(v.rule in {r.name for r in rules} for v in nominal.violations):
        return Explanation(status=ExplainStatus.UNKNOWN,
                           reason="the layout fails only by stability, "
                           "which Z3 does not encode (the stability LP): see the verdict's "
                           "stability messages", seconds=time.perf_counter() - t0,
                           total_violations=len(nominal.violations))
    check_fragment(rules)
    inst = build_instance(cell, layout)
    prob = fixed_problem(inst, rules, prune=True, presence=True)
    builder = Builder({})
    try:
        grounded = ground_rules(prob, rules, builder, max_bindings)
    except GroundingLimit as exc:
        return Explanation(status=ExplainStatus.UNKNOWN, reason=str(exc),
                           seconds=time.perf_counter() - t0,
                           total_violations=len(nominal.violations))
    solver, rule_lits, part_lits, label = _encode(grounded, builder, inst.n, tms)

    def unknown(reason: str) -> Explanation:
        return Explanation(status=ExplainStatus.UNKNOWN, reason=reason,
                           seconds=time.perf_counter() - t0,
                           total_violations=len(nominal.violations))

    res = solver.check(*rule_lits, *part_lits)
    if res == z3.unknown:
        return unknown(f"z3 gave up: {solver.reason_unknown()} (time limit {timeout} s)")
    if res == z3.sat:
        raise InternalError(f"internal disagreement: {backend} says fail, but Z3 finds the layout "
                            "satisfiable (internal error)")
    causes = _causes(cell, layout, inst.ids, rules, solver, rule_lits, part_lits, label,
                     minimise=minimise, max_causes=max_causes, timeout=timeout, backend=backend)
    if isinstance(causes, str):
        return unknown(causes)
    first = causes[0]
    return Explanation(status=ExplainStatus.EXPLAINED, rules=first.rules, parts=first.parts,
                       violations=first.violations, total_violations=len(nominal.violations),
                       minimal=first.minimal, causes=tuple(causes),
                       seconds=time.perf_counter() - t0)


def _encode(grounded: list, builder: Builder, n: int,
            tms: int) -> tuple[Any, list[Any], list[Any], dict[int, tuple[str, int]]]:
    """The solver with one enabling literal per rule (implying its grounded body) and one
    presence literal per part, and each literal's label ("rule" or "part", index)."""
    import z3  # lazy: as in explain

    ctx = z3.Context()
    solver = seeded_solver(tms, ctx, logic=None)
    low = Z3Lowering(var_name, ctx)
    rule_lits = []
    for k, lst in enumerate(grounded):
        e = z3.Bool(f"rule_{k}", ctx)
        rule_lits.append(e)
        body = builder.and_(f for _, f in lst)
        solver.add(z3.Implies(e, low.term(body)))
    part_lits = [low.boolean(("present", i)) for i in range(n)]
    label: dict = {}
    for k, e in enumerate(rule_lits):
        label[e.get_id()] = ("rule", k)
    for i, p in enumerate(part_lits):
        label[p.get_id()] = ("part", i)
    return solver, rule_lits, part_lits, label


def _causes(cell: Cell, layout: Layout, ids_all: tuple[str, ...], rules: list[Rule],
            solver: Any, rule_lits: list[Any], part_lits: list[Any],
            label: dict[int, tuple[str, int]], *, minimise: bool, max_causes: int,
            timeout: float | None, backend: str) -> list[Cause] | str:
    """The causes, each from an unsat core (made minimal by deletion when asked) using
    none of the earlier causes' parts, re-checked by ``backend``; or why one was not
    re-checked (a limit)."""
    import z3  # lazy: as in explain

    causes: list[Cause] = []
    used_parts: set[int] = set()
    while len(causes) < max(1, max_causes):
        if causes:  # the next cause may not rely on the parts of the earlier ones
            free = [p for i, p in enumerate(part_lits) if i not in used_parts]
            res = solver.check(*rule_lits, *free)
            if res != z3.unsat:
                break
        core = list(solver.unsat_core())
        minimal = False
        if minimise:
            core, minimal = deletion_mus(solver, core)
        sel_rules = sorted(label[c.get_id()][1] for c in core if label[c.get_id()][0] == "rule")
        sel_parts = sorted(label[c.get_id()][1] for c in core if label[c.get_id()][0] == "part")
        v = check(cell.model_copy(update={"rules": tuple(rules[k] for k in sel_rules)}),
                  _sub_layout(layout, sel_parts), timeout=timeout, backend=backend)
        ids = tuple(ids_all[i] for i in sel_parts)
        if v.verdict == Status.UNKNOWN:  # a limit while re-checking: not decided
            return (f"the reduced layout ({', '.join(ids)}) was not re-checked: "
                    f"{v.reason}")
        if v.verdict != Status.FAIL:
            raise InternalError(f"internal disagreement: the reduced layout ({', '.join(ids)}) "
                                f"does not fail under {backend} ({v.verdict}) (internal error)")
        causes.append(Cause(rules=tuple(RuleRef(rule=rules[k].name,
                                                source=str(rules[k].source))
                                        for k in sel_rules),
                            parts=ids, violations=tuple(x.to_json() for x in v.violations),
                            minimal=minimal))
        if not sel_parts:
            break
        used_parts.update(sel_parts)
    return causes


def _sub_layout(layout: Layout, sel: list[int]) -> Layout:
    ids = tuple(layout.ids[i] for i in sel)
    keep = set(ids)
    idx = np.array(sel, dtype=np.int64)
    # replace, not a new Layout: a field the selection does not concern is carried over
    return dataclasses.replace(
        layout, ids=ids, types=tuple(layout.types[i] for i in sel),
        pos=layout.pos[idx].reshape(len(idx), 3), size=layout.size[idx].reshape(len(idx), 3),
        grippers=tuple(layout.grippers[i] for i in sel),
        yaw=None if layout.yaw is None else layout.yaw[idx].copy(),
        order=None if layout.order is None else tuple(p for p in layout.order if p in keep),
        path=f"{layout.path}::explained")


