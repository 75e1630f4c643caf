"""Formal checks with Z3: tolerance-robust verdicts, minimal explanations, rule-set lint.

Robust model (``prove_robust``), stated precisely:

- Every part ``i`` is displaced independently by ``(dx_i, dy_i)``, integers in
  ``[-t, t]`` grid steps of 0.1 mm, where ``t = ceil(tolerance / 0.1 mm)``: a
  tolerance between two grid steps is rounded *up* (the safe side), and the result
  states the tolerance actually decided (``t`` steps), never the smaller one asked.
  Every displacement up to the asked tolerance lands, once rounded to the grid, at
  most ``t`` steps away, so a proof at ``t`` steps covers the asked tolerance. The
  0.1 mm grid is the resolution at which every verdict is decided (positions are
  rounded to it), so each displaced layout the proof covers is one clingo can
  re-check exactly, and the witness is such a layout.
- z does not change. A released part settles onto what is below it; no part moves
  in z, so every surface and every supporting top face stays at its height and a
  part that rested on something keeps its z (its relative z to its support is
  unchanged). A part pushed off its support is *not* dropped: the displaced layout
  then violates ``gravity`` (or whatever rule reads it), which is exactly the
  counterexample a user needs. A part that floated in the nominal layout keeps
  floating (the layout failed already).
- The placement order, types and grippers are unchanged.

The verdict holds robustly when: nominal ``pass`` and no displacement makes any
error rule fail; nominal ``fail`` and no displacement makes every error rule hold.
``refuted`` comes with the displaced layout (a witness), re-checked by clingo
before it is reported; ``unknown`` (time, binding budget) is never success.
"""

from __future__ import annotations

import dataclasses
import math
import time
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.core.errors import CellspecError, Diagnostic
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.smt.result import (
    Cause,
    Explanation,
    LintFinding,
    LintReport,
    RobustResult,
    RuleRef,
)

MAX_TOLERANCE_M = 0.1  # a placement error of 10 cm is not a tolerance but a different layout
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_BINDINGS = 5_000_000


def validate_tolerance(tolerance: Any) -> int:
    """The tolerance in whole 0.1 mm steps, rounded up (the safe side: a proof then covers
    at least the tolerance asked); CellspecError for a negative or absurd one."""
    try:
        t = float(tolerance)
    except (TypeError, ValueError):
        raise CellspecError(f"--robust: tolerance must be a number of metres, got "
                            f"{tolerance!r}") from None
    if not math.isfinite(t) or t < 0:
        raise CellspecError(f"--robust: tolerance must be a finite, non-negative number of "
                            f"metres, got {tolerance}")
    if t > MAX_TOLERANCE_M:
        raise CellspecError(f"--robust: tolerance {t} m is absurd for a placement error "
                            f"(at most {MAX_TOLERANCE_M} m); tolerances are in metres, e.g. "
                            "0.002 for 2 mm")
    return math.ceil(Fraction(str(t)) / g.RESOLUTION)


def _timeout_ms(timeout: float | None) -> int:
    if timeout is None:
        return 0
    if not (timeout > 0) or not math.isfinite(timeout):
        raise CellspecError("timeout must be a positive number of seconds")
    return max(1, int(timeout * 1000))


def _error_rules(cell: Cell, layout: Layout) -> list:
    rules = [r for r in cell.rules if r.severity == "error"]
    if layout.order is None:
        rules = [r for r in rules if not ir.uses_relation(r.body, ir.ORDER_RELATIONS)]
    return rules


def _solver(timeout_ms: int, ctx=None, logic: str | None = "QF_LIA"):
    """A seeded solver in its own context (a shared context makes results depend on what
    was built before in the same process)."""
    import z3

    from cellspec.solver.smt.backend import seed_z3

    seed_z3()
    s = z3.SolverFor(logic, ctx=ctx) if logic else z3.Solver(ctx=ctx)
    s.set("random_seed", 0)
    if timeout_ms:
        s.set("timeout", timeout_ms)
    return s


def _var_name(v) -> str:
    if isinstance(v, tuple):
        return "_".join(str(x) for x in v)
    return str(v)


def displaced_layout(layout: Layout, boxes: np.ndarray, dx: np.ndarray, dy: np.ndarray,
                     path: str = "<witness>") -> Layout:
    """The grid-rounded layout with every part moved by (dx, dy) grid steps (z unchanged)."""
    c = (boxes[:, 0::2] + boxes[:, 1::2]) // 4  # centres, 0.1 mm steps
    c = c.astype(np.int64)
    c[:, 0] += dx
    c[:, 1] += dy
    pos = np.round(c.astype(np.float64) * float(g.RESOLUTION), 4)
    return dataclasses.replace(layout, pos=pos, path=path)


def prove_robust(cell: Cell, layout: Layout, tolerance: float, *,
                 timeout: float | None = DEFAULT_TIMEOUT, prune: bool = True,
                 encoding: str = "smtlib", max_bindings: int = DEFAULT_MAX_BINDINGS
                 ) -> RobustResult:
    """Prove that the verdict of ``layout`` holds for every x/y placement error of every
    part up to ``tolerance`` metres, or refute it with a displaced layout (see the module
    docstring for the exact model). ``prune=False`` is the naive encoding (all pairs,
    nothing decided before Z3), kept for the benchmark. ``encoding``: ``smtlib`` (default:
    one SMT-LIB text parsed once, measured faster to build) or ``api`` (Z3 Python terms)."""
    import z3

    from cellspec.solver.instance import build_instance
    from cellspec.solver.smt.backend import check_fragment, displaced_problem, ground_rules
    from cellspec.solver.smt.formula import Builder, Z3Lowering, _num, smtlib
    from cellspec.solver.smt.ground import LimitHit
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    steps = validate_tolerance(tolerance)
    tms = _timeout_ms(timeout)
    if encoding not in ("api", "smtlib"):
        raise ValueError("encoding must be 'api' or 'smtlib'")
    nominal = check(cell, layout, timeout=timeout)
    notes: list[str] = []
    decided = float(steps * g.RESOLUTION)  # what the proof is about, stated everywhere
    if steps * g.RESOLUTION != Fraction(str(float(tolerance))):
        notes.append(f"tolerance {float(tolerance):g} m rounded up to {decided:.4f} m (the "
                     "0.1 mm grid, the safe side): the result is about "
                     f"{decided:.4f} m")
    base = {"tolerance": decided, "requested": float(tolerance), "steps": steps,
            "verdict": nominal.verdict}
    if nominal.verdict == "unknown":
        return RobustResult(status="unknown", reason=f"the nominal verdict is unknown: "
                            f"{nominal.reason}", notes=tuple(notes),
                            seconds=time.perf_counter() - t0, **base)
    inst = build_instance(cell, layout)
    if inst.off_grid:
        notes.append("the proof is about the layout rounded to the 0.1 mm grid")
    rules = _error_rules(cell, layout)
    stab_rules = [r for r in rules if ir.uses_relation(r.body, STABILITY_RELATIONS)]
    rules = [r for r in rules if r not in stab_rules]
    check_fragment(rules)
    if stab_rules:
        why = _stability_not_robust(inst, steps, nominal, stab_rules)
        if why:
            return RobustResult(status="unknown", reason=why, notes=tuple(notes),
                                seconds=time.perf_counter() - t0, **base)
        notes.append("stability: every structure stands with the margin plus twice the "
                     "tolerance, so no displacement within the tolerance makes it fall")
    stats: dict[str, float] = {}
    t1 = time.perf_counter()
    prob, bounds = displaced_problem(inst, rules, steps, prune=prune)
    from cellspec.solver.smt.backend import _NoFold

    builder = Builder(bounds) if prune else _NoFold(bounds)
    try:
        grounded = ground_rules(prob, rules, builder, max_bindings)
    except LimitHit as exc:
        return RobustResult(status="unknown", reason=str(exc), notes=tuple(notes),
                            seconds=time.perf_counter() - t0, **base)
    stats["ground_s"] = time.perf_counter() - t1
    stats["atoms"] = float(builder.atoms)
    stats["folded_atoms"] = float(builder.folded)
    passing = nominal.verdict == "pass"
    # what the solver must find: some instance violated (pass) / every instance holds (fail)
    items: list[tuple[int, tuple, object]] = []
    for k, lst in enumerate(grounded):
        for binding, f in lst:
            items.append((k, binding, builder.not_(f) if passing else f))
    if passing:
        live = [it for it in items if it[2] is not False]
        goal = builder.or_(f for _, _, f in live)
    else:
        live = [it for it in items if it[2] is not True]
        goal = builder.and_(f for _, _, f in live)
    stats["instances"] = float(len(live))

    def done(status: str, **kw) -> RobustResult:
        stats["seconds"] = time.perf_counter() - t0
        return RobustResult(status=status, notes=tuple(notes), seconds=stats["seconds"],
                            stats=stats, **base, **kw)

    if goal is False:
        return done("proved")
    t2 = time.perf_counter()
    ctx = z3.Context()
    solver = _solver(tms, ctx)
    low = Z3Lowering(_var_name, ctx)
    if encoding == "api":
        gt = low.term(goal)
        solver.add(gt)
        for v, term in low.vars.items():
            lo, hi = bounds[v]
            solver.add(term >= lo, term <= hi)
    else:
        from cellspec.solver.smt.formula import variables

        names = sorted(variables(goal), key=str)
        decl = [f"(declare-const {_var_name(v)} Int)" for v in names]
        for v in names:
            lo, hi = bounds[v]
            decl.append(f"(assert (and (>= {_var_name(v)} {_num(lo)}) "
                        f"(<= {_var_name(v)} {_num(hi)})))")
        text = "\n".join(decl) + "\n(assert " + smtlib(goal, _var_name) + ")\n"
        solver.from_string(text)
        for v in names:
            low.vars[v] = z3.Int(_var_name(v), ctx)
    stats["build_s"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    res = solver.check()
    stats["solve_s"] = time.perf_counter() - t3
    if res == z3.unsat:
        return done("proved")
    if res != z3.sat:
        return done("unknown", reason=f"z3 gave up: {solver.reason_unknown()} "
                    f"(time limit {timeout} s)")
    m = solver.model()
    dx = np.zeros(inst.n, dtype=np.int64)
    dy = np.zeros(inst.n, dtype=np.int64)
    for v, term in low.vars.items():
        val = m.eval(term, model_completion=True).as_long()
        (dx if v[0] == "dx" else dy)[v[1]] = val
    wl = displaced_layout(layout, inst.boxes, dx, dy)
    rule = None
    parts: tuple[str, ...] = ()
    if passing:
        for k, binding, f in live:
            if z3.is_true(m.eval(low.term(f), model_completion=True)):
                rule = rules[k].name
                top = ir.top_domains(rules[k].body)
                parts = tuple(inst.ids[b] for b, d in zip(binding, top.values(), strict=True)
                              if d == "part")
                break
    recheck = check(cell, wl, timeout=timeout)
    wj = wl.to_json()
    if not passing and recheck.verdict == "fail" and stab_rules and all(
            v.rule in {r.name for r in stab_rules} for v in recheck.violations):
        return done("unknown", reason="every rule but stability can be made to hold by a "
                    "displacement within the tolerance, and that the structure still falls "
                    "then is not proved (Z3 does not encode the stability LP)")
    confirmed = (recheck.verdict == "fail" and any(v.rule == rule and v.parts == parts
                                                   for v in recheck.violations)) if passing \
        else recheck.verdict == "pass"
    if not confirmed:
        return done("unknown", reason="internal disagreement: the Z3 counterexample was not "
                    f"confirmed by clingo (clingo says {recheck.verdict}); please report",
                    witness_verdict=recheck.to_json(timing=False))
    moved = {inst.ids[i]: [round(float(dx[i]) * float(g.RESOLUTION), 4),
                           round(float(dy[i]) * float(g.RESOLUTION), 4)]
             for i in range(inst.n) if dx[i] or dy[i]}
    return done("refuted", witness=wj, rule=rule, parts=parts, displacement=moved,
                witness_verdict=recheck.to_json(timing=False))


STABILITY_RELATIONS = frozenset({"stable", "placed_stable"})


def _stability_not_robust(inst: Any, steps: int, nominal: Any, stab_rules: list) -> str | None:
    """Why the stability rules' verdict is not proved robust to ``steps`` grid steps, or
    None when it is. Displacing every part by up to T moves a centre of mass (with what
    it carries) by at most T and a contact edge by at most T, so a forest structure that
    stands with the margin M + 2T stands with M after any displacement (its contacts,
    wider than 2(M + 2T), are kept). Structures that need an LP and failing verdicts that
    rest on stability alone are not proved: unknown, never a silent pass."""
    from cellspec.solver import stability as stab

    names = {r.name for r in stab_rules}
    if nominal.verdict != "pass":
        if all(v.rule in names for v in nominal.violations):
            return ("the layout fails only by stability, and Z3 does not encode the stability "
                    "LP: that it keeps falling under every displacement is not proved")
        return None
    t = float(steps * g.RESOLUTION)
    base_margin = float(inst.stability_margin if inst.stability_margin is not None
                        else stab.DEFAULT_MARGIN)
    strict = dataclasses.replace(inst, stability_margin=Fraction(base_margin + 2 * t))
    st = stab.structure_of(strict)
    con = st.con
    nsup = np.bincount(con.upper, minlength=inst.n) if len(con.upper) else np.zeros(inst.n)
    if (nsup >= 2).any():
        p = int(np.argmax(nsup >= 2))
        return (f"stability is proved robust only for structures in which every part rests on "
                f"one contact; {inst.ids[p]} rests on {int(nsup[p])} (its structure needs the "
                "LP, which Z3 does not encode)")
    rep = stab.report(strict, stages_too="stability_stages" in names)
    bad = list(rep.why.values()) + list(rep.stage_why.values())
    if bad:
        return (f"stability is not proved robust to {t:g} m: that needs every structure to "
                f"stand with the margin plus twice the tolerance ({base_margin + 2 * t:.4f} m), "
                f"and {bad[0]}")
    return None


def explain(cell: Cell, layout: Layout, *, timeout: float | None = DEFAULT_TIMEOUT,
            minimise: bool = True, max_causes: int = 1,
            max_bindings: int = DEFAULT_MAX_BINDINGS) -> Explanation:
    """A minimal subset of the error rules and of the parts that alone already fails.

    Every rule gets an enabling literal and every part a presence literal; the layout
    with all of them is unsatisfiable ("it passes" is false), so Z3's unsat core names
    a subset, which deletion then makes minimal: dropping any one rule or part from it
    lets the rest pass. Parts outside the subset are unconstrained in the proof, so the
    sub-layout of just these parts, checked with just these rules, fails; it is
    re-checked by clingo before it is reported. With ``max_causes`` > 1, further cores
    that use none of the earlier cores' parts follow (independent root causes)."""
    import z3

    from cellspec.solver.instance import build_instance
    from cellspec.solver.smt.backend import check_fragment, fixed_problem, ground_rules
    from cellspec.solver.smt.formula import Builder, Z3Lowering
    from cellspec.solver.smt.ground import LimitHit
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    tms = _timeout_ms(timeout)
    nominal = check(cell, layout, timeout=timeout)
    if nominal.verdict == "unknown":
        return Explanation(status="unknown", reason=f"the verdict is unknown: {nominal.reason}",
                           seconds=time.perf_counter() - t0)
    if nominal.verdict == "pass":
        return Explanation(status="pass", seconds=time.perf_counter() - t0)
    rules = [r for r in _error_rules(cell, layout)
             if not ir.uses_relation(r.body, STABILITY_RELATIONS)]
    if not any(v.rule in {r.name for r in rules} for v in nominal.violations):
        return Explanation(status="unknown", reason="the layout fails only by stability, "
                           "which Z3 does not encode (the stability LP): see the verdict's "
                           "stability messages", seconds=time.perf_counter() - t0,
                           total_violations=len(nominal.violations))
    check_fragment(rules)
    inst = build_instance(cell, layout)
    prob = fixed_problem(inst, rules, prune=True, presence=True)
    builder = Builder({})
    try:
        grounded = ground_rules(prob, rules, builder, max_bindings)
    except LimitHit as exc:
        return Explanation(status="unknown", reason=str(exc), seconds=time.perf_counter() - t0,
                           total_violations=len(nominal.violations))
    ctx = z3.Context()
    solver = _solver(tms, ctx, logic=None)
    low = Z3Lowering(_var_name, ctx)
    rule_lits = []
    for k, lst in enumerate(grounded):
        e = z3.Bool(f"rule_{k}", ctx)
        rule_lits.append(e)
        body = builder.and_(f for _, f in lst)
        solver.add(z3.Implies(e, low.term(body)))
    part_lits = [low.boolean(("present", i)) for i in range(inst.n)]
    label: dict = {}
    for k, e in enumerate(rule_lits):
        label[e.get_id()] = ("rule", k)
    for i, p in enumerate(part_lits):
        label[p.get_id()] = ("part", i)

    def unknown(reason: str) -> Explanation:
        return Explanation(status="unknown", reason=reason, seconds=time.perf_counter() - t0,
                           total_violations=len(nominal.violations))

    res = solver.check(*rule_lits, *part_lits)
    if res == z3.unknown:
        return unknown(f"z3 gave up: {solver.reason_unknown()} (time limit {timeout} s)")
    if res == z3.sat:
        return unknown("internal disagreement: clingo says fail, but Z3 finds the layout "
                       "satisfiable; please report")
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
            core, minimal = _deletion_mus(solver, core)
        sel_rules = sorted(label[c.get_id()][1] for c in core if label[c.get_id()][0] == "rule")
        sel_parts = sorted(label[c.get_id()][1] for c in core if label[c.get_id()][0] == "part")
        v = check(cell.model_copy(update={"rules": tuple(rules[k] for k in sel_rules)}),
                  _sub_layout(layout, sel_parts), timeout=timeout)
        ids = tuple(inst.ids[i] for i in sel_parts)
        if v.verdict != "fail":
            return unknown(f"internal disagreement: the reduced layout ({', '.join(ids)}) "
                           f"does not fail under clingo ({v.verdict}); please report")
        causes.append(Cause(rules=tuple(RuleRef(rule=rules[k].name,
                                                source=str(rules[k].source))
                                        for k in sel_rules),
                            parts=ids, violations=tuple(x.to_json() for x in v.violations),
                            minimal=minimal))
        if not sel_parts:
            break
        used_parts.update(sel_parts)
    first = causes[0]
    return Explanation(status="explained", rules=first.rules, parts=first.parts,
                       violations=first.violations, total_violations=len(nominal.violations),
                       minimal=first.minimal, causes=tuple(causes),
                       seconds=time.perf_counter() - t0)


def _deletion_mus(solver, core: list) -> tuple[list, bool]:
    """Drop each literal in turn if the rest is still unsatisfiable; (core, proved minimal)."""
    import z3

    keep = list(core)
    k = 0
    while k < len(keep):
        trial = keep[:k] + keep[k + 1:]
        r = solver.check(*trial)
        if r == z3.unsat:
            sub = {c.get_id() for c in solver.unsat_core()}
            keep = [c for c in trial if c.get_id() in sub]
        elif r == z3.sat:
            k += 1
        else:
            return keep, False  # a time limit: what we have, not proved minimal
    return keep, True


def _sub_layout(layout: Layout, sel: list[int]) -> Layout:
    ids = tuple(layout.ids[i] for i in sel)
    keep = set(ids)
    idx = np.array(sel, dtype=np.int64)
    # replace, not a new Layout: a field the selection does not concern is carried over
    return dataclasses.replace(
        layout, ids=ids, types=tuple(layout.types[i] for i in sel),
        pos=layout.pos[idx].reshape(len(idx), 3), size=layout.size[idx].reshape(len(idx), 3),
        grippers=tuple(layout.grippers[i] for i in sel),
        order=None if layout.order is None else tuple(p for p in layout.order if p in keep),
        path=f"{layout.path}::explained")


# --- lint ---------------------------------------------------------------------------------

MAX_LINT_PARTS = 200
MAX_CONFLICTS = 5


def lint_part_set(cell: Cell, parts: dict[str, int] | None) -> dict[str, int]:
    """The part set to lint with: the one given, else the largest test layout of the file."""
    if not cell.part_types:
        raise CellspecError(Diagnostic(cell.source.file, cell.source.line, cell.source.col,
                                       f"cell '{cell.name}' defines no part types; lint needs "
                                       "parts to place"))
    if parts:
        bad = [t for t in parts if t not in cell.part_types]
        if bad:
            raise CellspecError(f"--parts: unknown part type(s) {', '.join(bad)} (the cell "
                                f"defines: {', '.join(sorted(cell.part_types))})")
        if any(n < 1 for n in parts.values()) or sum(parts.values()) > MAX_LINT_PARTS:
            raise CellspecError(f"--parts: counts must be at least 1 and at most "
                                f"{MAX_LINT_PARTS} parts in all")
        return dict(parts)
    best: dict[str, int] = {}
    for t in cell.tests:
        if t.parts is None:
            continue
        counts: dict[str, int] = {}
        for p in t.parts:
            counts[p.type] = counts.get(p.type, 0) + 1
        if sum(counts.values()) > sum(best.values()):
            best = counts
    if not best:
        raise CellspecError(Diagnostic(cell.source.file, cell.source.line, cell.source.col,
                                       "no part set to lint with: give --parts TYPE=N (e.g. "
                                       "--parts cube=12) or add a test with an inline layout"))
    return best


def _free_problem(cell: Cell, part_set: dict[str, int]):
    from cellspec.solver.instance import cell_u
    from cellspec.solver.smt.formula import lin
    from cellspec.solver.smt.ground import Problem, cell_fields

    types: list[str] = []
    for t in sorted(part_set):
        types.extend([t] * part_set[t])
    n = len(types)
    bound = int(g.MAX_ABS_COORD_M / float(g.RESOLUTION))
    corners, bounds = [], {}
    for i, t in enumerate(types):
        s = [int(round(Fraction(v) / g.RESOLUTION)) for v in cell.part_types[t].size]
        row = []
        for k, a in enumerate("xyz"):
            v = (a.upper(), i)
            bounds[v] = (-bound, bound)
            row += [lin(-s[k], (v, 2)), lin(s[k], (v, 2))]
        corners.append(row)
    single = len(part_set) == 1
    if single:  # identical parts: fixing the order to the index order loses nothing

        def before(i: int, j: int):
            return i < j
    else:
        for i in range(n):
            bounds[("O", i)] = (0, n - 1)

        def before(i: int, j: int):
            return ("le", 1, ((("O", i), 1), (("O", j), -1)))
    prob = Problem(n=n, corners=corners, types=tuple(types),
                   grippers=tuple(cell.default_gripper.kind for _ in types),
                   before=before, neighbours=None, **cell_fields(cell_u(cell)))
    return prob, bounds, single


def lint(cell: Cell, parts: dict[str, int] | None = None, *,
         timeout: float | None = 30.0, redundancy: bool = True,
         max_bindings: int = DEFAULT_MAX_BINDINGS) -> LintReport:
    """Can any layout of ``parts`` satisfy every error rule of the cell? If not, a minimal
    set of conflicting rules. Also: rules that can never fire (no layout violates them),
    and error rules implied by the other error rules."""
    import z3

    from cellspec.solver.smt.backend import check_fragment, ground_rules
    from cellspec.solver.smt.formula import Builder, Z3Lowering
    from cellspec.solver.smt.ground import LimitHit

    t0 = time.perf_counter()
    tms = _timeout_ms(timeout)
    part_set = lint_part_set(cell, parts)
    # the stability rules need the LP, which Z3 does not encode: lint is about the others
    rules = [r for r in cell.rules if not ir.uses_relation(r.body, STABILITY_RELATIONS)]
    check_fragment(rules)
    prob, bounds, single = _free_problem(cell, part_set)
    builder = Builder(bounds)
    base = {"cell": cell.name, "part_set": part_set}
    try:
        grounded = ground_rules(prob, rules, builder, max_bindings)
    except LimitHit as exc:
        return LintReport(status="unknown", reason=str(exc), seconds=time.perf_counter() - t0,
                          **base)
    ctx = z3.Context()
    solver = _solver(tms, ctx, logic=None)
    solver.set("arith.solver", 2)  # measured: 3.5x faster than the default on lint queries
    low = Z3Lowering(_var_name, ctx)
    holds, fires = [], []
    for k, lst in enumerate(grounded):
        h = z3.Bool(f"holds_{k}", ctx)
        f = z3.Bool(f"fires_{k}", ctx)
        solver.add(z3.Implies(h, low.term(builder.and_(fm for _, fm in lst))))
        solver.add(z3.Implies(f, low.term(builder.or_(builder.not_(fm) for _, fm in lst))))
        holds.append(h)
        fires.append(f)
    for v, term in list(low.vars.items()):
        lo, hi = bounds[v]
        solver.add(term >= lo, term <= hi)
    if not single:
        order_vars = [low.var(("O", i)) for i in range(prob.n)]
        solver.add(z3.Distinct(order_vars))
        for o in order_vars:
            solver.add(o >= 0, o <= prob.n - 1)
    label = {h.get_id(): k for k, h in enumerate(holds)}
    errors = [k for k, r in enumerate(rules) if r.severity == "error"]
    findings: list[LintFinding] = []

    def ref(k: int) -> RuleRef:
        return RuleRef(rule=rules[k].name, source=str(rules[k].source))

    def done(status: str, reason: str | None = None, example=None) -> LintReport:
        return LintReport(status=status, findings=tuple(findings), reason=reason,
                          example=example, seconds=time.perf_counter() - t0, **base)

    # a constructive answer first: a plain grid of the parts that clingo accepts proves
    # consistency at once (Z3 needs 35 s for 50 cubes on the station); else Z3 decides
    example = _grid_example(cell, prob.types)
    if example is not None:
        res = z3.sat
    else:
        res = solver.check(*[holds[k] for k in errors])
    if res == z3.unknown:
        return done("unknown", f"z3 gave up deciding consistency: {solver.reason_unknown()} "
                    f"(time limit {timeout} s)")
    n_parts = sum(part_set.values())
    what = ", ".join(f"{c} {t}" for t, c in sorted(part_set.items()))
    if res == z3.unsat:
        # minimal conflict sets: the first from the core; more by leaving out, in turn,
        # one rule of each set found (at most MAX_CONFLICTS)
        found: list[tuple[int, ...]] = []
        queue: list[tuple[int, ...]] = [()]
        seen: set[tuple[int, ...]] = set()
        while queue and len(found) < MAX_CONFLICTS:
            drop = queue.pop(0)
            if drop in seen:
                continue
            seen.add(drop)
            r2 = solver.check(*[holds[k] for k in errors if k not in drop])
            if r2 != z3.unsat:
                continue
            core, minimal = _deletion_mus(solver, list(solver.unsat_core()))
            ks = tuple(sorted(label[c.get_id()] for c in core))
            if ks in found:
                continue
            found.append(ks)
            names = ", ".join(rules[k].name for k in ks)
            word = "" if minimal else " (not proved minimal: a time limit was hit)"
            findings.append(LintFinding(kind="inconsistent", rules=tuple(ref(k) for k in ks),
                                        message=f"no layout of {what} satisfies the error "
                                        f"rules: {names} conflict{word}"))
            queue.extend(tuple(sorted({*drop, k})) for k in ks)
        return done("inconsistent")
    del n_parts
    if example is None:
        example = _model_example(solver, low, prob, single)
    pins = _pins(ctx, solver, low, prob, single, example)
    unknown_notes = []
    for k, r in enumerate(rules):
        res = solver.check(fires[k])
        if res == z3.unsat:
            findings.append(LintFinding(kind="never_fires", rules=(ref(k),),
                                        message=f"rule {r.name} can never fire: no layout of "
                                        f"{what} violates it"))
            continue
        if res == z3.unknown:
            unknown_notes.append(f"whether {r.name} can fire")
            continue
        if not redundancy or r.severity != "error":
            continue
        others = [holds[j] for j in errors if j != k]
        # a cheap witness first: all but a few parts pinned where the example has them
        # (sat there proves "not implied"); otherwise the full question
        res = z3.unknown
        for free in (3, 6):
            if prob.n > free and solver.check(fires[k], *others, *pins[:prob.n - free]) \
                    == z3.sat:
                res = z3.sat
                break
        if res != z3.sat:
            res = solver.check(fires[k], *others)
        if res == z3.unsat:
            core = [c for c in solver.unsat_core() if c.get_id() in label]
            ks = sorted(label[c.get_id()] for c in core)
            by = ", ".join(rules[j].name for j in ks) or "nothing (it never fires)"
            findings.append(LintFinding(kind="implied", rules=(ref(k), *(ref(j) for j in ks)),
                                        message=f"rule {r.name} is implied by {by}: no layout "
                                        f"of {what} satisfying them violates it"))
        elif res == z3.unknown:
            unknown_notes.append(f"whether {r.name} is implied by the others")
    if unknown_notes:
        findings.append(LintFinding(kind="unknown", message="not decided within the time "
                                    "limit: " + "; ".join(unknown_notes)))
    return done("consistent", example=example)


def _numbered(types) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    out = []
    for t in types:
        out.append((t, seen.get(t, 0)))
        seen[t] = seen.get(t, 0) + 1
    return out


def _pins(ctx, solver, low, prob, single: bool, example: dict) -> list:
    """One literal per part (in index order) that pins it, and its order rank, to the
    example layout (the example lists parts in index order, placed in that order)."""
    import z3

    pins = []
    rank = {pid: k for k, pid in enumerate(example["order"])}
    for i, p in enumerate(example["parts"]):
        lit = z3.Bool(f"pin_{i}", ctx)
        eqs = [low.var((a, i)) == int(round(Fraction(str(v)) / g.RESOLUTION))
               for a, v in zip("XYZ", p["pos"], strict=True)]
        if not single:
            eqs.append(low.var(("O", i)) == rank[p["id"]])
        solver.add(z3.Implies(lit, z3.And(eqs)))
        pins.append(lit)
    return pins[::-1]  # pin the last parts first, free the first ones


def _model_example(solver, low, prob, single: bool) -> dict:
    """The layout of a Z3 model of the lint problem (positions on the 0.1 mm grid)."""
    m = solver.model()
    ids = [f"{t}{k + 1}" for t, k in _numbered(prob.types)]
    pos = []
    for i in range(prob.n):
        pos.append([round(m.eval(low.var((a, i)), model_completion=True).as_long()
                          * float(g.RESOLUTION), 4) for a in "XYZ"])
    if single:
        order = list(ids)
    else:
        rank = [m.eval(low.var(("O", i)), model_completion=True).as_long()
                for i in range(prob.n)]
        order = [ids[i] for i in sorted(range(prob.n), key=lambda i: rank[i])]
    example = {"units": "m", "parts": [{"id": ids[i], "type": prob.types[i], "pos": pos[i]}
                                       for i in range(prob.n)], "order": order}
    return example


def _grid_example(cell: Cell, types: tuple[str, ...]) -> dict | None:
    """Parts side by side on the lowest surface, a finger clearance apart, in rows inside the
    workspace, placed in index order; returned only if clingo says it passes."""
    from cellspec.solver.verify import check

    lo, hi = cell.workspace.lo, cell.workspace.hi
    zs = sorted(s.z for s in cell.surfaces if lo[2] <= s.z <= hi[2])
    floor = zs[0] if zs else lo[2]
    grip = cell.gripper_params("parallel")
    ids = [f"{t}{k + 1}" for t, k in _numbered(types)]
    tight = 2 * cell.epsilon + Fraction(1, 1000)
    smallest = min(min(cell.part_types[t].size[:2]) for t in types)
    clear = max(tight, ((grip.opening or 0) - smallest) / 2 + Fraction(1, 1000))
    # tight along x, a finger clearance between rows: the grip along y stays free
    for gx, gy in ((tight, clear), (clear, tight), (clear, clear), (tight, tight)):
        parts, x, y, row_h = [], lo[0] + gx, lo[1] + gy, Fraction(0)
        ok = True
        for i, t in enumerate(types):
            sx, sy, sz = cell.part_types[t].size
            if x + sx > hi[0] - gx:
                x, y, row_h = lo[0] + gx, y + row_h + gy, Fraction(0)
            if x + sx > hi[0] - gx or y + sy > hi[1] - gy or floor + sz > hi[2]:
                ok = False
                break
            parts.append({"id": ids[i], "type": t,
                          "pos": [round(float(x + sx / 2), 4), round(float(y + sy / 2), 4),
                                  round(float(floor + sz / 2), 4)]})
            x += sx + gx
            row_h = max(row_h, sy)
        if not ok:
            continue
        obj = {"units": "m", "parts": parts, "order": list(ids)}
        try:
            from cellspec.layout import layout_from_obj

            v = check(cell, layout_from_obj(obj, "<lint example>"))
        except CellspecError:
            continue
        if v.verdict == "pass":
            return obj
    return None
