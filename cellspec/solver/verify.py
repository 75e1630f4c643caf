"""verify: a cell and a layout in, a Verdict out (every violation, named and located).

The backend is a :class:`cellspec.solver.checkers.Checker` from the registry: clingo
decides by default; the numpy reference (the tests' oracle, small layouts) and Z3 are
selectable with ``backend=``. A rule the backend refuses makes the verdict ``unknown``
(reason ``unsupported``, naming the rule), never ``pass``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir
from cellspec.core.limits import DEFAULT_MAX_MEMORY
from cellspec.core.status import BackendStatus, Reason, Status
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout
from cellspec.solver import checkers, ground_size, pref_score, undecided
from cellspec.solver.instance import Instance, build_instance
from cellspec.solver.messages import MessageContext
from cellspec.solver.result import PreferenceScore, Verdict, Violation
from cellspec.solver.rounding import needs_analysis, rounding_analysis
from cellspec.solver.rounding_exact import exact_violations

MAX_LISTED = 10_000  # violations listed per rule; the rest are counted in a note


def raw_violations(cell: Cell, inst: Instance, rules: Iterable[Rule], backend: str = "clingo",
                   timeout: float | None = None
                   ) -> tuple[BackendStatus, list[tuple[int, tuple]], str | None]:
    """(status, [(rule index into ``rules``, binding)], reason) from the chosen backend
    (status ``done`` or ``unknown``); the rules are not screened by ``supported``."""
    res = checkers.get(backend).violations(inst, tuple(rules), timeout)
    return res.status, list(res.violations), res.reason


def check(cell: Cell, layout: Layout, *, backend: str = "clingo",
          timeout: float | None = None, max_memory: int | None = None) -> Verdict:
    """Check a layout against every rule of the cell; ``unknown`` if a limit was hit or the
    backend refuses a rule. ``max_memory`` (bytes; default
    :data:`cellspec.core.limits.DEFAULT_MAX_MEMORY`) is the budget the clingo program's
    estimated ground size must fit, else ``unknown`` (reason: grounding limit) before any
    grounding (:mod:`cellspec.solver.ground_size`)."""
    t0 = time.perf_counter()
    checker = checkers.get(backend)
    inst = build_instance(cell, layout)
    notes = list(inst.notes)
    rules, skipped = checkers.order_rules(cell.rules, layout.order is not None)
    if skipped:
        notes.append(f"not checked, the layout has no order: {', '.join(skipped)}")

    def unknown(reason: str, code: Reason | None, **kw) -> Verdict:
        return Verdict(verdict=Status.UNKNOWN, reason=reason, reason_code=code,
                       notes=tuple(notes), parts=inst.n, seconds=time.perf_counter() - t0,
                       backend=backend, skipped_rules=tuple(skipped), **kw)

    # a backend declares whether it decides shapes, the kernel whether they are needed
    if not inst.kernel().boxes_are_parts and not getattr(checker, "shapes", False):
        return unknown(f"unsupported: the {backend} backend does not decide parts at an angle "
                       "or cylinders yet (docs/shapes.md)", Reason.UNSUPPORTED)
    refused = checker.supported(rules)
    if refused:
        names = list(dict.fromkeys(r.rule for r in refused))
        notes.extend(f"the {backend} backend refuses {r.sentence()}" for r in refused)
        return unknown(f"unsupported: the {backend} backend cannot decide "
                       f"{', '.join(names)} exactly (see the notes); use the clingo backend",
                       Reason.UNSUPPORTED)
    if backend == "clingo":
        budget = DEFAULT_MAX_MEMORY if max_memory is None else max_memory
        est = ground_size.estimate(inst, checkers.compiled(tuple(rules), inst), rules, budget)
        if est is not None:
            return unknown(est.reason(budget), Reason.GROUNDING_LIMIT)
    # a structure whose stability LP hits a limit is left undecided, the rest is decided
    res, open_ = undecided.violations(checker, inst, rules, timeout)
    if res.status != BackendStatus.DONE:
        return unknown(res.reason or "solver limit", res.reason_code)
    violations = list(res.violations)
    rounded = needs_analysis(inst)  # off the grid, or a yaw rounded to a rational rotation
    if rounded:
        ra = rounding_analysis(inst, rules)
        notes.extend(ra.notes)
        redo = [r for r in rules if r.name in ra.touched] if ra.decisive else []
        exact = exact_violations(inst, redo) if redo else None
        if exact is not None:  # the touched rules decided on the layout as written
            keep = {k for k, r in enumerate(rules) if r.name not in exact}
            violations = [(k, b) for k, b in violations if k in keep]
            violations += [(k, b) for k, r in enumerate(rules) for b in exact.get(r.name, ())]
            violations.sort(key=lambda kb: kb[0])  # rule by rule (stable)
            notes.append("decided exactly on the positions as written (the 0.1 mm grid "
                         f"disagrees): {', '.join(exact)}; messages show grid values")
            ra = dataclasses.replace(ra, decisive=[])
    errors, warnings, prefs = _violations(inst, rules, violations, notes)
    score = _score(inst, rules, violations, open_,
                   ra.touched if rounded and ra.decisive else frozenset())
    if open_:  # fail on what is known, naming the undecided structures; else unknown
        notes.extend(undecided.notes(open_, inst.ids))
        if not errors:
            return unknown(undecided.reason(open_, inst.ids), open_[0].code,
                           warnings=tuple(warnings), preferences=tuple(prefs),
                           preference_score=score)
    if rounded:
        # never `pass` where the exact answer may differ, nor `fail` on violations only
        # the rounding may have made (of a rule reading what the rounding decides, on a
        # part it decides it for)
        if ra.decisive and all(ra.may_make(v.rule, v.parts) for v in errors):
            if errors:
                notes.append("violations the rounding may have made, not reported as found: "
                             + ", ".join(f"{v.rule}({', '.join(v.parts)})"
                                         for v in errors[:10]))
            return unknown(rounding_reason(ra.decisive), Reason.ROUNDING,
                           warnings=tuple(warnings), preferences=tuple(prefs),
                           preference_score=score)
    notes.extend(disc_note(inst, rules))
    return Verdict(
        verdict=Status.FAIL if errors else Status.PASS,
        violations=tuple(errors),
        warnings=tuple(warnings),
        preferences=tuple(prefs),
        preference_score=score,
        notes=tuple(notes),
        parts=inst.n,
        seconds=time.perf_counter() - t0,
        backend=backend,
        skipped_rules=tuple(skipped),
    )


def _violations(inst: Instance, rules: list[Rule], found: list[tuple[int, tuple]],
                notes: list[str]) -> tuple[list[Violation], list[Violation], list[Violation]]:
    """(errors, warnings, unmet preferences): the backend's (rule index, binding) pairs as
    violations, named and located, at most MAX_LISTED per rule (the rest counted in
    ``notes``)."""
    ctx = MessageContext(inst)
    errors: list[Violation] = []
    warnings: list[Violation] = []
    prefs: list[Violation] = []
    into = {"error": errors, "warning": warnings, "preference": prefs}
    listed: dict[str, int] = {}
    for k, binding in found:
        rule = rules[k]
        listed[rule.name] = listed.get(rule.name, 0) + 1
        if listed[rule.name] > MAX_LISTED:
            continue
        top = ir.top_domains(rule.body)
        env: dict[str, int | str] = dict(zip(top, binding, strict=True))
        parts = tuple(inst.ids[int(env[v])] for v, d in top.items() if d == "part")
        zones = tuple(str(env[v]) for v, d in top.items() if d != "part")
        v = Violation(rule=rule.name, parts=parts, message=ctx.render(rule.message, env),
                      source=str(rule.source), severity=rule.severity, zones=zones,
                      weight=rule.weight)
        into[rule.severity].append(v)
    for name, count in listed.items():
        if count > MAX_LISTED:
            notes.append(f"{name}: {count} violations, the first {MAX_LISTED} are listed")
    return errors, warnings, prefs


def _score(inst: Instance, rules: list[Rule], found: list[tuple[int, tuple]],
           open_: tuple, rounded: frozenset[str]) -> PreferenceScore | None:
    """The preference score of the checked layout (:mod:`cellspec.solver.pref_score`); its
    ``met`` is None (the reason says why) when a preference reads what the check left
    undecided: a structure's stability, or a relation the 0.1 mm grid decides."""
    sc = pref_score.score(rules, found, inst.n, len(inst.keepouts), len(inst.robots))
    if sc is None:
        return None
    prefs = [r for r in rules if pref_score.is_preference(r)]
    why = []
    if open_:
        why += [r.name for r in prefs
                if any(f in undecided.STABILITY_RELATIONS for f in checkers.features_of(r))]
    why += [r.name for r in prefs if r.name in rounded and r.name not in why]
    if not why:
        return sc
    return PreferenceScore(met=None, total=sc.total, reason=(
        f"{', '.join(why)} read{'s' if len(why) == 1 else ''} what this check left undecided "
        "(a structure's stability or the 0.1 mm grid's rounding: see the notes)"))


def rounding_reason(decisive: list[str]) -> str:
    """The ``unknown`` reason when grid rounding decides a relation the rules read."""
    what = ", ".join("an attribute comparison" if d == "comparison" else d for d in decisive)
    return ("rounding: the 0.1 mm grid and the exact positions disagree on "
            f"{what}, which the rules read (see the notes); place the parts on "
            "the 0.1 mm grid or away from the tolerance")


def disc_note(inst: Instance, rules: Iterable[Rule]) -> list[str]:
    """The stability LP's one approximation, with its bound (issue 22: a conservative
    approximation is printed with the verdict): a cylinder's base carries forces on its
    inscribed polygon, which lies at most R (1 - cos(pi / sides)) inside the rim."""
    if inst.cyl is None or not inst.cyl.any():
        return []
    if not any(ir.uses_relation(r.body, {"stable", "placed_stable"}) for r in rules):
        return []
    from cellspec.solver.stability_shapes import DISC_SIDES, RIM, RIM_EDGE

    b = inst.boxes[inst.cyl]
    r_max = float((b[:, 1] - b[:, 0]).max()) / 2 / g.U_PER_M  # metres
    loss = r_max * (1 - np.cos(np.pi / DISC_SIDES))
    return [f"stability: a cylinder's base carries forces on its inscribed {DISC_SIDES}-gon, "
            f"at most {loss * 1000:.2f} mm inside its rim (R {r_max:.3f} m): conservative, "
            "it can only fail a structure that stands",
            f"stability: a contact with a cylinder carries only {RIM * float(g.U) * 1000:.1f} "
            f"mm inside the cylinder's rim and {RIM_EDGE * float(g.U) * 1000:.1f} mm inside a "
            "box's edge against it (rims taken as rounded, as pybullet's are: docs/shapes.md)"]
