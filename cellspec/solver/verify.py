"""verify: a cell and a layout in, a Verdict out (every violation, named and located).

The backend is a :class:`cellspec.solver.checkers.Checker` from the registry: clingo
decides by default; the numpy reference (the tests' oracle, small layouts) and Z3 are
selectable with ``backend=``. A rule the backend refuses makes the verdict ``unknown``
(reason ``unsupported``, naming the rule), never ``pass``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import ir, shapes
from cellspec.core.limits import DEFAULT_MAX_MEMORY
from cellspec.core.status import Reason, Status
from cellspec.dsl.model import Cell, Rule
from cellspec.layout import Layout
from cellspec.solver import checkers, ground_size, undecided
from cellspec.solver.instance import Instance, build_instance
from cellspec.solver.messages import MessageContext
from cellspec.solver.result import Verdict, Violation

MAX_LISTED = 10_000  # violations listed per rule; the rest are counted in a note


def raw_violations(cell: Cell, inst: Instance, rules: Iterable[Rule], backend: str = "clingo",
                   timeout: float | None = None) -> tuple[str, list[tuple[int, tuple]], str | None]:
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

    if not inst.plain and not getattr(checker, "shapes", False):
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
    if res.status != "done":
        return unknown(res.reason or "solver limit", res.reason_code)
    ctx = MessageContext(inst)
    errors: list[Violation] = []
    warnings: list[Violation] = []
    listed: dict[str, int] = {}
    for k, binding in res.violations:
        rule = rules[k]
        listed[rule.name] = listed.get(rule.name, 0) + 1
        if listed[rule.name] > MAX_LISTED:
            continue
        top = ir.top_domains(rule.body)
        env: dict[str, int | str] = dict(zip(top, binding, strict=True))
        parts = tuple(inst.ids[int(env[v])] for v, d in top.items() if d == "part")
        zones = tuple(str(env[v]) for v, d in top.items() if d != "part")
        v = Violation(rule=rule.name, parts=parts, message=ctx.render(rule.message, env),
                      source=str(rule.source), severity=rule.severity, zones=zones)
        (errors if rule.severity == "error" else warnings).append(v)
    for name, count in listed.items():
        if count > MAX_LISTED:
            notes.append(f"{name}: {count} violations, the first {MAX_LISTED} are listed")
    if open_:  # fail on what is known, naming the undecided structures; else unknown
        notes.extend(undecided.notes(open_, inst.ids))
        if not errors:
            return unknown(undecided.reason(open_, inst.ids), open_[0].code,
                           warnings=tuple(warnings))
    if inst.off_grid or inst.shapes is not None:  # a yaw is rounded to a rational rotation
        rnotes, decisive = rounding_analysis(inst, rules)
        notes.extend(rnotes)
        if decisive and not errors:  # never `pass` where the exact answer may differ
            return unknown(rounding_reason(decisive), Reason.ROUNDING,
                           warnings=tuple(warnings))
    notes.extend(disc_note(inst, rules))
    return Verdict(
        verdict=Status.FAIL if errors else Status.PASS,
        violations=tuple(errors),
        warnings=tuple(warnings),
        notes=tuple(notes),
        parts=inst.n,
        seconds=time.perf_counter() - t0,
        backend=backend,
        skipped_rules=tuple(skipped),
    )


def _tie_notes(inst: Instance, sh: shapes.ShapesU, limit: int, changed: list[str]
               ) -> list[str]:
    """The decisions the kernel logged within YAW_BAND of their threshold on a part whose
    yaw was rounded to a rational rotation (each moves a corner by < 1e-6 of its size)."""
    out: list[str] = []
    for rel, a, b in dict.fromkeys(sh.ties):
        if rel not in changed:
            changed.append(rel)
        if len(out) < 3 * limit:
            parts = inst.ids[a] + ("" if b < 0 else f", {inst.ids[b]}")
            out.append(f"the rational rotation of the yaws (docs/shapes.md) decides {rel}("
                       f"{parts}): it lies within a millionth of its threshold")
    return out


def _float_shapes(inst: Instance, exact: np.ndarray) -> shapes.ShapesU:
    """The shapes at the positions, sizes and yaws as given (float, unrounded); ``exact``
    (the float boxes, filled in here) become their enclosing boxes."""
    assert inst.yaw_deg is not None and inst.cyl is not None
    yaw, cyl = inst.yaw_deg, inst.cyl
    pos_u = inst.pos_m / float(g.U)
    half_u = inst.size_m / (2 * float(g.U))
    plain = ~cyl & shapes.axis_aligned(yaw)
    odd = plain & (shapes.quarter_turns(yaw) % 2 == 1)  # plain quarter turns: sizes swap
    for k in (0, 1):
        exact[odd, 2 * k] = pos_u[odd, k] - half_u[odd, 1 - k]
        exact[odd, 2 * k + 1] = pos_u[odd, k] + half_u[odd, 1 - k]
    fs = shapes.shapes_float(pos_u, half_u, yaw, cyl, exact)
    ex, ey = fs.extent_xy()
    turn = ~plain
    exact[turn, 0], exact[turn, 1] = pos_u[turn, 0] - ex[turn], pos_u[turn, 0] + ex[turn]
    exact[turn, 2], exact[turn, 3] = pos_u[turn, 1] - ey[turn], pos_u[turn, 1] + ey[turn]
    return fs


# which relations of the rules each rounding check decides (a rule reading none of them
# cannot change its verdict because of that check)
ROUNDING_RELATIONS: dict[str, frozenset[str]] = {
    "contact": frozenset({"contact"}),
    "overlaps": frozenset({"overlaps"}),
    "supports": frozenset({"supports", "on", "stable"}),
    "workspace": frozenset({"inside"}),
    "reachable": frozenset({"reachable"}),
    # decided within YAW_BAND of the threshold on a yawed part (shapes.ShapesU.ties)
    "near": frozenset({"near"}),
    "footprint": frozenset({"supports", "above", "on", "stable"}),
    "above": frozenset({"above"}),
    "flanks": frozenset({"flanks"}),
    "inside": frozenset({"inside"}),
    "intersects": frozenset({"intersects"}),
}


def rounding_reason(decisive: list[str]) -> str:
    """The ``unknown`` reason when grid rounding decides a relation the rules read."""
    return ("rounding: the 0.1 mm grid and the exact positions disagree on "
            f"{', '.join(decisive)}, which the rules read (see the notes); place the parts on "
            "the 0.1 mm grid or away from the tolerance")


def rounding_analysis(inst: Instance, rules: Iterable[Rule], limit: int = 5
                      ) -> tuple[list[str], list[str]]:
    """(notes, decisive relations): the rounding notes, and the names of the relations the
    ``rules`` read whose truth the rounding changes for some part (``unanalysed`` when the
    layout was too dense to analyse). A non-empty second list forbids a ``pass``."""
    used = {n.name for r in rules for n in ir.walk(r.body) if isinstance(n, ir.Rel)}
    changed: list[str] = []
    notes = rounding_notes(inst, limit, changed)
    decisive = [name for name in changed
                if name == "unanalysed" or ROUNDING_RELATIONS[name] & used]
    return notes, decisive


def rounding_notes(inst: Instance, limit: int = 5, changed: list[str] | None = None
                   ) -> list[str]:
    """Relations among nearby parts whose truth changes between the grid and the exact
    float positions: the verdict then depends on the 0.1 mm rounding, and we say so.
    ``changed`` (when given) receives the names of the checks that changed."""
    changed = [] if changed is None else changed
    if inst.shapes is not None and not inst.off_grid:  # on the grid: only the yaws round
        return _tie_notes(inst, inst.shapes, limit, changed)
    pos, size = inst.pos_m, inst.size_m
    exact = np.empty_like(inst.boxes, dtype=np.float64)
    exact[:, 0::2] = (pos - size / 2) / float(g.U)
    exact[:, 1::2] = (pos + size / 2) / float(g.U)
    fshapes = None
    if inst.shapes is not None:  # the shapes at the positions and yaws as given, in float
        fshapes = _float_shapes(inst, exact)
    what = "rounding to the 0.1 mm grid" + ("" if fshapes is None else
                                            " (and of the yaws to rational rotations)")
    try:
        i, j = g.broad_phase(inst.boxes, inst.eps + 4)
    except g.TooDense:
        changed.append("unanalysed")
        return ["rounding to the 0.1 mm grid was not analysed: the layout is too dense"]
    out: list[str] = []
    e = inst.eps
    checks = [("contact", g.contact), ("overlaps", g.overlaps), ("supports", g.supports)]
    for name, fn in checks:
        if fshapes is not None and inst.shapes is not None:
            a = getattr(shapes, name)(inst.shapes, i, j, e)
            b = getattr(shapes, name)(fshapes, i, j, e)
        else:
            a = fn(inst.boxes[i], inst.boxes[j], e)
            b = fn(exact[i], exact[j], e)
        diff = np.nonzero(a != b)[0]
        if len(diff):
            changed.append(name)
        for k in diff[:limit]:
            out.append(f"{what} decides {name}({inst.ids[i[k]]}, "
                       f"{inst.ids[j[k]]}): it is {bool(a[k])} on the grid, {bool(b[k])} "
                       "exactly")
    ws = inst.zones["workspace"]
    if fshapes is not None and inst.shapes is not None:
        every = np.arange(inst.n)
        a = shapes.inside_box(inst.shapes, every, ws.lo, ws.hi, e)  # type: ignore[union-attr]
        b = shapes.inside_box(fshapes, every, ws.lo, ws.hi, e)  # type: ignore[union-attr]
    else:
        a = g.inside_box(inst.boxes, ws.lo, ws.hi, e)  # type: ignore[union-attr]
        b = g.inside_box(exact, ws.lo, ws.hi, e)  # type: ignore[union-attr]
    diff = np.nonzero(a != b)[0]
    if len(diff):
        changed.append("workspace")
    for k in diff[:limit]:
        out.append(f"{what} decides whether {inst.ids[k]} is inside the "
                   "workspace")
    for robot, reach in sorted((inst.reach or {}).items()):
        diff = np.nonzero(g.reachable(inst.boxes, reach) != g.reachable(exact, reach))[0]
        if len(diff) and "reachable" not in changed:
            changed.append("reachable")
        for k in diff[:limit]:
            out.append(f"rounding to the 0.1 mm grid decides reachable({inst.ids[k]}, {robot})")
    return out[: 3 * limit]


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
