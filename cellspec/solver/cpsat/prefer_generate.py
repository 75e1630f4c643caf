"""Preferences in ``generate``: the generated parts' boxes as expressions of the
structures' position variables, the lexicographic solve (anchors within their intent
tolerance, then as close to them as can be, then the weight met, then the built-in
objective) and the score of the result.
The reified literals themselves are :mod:`cellspec.solver.cpsat.prefer`."""

from __future__ import annotations

from typing import Any

from cellspec.dsl.model import Cell
from cellspec.solver.cpsat.generate_model import LIM
from cellspec.solver.cpsat.prefer import (
    MAX_LITERALS,
    PartBoxes,
    Reifier,
    encode,
    lex_solve,
    objective_of,
)


def generate_boxes(cell: Cell, structs: list[Any], z0: int) -> PartBoxes | str:
    """The generated parts' boxes as CP-SAT expressions of the structures' corner
    variables, in the order ``generate`` names the parts (structure by structure, part by
    part); a sentence when a structure's parts are not fixed in advance (a packing)."""
    box: list[list[Any]] = []
    types: list[str] = []
    grippers: list[str | None] = []
    for st in structs:
        if st.packing:
            return (f"{st.name} is a packing: which parts exist, and where, is chosen by the "
                    "solver, so its parts cannot be named in advance")
        X, Y = 2 * st.ax, 2 * st.ay
        for px, py, pz, gr in st.parts:
            hx, hy, hz = st.s[0] // 2, st.s[1] // 2, st.s[2] // 2
            box.append([X + px - hx, X + px + hx, Y + py - hy, Y + py + hy,
                        z0 + pz - hz, z0 + pz + hz])
            types.append(st.ptype)
            grippers.append(gr)
    return PartBoxes.of(cell, box, types, grippers)


def generate_solve(m: Any, cell: Cell, structs: list[Any], z0: int, make_solver: Any,
                   pref: dict[str, Any]) -> tuple[int, Any]:
    """generate's solve on a cell with preference rules: every hard constraint of ``m``
    holds; the command's anchors first (missed, then distance), then the weight met is
    maximised, then the model's own objective under that weight (:func:`lex_solve`). ``pref``
    receives the weight met in the model, the encoded total, whether the weight is proved
    best and the notes (a rule not encoded, or the whole design)."""
    from ortools.sat.python import cp_model

    pb = generate_boxes(cell, structs, z0)
    if isinstance(pb, str):
        pref.update(model_met=None, proved=False, notes=[
            f"preferences are not optimised: {pb}; the score is not claimed optimal"])
        s = make_solver(0, 1)
        return s.Solve(m), s
    terms = encode(m, cell, pb)
    rest = objective_of(m)
    # the request first: each `at` within its tolerance where possible, then as close to
    # it as the hard rules allow (a preference never moves a structure from where the
    # command put it), then the weight met, then the model's own objective
    intent = [(e, "min") for e in (anchors_missed(m, structs, pb), anchor_distance(m, structs))
              if e is not None]
    stages = [*intent, (terms.met_expr(), "max"), (rest, "min")]
    res = lex_solve(m, stages, make_solver)
    pref.update(notes=terms.notes(), refused=bool(terms.refused))
    if res.status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        k = len(intent)
        pref.update(model_met=terms.met_value(res.solver.BooleanValue),
                    proved=len(res.proved) > k and all(res.proved[:k + 1])
                    and not terms.refused)
    return res.status, res.solver


def anchors_missed(m: Any, structs: list[Any], pb: PartBoxes) -> Any:
    """How many structures with an ``at (x, y)`` stand farther than the intent's tolerance
    (:data:`cellspec.dsl.design.AT_TOL`, less 0.1 mm so rounding never decides it) from
    it, on x or on y (their footprint centre): a linear expression, or None when no
    structure has an anchor. The design verb refuses a layout that misses an anchor, so
    preferences rank after these."""
    from cellspec.core import geometry as g
    from cellspec.dsl.design import AT_TOL

    tol = int(g.to_u(AT_TOL)) - 2
    rf = Reifier(m, pb, [MAX_LITERALS])
    missed: list[Any] = []
    for st in structs:
        if st.packing or st.spec.at is None:
            continue
        cx, cy = 2 * st.ax + st.w // 2, 2 * st.ay + st.d // 2
        tx, ty = g.to_u_int(st.spec.at[0]), g.to_u_int(st.spec.at[1])
        within = rf.all_of([rf.le(cx - tx, tol), rf.ge(cx - tx, -tol), rf.le(cy - ty, tol),
                            rf.ge(cy - ty, -tol)])
        missed.append(1 - int(within) if isinstance(within, bool) else within.Not())
    return sum(missed) if missed else None


def anchor_distance(m: Any, structs: list[Any]) -> Any:
    """The L1 distance (U) of the structures with an ``at (x, y)`` from their anchors (their
    footprint centre on x and y, as generate's own objective measures it): a linear
    expression, or None when no structure has an anchor."""
    from cellspec.core import geometry as g

    dist: list[Any] = []
    for st in structs:
        if st.packing or st.spec.at is None:
            continue
        tx = g.to_u_int(st.spec.at[0]) - st.w // 2
        ty = g.to_u_int(st.spec.at[1]) - st.d // 2
        for v, target in ((2 * st.ax, tx), (2 * st.ay, ty)):
            dv = m.new_int_var(0, 4 * LIM, "")
            m.add_abs_equality(dv, v - target)
            dist.append(dv)
    return sum(dist) if dist else None


def final_score(cell: Cell, layout: Any, pref: dict[str, Any], timeout: float
                ) -> dict[str, Any]:
    """The ``preferences`` object of a generated layout: the weight met counted by clingo
    on the layout itself; ``optimal`` only when CP-SAT proved the weight best, every rule
    was encoded and the two counts agree (a disagreement is said, never hidden)."""
    from cellspec.solver.asp.prefer import preference_cost, score_json

    score = preference_cost(cell, layout, timeout=timeout)
    notes = list(pref.get("notes", ()))
    model_met = pref.get("model_met")
    agree = model_met is not None and score.unknown is None
    if agree and not pref.get("refused") and model_met != score.met:
        notes.append(f"internal error: CP-SAT counted {model_met} weight met, clingo "
                     f"{score.met}; the score is not claimed optimal")
        agree = False
    return score_json(score, bool(pref.get("proved")) and agree, notes)


__all__ = ["anchor_distance", "anchors_missed", "final_score", "generate_boxes", "generate_solve"]
