"""Preferences in repair: minimal change first and preferences to break ties, or, with
``--prefer``, preferences first.

After the repair (:func:`.repair.repair`) has its verified answer, one more CP-SAT model of
the whole layout (every part movable, :class:`.placement._Geo`) carries the preference
literals (:mod:`.prefer`) and is solved lexicographically (:func:`.prefer.lex_solve`):
the repair objective (parts moved, free moves, L1), then the weight met; with ``prefer``
the weight met first. Its answer is re-sequenced and re-verified with clingo and replaces
the repair's only when it passes, meets more weight and (ties mode) changes no more than
the repair did (parts moved, then L1); otherwise the repair's answer stands with its score
(not claimed optimal).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout, layout_from_obj
from cellspec.solver.cpsat.prefer import (
    PartBoxes,
    encode,
    lex_solve,
    objective_of,
    preference_rules,
)
from cellspec.solver.cpsat.results import Move, RepairResult

SEED = 1


def repair_preferring(cell: Cell, layout: Layout, *, prefer: bool = False,
                      time_limit: float | None = 10.0, workers: int = 1, **kw: Any
                      ) -> tuple[RepairResult, dict[str, Any] | None]:
    """:func:`.repair.repair`, then the preference stage (module doc) within the same
    ``time_limit``: the result and the ``preferences`` object (None without preference
    rules: then exactly the repair's answer)."""
    from cellspec.solver.cpsat.repair import repair, with_blocked

    t0 = time.perf_counter()
    if not preference_rules(cell):
        return repair(cell, layout, time_limit=time_limit, workers=workers, **kw), None  # type: ignore[arg-type]
    time_limit = 10.0 if time_limit is None else time_limit
    share = 0.5  # of the limit: the repair, then the preference stage
    r = repair(cell, layout, time_limit=share * time_limit, workers=workers, **kw)
    left = max(0.2, time_limit - (time.perf_counter() - t0))
    cell_b = with_blocked(cell, tuple(kw.get("blocked", ())))
    if r.status not in (Status.OPTIMAL, Status.FEASIBLE) or r.layout is None:
        return r, None
    notes: list[str] = []
    if kw.get("allow_rotate"):
        notes.append("preferences are not optimised with --allow-rotate")
        return r, _score(cell, layout_from_obj(r.layout), False, notes, left)
    if r.already_valid and not prefer:  # nothing moves: minimal change is the input itself
        return r, _score(cell, layout_from_obj(r.layout), True, notes, left)
    got = _stage(cell, cell_b, layout, r, prefer, left, workers, notes)
    return got


def _score(cell: Cell, layout: Layout, optimal: bool, notes: list[str], timeout: float
           ) -> dict[str, Any]:
    from cellspec.solver.asp.prefer import preference_cost, score_json

    return score_json(preference_cost(cell, layout, timeout=timeout), optimal, notes)


# complexity: one model, its lexicographic solve, reading back, re-verifying, comparing
def _stage(cell: Cell, cell_b: Cell, layout: Layout, r: RepairResult, prefer: bool,  # noqa: C901
           budget: float, workers: int, notes: list[str]
           ) -> tuple[RepairResult, dict[str, Any]]:
    """The preference stage on the whole layout; the better of it and ``r``."""
    from cellspec.solver.asp.prefer import preference_cost
    from cellspec.solver.cpsat.placement import GeoOptions, _Geo
    from cellspec.solver.cpsat.sequence import plan
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    repaired = layout_from_obj(r.layout)
    base = preference_cost(cell, repaired, timeout=budget)

    def keep(why: str | None, optimal: bool = False) -> tuple[RepairResult, dict[str, Any]]:
        return r, _score(cell, repaired, optimal, notes + ([why] if why else []),
                         max(0.05, budget - (time.perf_counter() - t0)))

    n = len(layout)
    at = {pid: i for i, pid in enumerate(layout.ids)}
    hint = {at[m.part]: [int(round(v * 10000)) for v in m.dst] for m in r.moves}
    geo = _Geo(cell_b, layout.with_order(None) if layout.order else layout,
               np.ones(n, dtype=bool), GeoOptions(assumptions=False, hint=hint))
    if geo.sr.some():
        return keep("preferences are not optimised for parts at an angle or cylinders")
    box = [[x for a in range(3) for x in (geo.lo(i, a), geo.hi(i, a))] for i in range(n)]
    pb = PartBoxes.of(cell, box, list(layout.types), list(layout.grippers))
    terms = encode(geo.m, cell, pb)
    notes.extend(terms.notes())
    rest = objective_of(geo.m)
    stages = [(terms.met_expr(), "max"), (rest, "min")] if prefer else \
        [(rest, "min"), (terms.met_expr(), "max")]

    def make(k: int, of: int) -> Any:
        s = geo.cp.CpSolver()
        left = max(0.05, budget - (time.perf_counter() - t0))
        s.parameters.max_time_in_seconds = 0.8 * left / (of - k)
        s.parameters.max_deterministic_time = 0.1 * budget / of
        s.parameters.num_workers = workers
        s.parameters.random_seed = SEED
        return s

    res = lex_solve(geo.m, stages, make)
    if res.status not in (geo.cp.OPTIMAL, geo.cp.FEASIBLE) or len(res.values) < 2:
        return keep("the preference stage found no better layout within the limit; the "
                    "score is not claimed optimal")
    s = res.solver
    pos = np.asarray(layout.pos, dtype=np.float64).copy()
    moves: list[Move] = []
    why = {m.part: m.why for m in r.moves}
    for i in range(n):
        c = [int(s.Value(v)) if not isinstance(v, int) else v for v in geo.c[i]]
        if c != [int(x) for x in geo.c0[i]]:
            dst = [v / 10000 for v in c]
            pos[i] = dst
            free = bool(s.Value(geo.free[i])) if i in geo.free else True
            moves.append(Move(part=layout.ids[i], src=tuple(float(v) / 10000  # type: ignore
                                                           for v in geo.c0[i]),
                              dst=tuple(dst), how="free" if free else "shift",  # type: ignore
                              why=why.get(layout.ids[i], "moved to meet more preference "
                                          "weight" if prefer else "moved so the rules hold "
                                          "together")))
    new = dataclasses.replace(layout, pos=pos, order=None)
    order_kept = False
    if layout.order is not None:
        kept = new.with_order(tuple(layout.order))
        after = check(cell_b, kept, timeout=max(0.05, budget - (time.perf_counter() - t0)))
        if after.verdict == Status.PASS:
            new, order_kept = kept, True
    if not order_kept:
        pr = plan(cell_b, new, time_limit=max(0.05, budget - (time.perf_counter() - t0)))
        if pr.status != Status.OPTIMAL or pr.verdict is None:
            return keep(f"the preference stage's layout could not be sequenced ({pr.reason}); "
                        "the score is not claimed optimal")
        new = new.with_order(pr.order)
        after = pr.verdict
    if after.verdict != Status.PASS:
        return keep("the preference stage's layout does not re-verify (a rule CP-SAT does not "
                    "encode, e.g. stability); the score is not claimed optimal")
    got = preference_cost(cell, new, timeout=max(0.05, budget - (time.perf_counter() - t0)))
    k_pref = 0 if prefer else 1
    proved = res.proved[k_pref] and (prefer or res.proved[0]) and not terms.refused
    l1_new = round(sum(m.l1 for m in moves), 6)
    no_more_change = (len(moves), l1_new) <= (r.parts_moved, round(r.displacement, 6))
    if got.unknown is not None or got.met <= base.met or not (prefer or no_more_change):
        # the repair's own answer is as good: optimal if the stage proved this weight best
        # and the repair's change equals the stage's
        same = got.unknown is None and got.met == base.met and (prefer or no_more_change)
        return keep(None if proved and same else "the score is not claimed optimal",
                    proved and same)
    from cellspec.solver.asp.prefer import score_json

    # optimal: both stages proved (minimal change and the weight met, in the order asked)
    out = RepairResult(status=r.status if all(res.proved) else Status.FEASIBLE, before=r.before,
                       seconds=r.seconds + time.perf_counter() - t0,
                       layout=new.to_json(), moves=tuple(moves),
                       reordered=not order_kept and layout.order is not None,
                       verdict=after, first_seconds=r.first_seconds)
    return out, score_json(got, proved, notes)


__all__ = ["repair_preferring"]
