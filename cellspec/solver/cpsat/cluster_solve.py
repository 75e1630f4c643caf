"""Solving repair clusters: one cluster's CP-SAT model on its own sub-layout, the fast
local repair (one part at a time), parallel clusters in a fixed merge order, and the
per-cluster report. Used by :func:`cellspec.solver.cpsat.repair.repair` (split out of it:
the pipeline and the pieces it runs are two concepts)."""

from __future__ import annotations

import dataclasses
import time
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat import exact
from cellspec.solver.cpsat.clusters import Cluster
from cellspec.solver.cpsat.placement import GeoOptions, _Geo
from cellspec.solver.cpsat.results import ClusterInfo
from cellspec.solver.cpsat.rotate import PartTurns, chosen
from cellspec.solver.instance import build_instance


def key(geo: _Geo, s: Any) -> tuple[int, int, int]:
    """(parts moved, free moves, L1) of a solution."""
    return (sum(s.Value(v) for v in geo.moved.values()),
            sum(s.Value(v) for v in geo.free.values()), sum(s.Value(v) for v in geo.l1))


@dataclasses.dataclass(frozen=True)
class Sol:
    """One cluster's answer: found or not (infeasible: proved so), proved minimal, the new
    centre (0.1 mm) and free flag of each moved part (layout indices), its cost key."""

    ok: bool
    infeasible: bool
    proved: bool
    moved: dict[int, tuple[tuple[int, ...], bool]]
    key: tuple[int, int, int]
    local: bool = False  # from the local repair (not CP-SAT over the whole cluster)
    turned: tuple[tuple[int, float], ...] = ()  # (part, new yaw) turned (--allow-rotate)


def sub_layout(layout: Layout, parts: tuple[int, ...]) -> Layout:
    idx = np.asarray(parts, dtype=np.int64)
    assert layout.yaw is not None  # Layout.__post_init__ fills None with zeros
    return Layout(ids=tuple(layout.ids[i] for i in parts),
                  types=tuple(layout.types[i] for i in parts), pos=np.array(layout.pos[idx]),
                  size=np.array(layout.size[idx]),
                  grippers=tuple(layout.grippers[i] for i in parts), order=None,
                  path=layout.path, yaw=np.array(layout.yaw[idx]))


def solve_cluster(cell: Cell, layout: Layout, cl: Cluster, *, keep_shape: bool,
                   grip_clear: bool, must_move: tuple[tuple[int, ...], ...], wall: float,
                   det: float | None, workers: int,
                   hint: dict[int, tuple[int, ...]] | None,
                   turns: dict[int, PartTurns] | None = None) -> Sol:
    """Solve one cluster on its own sub-layout (its parts and context, nothing else).
    keep_shape: rigid shifts alone first (if they can repair, the optimum has no free
    move, so that smaller model's optimum is the optimum)."""
    sub = sub_layout(layout, cl.parts)
    where = {p: k for k, p in enumerate(cl.parts)}
    mov = np.zeros(len(cl.parts), dtype=bool)
    mov[[where[p] for p in cl.movable]] = True
    anch = np.zeros(len(cl.parts), dtype=bool)
    anch[[where[p] for p in cl.anchored]] = True
    mm = tuple(t for t in (tuple(where[p] for p in grp if p in where) for grp in must_move) if t)
    h = None if hint is None else {where[p]: list(c) for p, c in hint.items() if p in where}
    t_end = time.perf_counter() + wall

    def stage(rigid: bool) -> tuple[_Geo, int, Any]:
        geo = _Geo(cell, sub, mov, GeoOptions(
            keep_shape=keep_shape, grip_clear=grip_clear, rigid_only=rigid, hint=h,
            must_move=mm, reach=cl.reach, anchored=anch,
            turns={k: turns[p] for k, p in enumerate(cl.parts) if p in turns}
            if turns else None))
        st, s = geo.solve(max(0.01, t_end - time.perf_counter()), workers, det)
        return geo, st, s

    geo, st, s = stage(keep_shape)
    if keep_shape and st not in (geo.cp.OPTIMAL, geo.cp.FEASIBLE):
        geo, st, s = stage(False)
    cp = geo.cp
    if st not in (cp.OPTIMAL, cp.FEASIBLE):
        return Sol(False, st == cp.INFEASIBLE, st == cp.INFEASIBLE, {}, (0, 0, 0))
    moved: dict[int, tuple[tuple[int, ...], bool]] = {}
    turned = {cl.parts[k]: y for k, y in chosen(geo.turn, s.Value).items()}
    for k, mv in geo.moved.items():
        if s.Value(mv):
            c = tuple(int(s.Value(v)) for v in geo.c[k])
            if c != tuple(int(x) for x in geo.c0[k]) or cl.parts[k] in turned:
                moved[cl.parts[k]] = (c, bool(s.Value(geo.free[k])))
    return Sol(True, False, st == cp.OPTIMAL, moved, key(geo, s),
                turned=tuple(sorted(turned.items())))


def greedy_cluster(cell: Cell, layout: Layout, cl: Cluster, bad: list[int],
                    c0_all: np.ndarray, wall: float) -> Sol | None:
    """A fast first repair of one cluster (local repair): the parts to fix one at a time,
    lowest first, each moved (with what rests on it) by a tiny CP-SAT model of that part
    alone, the others fixed where they are by then. Not minimal; None if a step fails."""
    t_end = time.perf_counter() + wall
    parts = cl.parts
    where = {p: k for k, p in enumerate(parts)}
    pos = np.asarray(layout.pos, dtype=np.float64)[list(parts)].copy()
    anch = np.zeros(len(parts), dtype=bool)
    anch[[where[p] for p in cl.anchored]] = True
    movable = np.zeros(len(parts), dtype=bool)
    movable[[where[p] for p in cl.movable]] = True
    moved: dict[int, tuple[tuple[int, ...], bool]] = {}
    comp_all = None
    for p in bad:
        if time.perf_counter() > t_end:
            return None
        sub = dataclasses.replace(sub_layout(layout, parts), pos=pos.copy())
        inst = build_instance(cell, sub)
        b = inst.boxes
        sup = exact.supports_one(inst)
        if comp_all is None:
            comp_all = exact.components(inst)
        load = {where[p]}  # p and what rests on it, transitively
        grow = True
        while grow:
            grow = False
            for k in range(len(parts)):
                if k not in load and movable[k] and any(sup(j, k) for j in load):
                    load.add(k)
                    grow = True
        whole = {k for k in range(len(parts)) if movable[k] and comp_all[k] == comp_all[where[p]]}
        for group in (load, whole | load):
            # the model holds the group and the parts its reach comes near, nothing else
            gl = sorted(group)
            r2 = 2 * cl.reach[gl]
            lo, hi = b[gl][:, 0::2] - r2, b[gl][:, 1::2] + r2
            near = np.zeros(len(parts), dtype=bool)
            for q in range(len(gl)):
                ok = np.ones(len(parts), dtype=bool)
                for ax in range(3):
                    ok &= (b[:, 2 * ax] - hi[q, ax] <= 300) & (lo[q, ax] - b[:, 2 * ax + 1] <= 300)
                near |= ok
            keep = np.nonzero(near)[0].tolist()
            kk = {k: t for t, k in enumerate(keep)}
            mini = sub_layout(sub, tuple(keep))
            mov = np.zeros(len(keep), dtype=bool)
            mov[[kk[k] for k in gl]] = True
            # a fixed part is anchored when its support does not change in this step
            an = np.array([k not in group and (anch[k] or not any(
                sup(j, k) for j in gl)) for k in keep])
            geo = _Geo(cell, mini, mov, GeoOptions(reach=cl.reach[keep], anchored=an,
                                                   free_only=True))
            st, s = geo.solve(max(0.01, t_end - time.perf_counter()), 1, 0.2, fast=True)
            if st in (geo.cp.OPTIMAL, geo.cp.FEASIBLE):
                break
        else:
            return None  # this cluster needs the whole CP-SAT model
        for t_, mv in geo.moved.items():
            c = tuple(int(s.Value(v)) for v in geo.c[t_])
            k = keep[t_]
            if s.Value(mv) and c != tuple(int(x) for x in geo.c0[t_]):
                pos[k] = pos_m(c)
                moved[parts[k]] = (c, bool(s.Value(geo.free[t_])))
    l1 = sum(int(abs(np.asarray(c) - c0_all[i]).sum()) for i, (c, _) in moved.items())
    back = [i for i, (c, _) in moved.items() if tuple(int(x) for x in c0_all[i]) == c]
    for i in back:
        del moved[i]
    return Sol(True, False, False, moved, (len(moved), sum(f for _, f in moved.values()), l1),
                local=True)


def to_fix(cluster: Cluster, geo_bad: list[Any], index: dict[str, int],
            c0_all: np.ndarray) -> list[int]:
    """The parts the local repair moves, lowest first: each part of a violation, except
    that of two overlapping parts only the upper one (then the later one) moves."""
    inside = set(cluster.movable)
    out: set[int] = set()
    for v in geo_bad:
        idx = [index[p] for p in v.parts]
        if v.rule == "no_overlap" and len(idx) == 2:
            idx = [max(idx, key=lambda i: (int(c0_all[i][2]), i))]
        out.update(i for i in idx if i in inside)
    return sorted(out, key=lambda i: (int(c0_all[i][2]), i))


def pos_m(c01: list[int] | tuple[int, ...]) -> list[float]:
    return [float(Fraction(int(v), 10000)) for v in c01]


def solve_all(cell: Cell, layout: Layout, clusters: list[Cluster], workers: int,
               run: Any) -> list[Sol]:
    """Each cluster solved by ``run(cluster, workers)``; with several workers and several
    clusters, clusters run in parallel threads (one CP-SAT worker each); results are in
    cluster order either way, so the merge is fixed."""
    del cell, layout
    if workers > 1 and len(clusters) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, len(clusters))) as ex:
            return list(ex.map(lambda c: run(c, 1), clusters))
    return [run(c, workers) for c in clusters]


def report(layout: Layout, clusters: list[Cluster], sols: list[Sol]) -> tuple[ClusterInfo, ...]:
    return tuple(ClusterInfo(parts=tuple(layout.ids[p] for p in c.movable),
                             context=len(c.parts) - len(c.movable), moved=len(s.moved),
                             proved=s.proved) for c, s in zip(clusters, sols, strict=True))
