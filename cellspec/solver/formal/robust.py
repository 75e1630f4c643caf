"""Tolerance-robust verdicts (``check --robust``), proved or refuted by Z3.

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
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.core.errors import CellspecError
from cellspec.core.status import InternalError, Status
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout
from cellspec.solver import stability as stab
from cellspec.solver.formal.common import (
    DEFAULT_MAX_BINDINGS,
    DEFAULT_TIMEOUT,
    STABILITY_RELATIONS,
    error_rules,
    moving_refusal,
    seeded_solver,
    timeout_ms,
    var_name,
)
from cellspec.solver.instance import Instance, build_instance
from cellspec.solver.result import Verdict
from cellspec.solver.smt.backend import (
    NoFold,
    Unsupported,
    check_fragment,
    displaced_problem,
    ground_rules,
)
from cellspec.solver.smt.formula import Builder, Z3Lowering, smt_num, smtlib, variables
from cellspec.solver.smt.ground import GroundingLimit
from cellspec.solver.smt.result import RobustResult
from cellspec.solver.verify import check

MAX_TOLERANCE_M = 0.1  # a placement error of 10 cm is not a tolerance but a different layout


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


def displaced_layout(layout: Layout, boxes: np.ndarray, dx: np.ndarray, dy: np.ndarray,
                     path: str = "<witness>") -> Layout:
    """The grid-rounded layout with every part moved by (dx, dy) grid steps (z unchanged)."""
    c = (boxes[:, 0::2] + boxes[:, 1::2]) // 4  # centres, 0.1 mm steps
    c = c.astype(np.int64)
    c[:, 0] += dx
    c[:, 1] += dy
    pos = np.round(c.astype(np.float64) * float(g.RESOLUTION), 4)
    return dataclasses.replace(layout, pos=pos, path=path)


@dataclass(frozen=True)
class RobustOptions:
    """How a robustness proof is run (the keyword arguments of :func:`prove_robust`)."""

    timeout: float | None = DEFAULT_TIMEOUT
    prune: bool = True  # False: the naive encoding (all pairs, nothing decided before Z3)
    encoding: str = "smtlib"  # or "api" (Z3 Python terms)
    max_bindings: int = DEFAULT_MAX_BINDINGS
    backend: str = "clingo"  # decides the nominal verdict and re-checks a witness


@dataclass
class _RobustRun:
    """The state one proof carries from stage to stage: what it is about (``base``), its
    notes, its statistics and its clock."""

    cell: Cell
    layout: Layout
    opts: RobustOptions
    t0: float
    steps: int
    tms: int  # the Z3 time limit, ms (0: none)
    nominal: Verdict
    base: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)

    def early(self, reason: str) -> RobustResult:
        """``unknown`` before anything was grounded (no statistics)."""
        return RobustResult(status=Status.UNKNOWN, reason=reason, notes=tuple(self.notes),
                            seconds=time.perf_counter() - self.t0, **self.base)

    def done(self, status: Status, **kw: Any) -> RobustResult:
        """The result, with the statistics gathered so far."""
        self.stats["seconds"] = time.perf_counter() - self.t0
        return RobustResult(status=status, notes=tuple(self.notes),
                            seconds=self.stats["seconds"], stats=self.stats, **self.base, **kw)


@dataclass(frozen=True)
class _Goal:
    """The grounded proof obligation: what Z3 must satisfy to change the verdict."""

    inst: Instance
    rules: list[Rule]
    stab_rules: list[Rule]
    bounds: dict
    passing: bool
    live: list[tuple[int, tuple, object]]  # (rule index, binding, formula) still open
    goal: object  # a formula, or False when nothing can change the verdict


def prove_robust(cell: Cell, layout: Layout, tolerance: float, *,
                 timeout: float | None = DEFAULT_TIMEOUT, prune: bool = True,
                 encoding: str = "smtlib", max_bindings: int = DEFAULT_MAX_BINDINGS,
                 backend: str = "clingo") -> RobustResult:
    """Prove that the verdict of ``layout`` holds for every x/y placement error of every
    part up to ``tolerance`` metres, or refute it with a displaced layout (see the module
    docstring for the exact model). ``prune=False`` is the naive encoding (all pairs,
    nothing decided before Z3), kept for the benchmark. ``encoding``: ``smtlib`` (default:
    one SMT-LIB text parsed once, measured faster to build) or ``api`` (Z3 Python terms).
    ``backend``: who decides the nominal verdict and re-checks a witness (clingo by default).

    Yawed boxes (docs/shapes.md): each part's yaw is fixed and its footprint moves rigidly,
    so every relation stays a conjunction of linear atoms in the displacement
    (cellspec/solver/smt/shapes.py proves it); a rule that relates a cylinder that may move
    to another part is refused by name (``unsupported``: a disc's distance is not linear).

    The stages: the nominal verdict, the rules and their refusals, the grounded goal, Z3,
    and (when Z3 finds a displacement) the witness re-checked by the backend."""
    opts = RobustOptions(timeout=timeout, prune=prune, encoding=encoding,
                         max_bindings=max_bindings, backend=backend)
    run = _nominal(cell, layout, tolerance, opts)
    if run.nominal.verdict == Status.UNKNOWN:
        return run.early(f"the nominal verdict is unknown: {run.nominal.reason}")
    goal = _ground(run)
    if isinstance(goal, RobustResult):
        return goal
    if goal.goal is False:
        return run.done(Status.PROVED)
    return _solve(run, goal)


def _nominal(cell: Cell, layout: Layout, tolerance: float, opts: RobustOptions) -> _RobustRun:
    """The run: the tolerance in grid steps (noted when rounded up) and the nominal verdict."""
    t0 = time.perf_counter()
    steps = validate_tolerance(tolerance)
    tms = timeout_ms(opts.timeout)
    if opts.encoding not in ("api", "smtlib"):
        raise ValueError("encoding must be 'api' or 'smtlib'")
    nominal = check(cell, layout, timeout=opts.timeout, backend=opts.backend)
    notes: list[str] = []
    decided = float(steps * g.RESOLUTION)  # what the proof is about, stated everywhere
    if steps * g.RESOLUTION != Fraction(str(float(tolerance))):
        notes.append(f"tolerance {float(tolerance):g} m rounded up to {decided:.4f} m (the "
                     "0.1 mm grid, the safe side): the result is about "
                     f"{decided:.4f} m")
    base = {"tolerance": decided, "requested": float(tolerance), "steps": steps,
            "verdict": nominal.verdict}
    return _RobustRun(cell, layout, opts, t0, steps, tms, nominal, base, notes)


def _ground(run: _RobustRun) -> _Goal | RobustResult:
    """The rules the proof covers (refusals and the stability pre-check first), grounded
    on the displaced problem into one goal; ``unknown`` when a rule is refused or a
    limit is hit."""
    inst = build_instance(run.cell, run.layout)
    if inst.off_grid:
        run.notes.append("the proof is about the layout rounded to the 0.1 mm grid")
    rules = error_rules(run.cell, run.layout)
    stab_rules = [r for r in rules if ir.uses_relation(r.body, STABILITY_RELATIONS)]
    rules = [r for r in rules if r not in stab_rules]
    check_fragment(rules)
    refused = moving_refusal(rules, "the robustness proof")
    if refused:
        return run.early(refused)
    if stab_rules:
        why = _stability_not_robust(inst, run.steps, run.nominal, stab_rules)
        if why:
            return run.early(why)
        run.notes.append("stability: every structure stands with the margin plus twice the "
                         "tolerance, so no displacement within the tolerance makes it fall")
    stats = run.stats
    t1 = time.perf_counter()
    prob, bounds = displaced_problem(inst, rules, run.steps, prune=run.opts.prune)
    builder = Builder(bounds) if run.opts.prune else NoFold(bounds)
    try:
        grounded = ground_rules(prob, rules, builder, run.opts.max_bindings)
    except (GroundingLimit, Unsupported) as exc:
        return run.early(str(exc))
    stats["ground_s"] = time.perf_counter() - t1
    stats["atoms"] = float(builder.atoms)
    stats["folded_atoms"] = float(builder.folded)
    passing = run.nominal.verdict == Status.PASS
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
    return _Goal(inst, rules, stab_rules, bounds, passing, live, goal)


def _solve(run: _RobustRun, goal: _Goal) -> RobustResult:
    """Z3 on the goal: unsat proves the verdict; a model is a witness, re-checked."""
    import z3  # lazy: z3 only when a proof runs (the check verb imports formal to validate)

    stats = run.stats
    t2 = time.perf_counter()
    ctx = z3.Context()
    solver = seeded_solver(run.tms, ctx)
    low = Z3Lowering(var_name, ctx)
    bounds = goal.bounds
    if run.opts.encoding == "api":
        gt = low.term(goal.goal)
        solver.add(gt)
        for v, term in low.vars.items():
            lo, hi = bounds[v]
            solver.add(term >= lo, term <= hi)
    else:
        names = sorted(variables(goal.goal), key=str)
        decl = [f"(declare-const {var_name(v)} Int)" for v in names]
        for v in names:
            lo, hi = bounds[v]
            decl.append(f"(assert (and (>= {var_name(v)} {smt_num(lo)}) "
                        f"(<= {var_name(v)} {smt_num(hi)})))")
        text = "\n".join(decl) + "\n(assert " + smtlib(goal.goal, var_name) + ")\n"
        solver.from_string(text)
        for v in names:
            low.vars[v] = z3.Int(var_name(v), ctx)
    stats["build_s"] = time.perf_counter() - t2
    t3 = time.perf_counter()
    res = solver.check()
    stats["solve_s"] = time.perf_counter() - t3
    if res == z3.unsat:
        return run.done(Status.PROVED)
    if res != z3.sat:
        return run.done(Status.UNKNOWN, reason=f"z3 gave up: {solver.reason_unknown()} "
                        f"(time limit {run.opts.timeout} s)")
    return _witness(run, goal, solver.model(), low)


def _witness(run: _RobustRun, goal: _Goal, m: Any, low: Z3Lowering) -> RobustResult:
    """The displaced layout of Z3's model, the rule it breaks (nominal pass), and the
    backend's re-check of it: ``refuted`` only when the backend confirms."""
    import z3  # lazy: as in _solve

    inst, rules, backend = goal.inst, goal.rules, run.opts.backend
    dx = np.zeros(inst.n, dtype=np.int64)
    dy = np.zeros(inst.n, dtype=np.int64)
    for v, term in low.vars.items():
        val = m.eval(term, model_completion=True).as_long()
        (dx if v[0] == "dx" else dy)[v[1]] = val
    wl = displaced_layout(run.layout, inst.boxes, dx, dy)
    rule = None
    parts: tuple[str, ...] = ()
    passing = goal.passing
    if passing:
        for k, binding, f in goal.live:
            if z3.is_true(m.eval(low.term(f), model_completion=True)):
                rule = rules[k].name
                top = ir.top_domains(rules[k].body)
                parts = tuple(inst.ids[b] for b, d in zip(binding, top.values(), strict=True)
                              if d == "part")
                break
    recheck = check(run.cell, wl, timeout=run.opts.timeout, backend=backend)
    wj = wl.to_json()
    if not passing and recheck.verdict == Status.FAIL and goal.stab_rules and all(
            v.rule in {r.name for r in goal.stab_rules} for v in recheck.violations):
        return run.done(Status.UNKNOWN, reason="every rule but stability can be made to hold "
                        "by a displacement within the tolerance, and that the structure still "
                        "falls then is not proved (Z3 does not encode the stability LP)")
    confirmed = (recheck.verdict == Status.FAIL and any(v.rule == rule and v.parts == parts
                                                   for v in recheck.violations)) if passing \
        else recheck.verdict == Status.PASS
    if not confirmed and recheck.verdict == Status.UNKNOWN:  # a limit while re-checking
        return run.done(Status.UNKNOWN, reason="the Z3 counterexample was not re-checked by "
                        f"clingo: {recheck.reason}",
                        witness_verdict=recheck.to_json(timing=False))
    if not confirmed:
        raise InternalError("internal disagreement: the Z3 counterexample was not confirmed "
                            f"by {backend} ({backend} says {recheck.verdict}) (internal error)")
    moved = {inst.ids[i]: [round(float(dx[i]) * float(g.RESOLUTION), 4),
                           round(float(dy[i]) * float(g.RESOLUTION), 4)]
             for i in range(inst.n) if dx[i] or dy[i]}
    return run.done(Status.REFUTED, witness=wj, rule=rule, parts=parts, displacement=moved,
                    witness_verdict=recheck.to_json(timing=False))


def _stability_not_robust(inst: Any, steps: int, nominal: Any, stab_rules: list) -> str | None:
    """Why the stability rules' verdict is not proved robust to ``steps`` grid steps, or
    None when it is. Displacing every part by up to T moves a centre of mass (with what
    it carries) by at most T and a contact edge by at most T, so a forest structure that
    stands with the margin M + 2T stands with M after any displacement (its contacts,
    wider than 2(M + 2T), are kept). Side contacts are left out of that check (a
    displacement may open the gap a leaning part relies on): a verdict that needs them is
    not proved. Structures that need an LP and failing verdicts that
    rest on stability alone are not proved: unknown, never a silent pass."""
    names = {r.name for r in stab_rules}
    if nominal.verdict != Status.PASS:
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
    # without side contacts: a displacement may open the gap a leaning part relies on
    rep = stab.report(strict, stages_too="stability_stages" in names, sides=False)
    bad = list(rep.why.values()) + list(rep.stage_why.values())
    if bad:
        return (f"stability is not proved robust to {t:g} m: that needs every structure to "
                f"stand with the margin plus twice the tolerance ({base_margin + 2 * t:.4f} m), "
                f"and {bad[0]}")
    return None


