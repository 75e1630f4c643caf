"""Anytime improvement of a verified repair by large-neighbourhood search (issue 29.2).

From the current best layout (the constructive repair, or the pipeline's), one
neighbourhood at a time: a moved part (the worst moved first: largest L1) and the moved
parts whose original places lie near its own. Those parts are set back where they were in
the input and solved again by the placement model (:mod:`.placement`, one cluster of
:mod:`.cluster_solve`), every other part fixed where the current layout has it; the
objective is the pipeline's (parts moved, free moves, L1, counted from the input) with the
current positions as the hint. A better answer is re-ordered and re-verified by clingo
(:func:`.repair_first.with_order`) and kept only if it passes. Deterministic: every solve
has a deterministic-time limit and neighbourhoods come in a fixed order.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.status import Status
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat.cluster_solve import pos_m, solve_cluster
from cellspec.solver.cpsat.clusters import Cluster
from cellspec.solver.cpsat.repair_first import First, moves_of, with_order
from cellspec.solver.instance import build_instance

NEAR = 1500  # 0.15 m (0.1 mm): moved parts whose original places are this close join
MAX_MOVABLE = 8  # parts per neighbourhood
SLACK = 300  # 0.03 m: how much farther than now a part of the neighbourhood may move
DET = 0.3  # deterministic seconds per neighbourhood


def _centres(layout: Layout) -> np.ndarray:
    return np.rint(np.asarray(layout.pos, dtype=np.float64) * 10000).astype(np.int64)


def _key(moves: tuple) -> tuple[int, int, float]:
    return (len(moves), sum(m.how == "free" for m in moves), round(sum(m.l1 for m in moves), 6))


def improve(cell: Cell, layout: Layout, best: First, why: dict[str, list[str]],
            deadline: float, left: Callable[[], float], workers: int = 1) -> First:
    """The best verified layout found from ``best`` before ``deadline``."""
    if best.layout is None:
        return best
    c_in = _centres(layout)
    inst_in = build_instance(cell, layout.with_order(None))
    tried: set[tuple[int, ...]] = set()
    # ordering and verifying a layout is bounded by no limit (a 21-part canopy: 2.7 s on
    # the loaded machine, started 0.6 s before the deadline): the solve stops that long
    # before the deadline (the longest so far, first the constructive repair's), and a
    # better layout is verified only if that still fits
    ver = max(0.05, best.verify_s)
    step = 0.1  # the longest neighbourhood so far (solve and verify): one more must fit
    while time.perf_counter() < deadline - 0.05 - 2 * step - ver:
        t_step = time.perf_counter()
        cur = best.layout
        assert cur is not None
        c_cur = _centres(cur)
        d = np.abs(c_cur - c_in).sum(axis=1)
        moved = [int(i) for i in np.argsort(-d, kind="stable") if d[i] > 0]
        todo = None
        for p in moved:
            dist = np.abs(c_in[moved] - c_in[p]).max(axis=1)
            near = [moved[k] for k in np.argsort(dist, kind="stable").tolist()
                    if dist[k] <= NEAR][:MAX_MOVABLE]
            hood = tuple(sorted(near))
            if hood not in tried:
                todo = hood
                break
        if todo is None:
            return best
        tried.add(todo)
        got = _solve(cell, layout, cur, todo, c_in, c_cur, deadline - ver, workers)
        if got is None or _key(moves_of(layout, got, why, inst_in)) >= _key(best.moves):
            step = max(step, time.perf_counter() - t_step)
            continue
        if time.perf_counter() + ver > deadline:
            return best  # no time to verify it: the verified best stands
        t_ver = time.perf_counter()
        out, reordered, v, _ = with_order(cell, layout, got, left)
        ver = max(ver, time.perf_counter() - t_ver)
        step = max(step, time.perf_counter() - t_step)
        if out is None or v is None or v.verdict != Status.PASS:
            continue
        best = First(layout=out, moves=moves_of(layout, out, why, inst_in),
                     reordered=reordered, verdict=v, verify_s=ver)
        tried.clear()  # a new layout: every neighbourhood again
    return best


def _solve(cell: Cell, layout: Layout, cur: Layout, hood: tuple[int, ...], c_in: np.ndarray,
           c_cur: np.ndarray, deadline: float, workers: int) -> Layout | None:
    """The neighbourhood solved with the rest of ``cur`` fixed; the new layout (no order)
    or None."""
    pos = np.asarray(cur.pos, dtype=np.float64).copy()
    pos[list(hood)] = np.asarray(layout.pos, dtype=np.float64)[list(hood)]
    hybrid = dataclasses.replace(cur, pos=pos, order=None)
    inst = build_instance(cell, hybrid)
    b = inst.boxes
    n = len(layout)
    reach = np.zeros((n, 3), dtype=np.int64)
    for i in hood:
        reach[i] = np.abs(c_cur[i] - c_in[i]) + SLACK
    lo = b[:, 0::2] - 2 * reach
    hi = b[:, 1::2] + 2 * reach
    hl = np.asarray(hood)
    margin = g.relation_margin(b, inst.eps, flanks=True, opening=inst.opening,
                               depth=inst.depth) + 2
    close = np.zeros(n, dtype=bool)
    for i in hl.tolist():
        ok = np.ones(n, dtype=bool)
        for a in range(3):
            ok &= (b[:, 2 * a] - hi[i, a] <= margin) & (lo[i, a] - b[:, 2 * a + 1] <= margin)
        close |= ok
    close[hl] = True
    parts = tuple(np.nonzero(close)[0].tolist())
    bc = build_instance(cell, cur.with_order(None)).boxes
    hood_set = set(hood)
    anchored = tuple(k for k in parts if k not in hood_set and not any(
        bool(g.supports(bc[q], bc[k], inst.eps)) for q in hood))
    cl = Cluster(parts=parts, movable=hood, reach=reach[list(parts)], anchored=anchored)
    wall = deadline - time.perf_counter()
    if wall <= 0.05:
        return None
    sol = solve_cluster(cell, hybrid, cl, keep_shape=False, grip_clear=False, must_move=(),
                        wall=wall, det=DET, workers=workers,
                        hint={i: tuple(int(x) for x in c_cur[i]) for i in hood})
    if not sol.ok:
        return None
    new = pos.copy()
    for i, (c, _) in sol.moved.items():
        new[i] = pos_m(c)
    return dataclasses.replace(cur, pos=new, order=None)
