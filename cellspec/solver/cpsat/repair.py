"""Minimal-change repair on the integer grid with CP-SAT.

Variables are the parts' centres in 0.1 mm steps (so every repaired layout lies on the
grid the verifier uses); boxes are ``2c - s .. 2c + s`` in units U = 0.05 mm exactly as in
:mod:`cellspec.core.geometry`. The standard geometric rules are encoded exactly:

* ``workspace``: each box inside the workspace (eps allowed);
* ``no_overlap``: for each pair, along some axis the overlap is at most eps;
* ``gravity``: a part is grounded (bottom within eps of a surface) or some part supports
  it (top meets bottom within eps, footprints overlap by more than eps);
* ``keepout``: each box avoids every keep-out zone (box: separated by eps along some axis;
  half-space: its extreme point stays within eps of the boundary);

Each part moves with its connected structure (a rigid *shift*, one vector per structure
of touching parts) plus an optional free move of its own. The objective is lexicographic:
fewest parts moved, then fewest free (non-rigid) moves, then least total L1 displacement.
A moved part gets no tolerance: its faces meet, and it stays inside, exactly; and where
a moved part rests on another (or a moved part carries another) the upper part's centre
lies over the supporting part's footprint, so repairs do not balance on a 1 mm ledge.
Order rules (``support_order``, ``grip_access``) are then satisfied by re-sequencing
(:mod:`.sequence`), keeping the layout's order when it is still valid. The result is
re-verified with clingo; it is a success only if every error rule passes.

When no repair exists, CP-SAT proves it and names the conflicting rules (an
unsatisfiable core over one assumption literal per rule, found with a single worker).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.errors import CellspecError
from cellspec.core.status import Status
from cellspec.dsl.model import BoxZone, Cell, HalfSpaceZone, Zone
from cellspec.layout import Layout
from cellspec.solver.cpsat import exact
from cellspec.solver.cpsat.clusters import (
    MOVE_BOUND,
    Cluster,
    movable_parts,
    reach_of,
    structures,
)
from cellspec.solver.cpsat.clusters import decompose as decompose_clusters
from cellspec.solver.cpsat.moved_shapes import kept_yaw
from cellspec.solver.cpsat.placement import GEOMETRY_RULES, _components, _Geo
from cellspec.solver.cpsat.results import ClusterInfo, Move, RepairResult
from cellspec.solver.cpsat.rotate import PartTurns, chosen, growth, parse_rotate, part_turns
from cellspec.solver.cpsat.sequence import order_rule_names, solve_order
from cellspec.solver.instance import BoxU, Instance, build_instance
from cellspec.solver.result import Verdict

DEFAULT_TIME_LIMIT = 10.0
MONOLITHIC_FALLBACK = 80  # up to this, a cluster with no bounded repair retries whole
WIDEN_PARTS = 40  # layouts up to this size: a proved repair is re-proved with wider moves
WIDEN_STEPS = 2  # at most this many widenings (x3 each), each within WIDEN_DET
WIDEN_DET = 1.0  # deterministic seconds per widening, over all its clusters
# repaired by re-solving: an unstable structure (or construction stage) must change
LOOP_RULES = ("stability", "stability_stages")
MAX_STABILITY_ROUNDS = 8


def with_blocked(cell: Cell, blocked: tuple[Zone, ...] | list[Zone]) -> Cell:
    """The cell with extra keep-out zones (blocked regions reported by the twin or typed
    by a user); names must be new."""
    if not blocked:
        return cell
    have = {z.name for z in cell.keepouts}
    for z in blocked:
        if z.name in have or z.name == "workspace":
            raise CellspecError(f"blocked region '{z.name}': the cell already has a zone of "
                                "that name")
        have.add(z.name)
    return cell.model_copy(update={"keepouts": tuple(cell.keepouts) + tuple(blocked)})


def _core(cell: Cell, layout: Layout, movable: np.ndarray, left: Any,
          turns: dict[int, PartTurns] | None = None) -> tuple[str, ...]:
    """The rules that conflict: an unsatisfiable core over one assumption literal per rule
    (single worker), made minimal by deletion (each rule dropped in turn; kept if the rest
    becomes satisfiable), with the turns ``--allow-rotate`` allows. Empty when a limit is
    hit."""
    geo = _Geo(cell, layout, movable, assumptions=True, turns=turns)
    geo.m.ClearObjective()
    st, s = geo.solve(left(), 1)
    cp = geo.cp
    if st != cp.INFEASIBLE:
        return ()
    core = [k for k in s.SufficientAssumptionsForInfeasibility() if k in geo.lit_rule]
    lits = {lit.Index(): lit for lit in geo.guard.values()}
    for k in list(core):
        trial = [c for c in core if c != k]
        geo.m.ClearAssumptions()
        geo.m.AddAssumptions([lits[c] for c in trial])
        st, _ = geo.solve(left(), 1)
        if st == cp.INFEASIBLE:
            core = trial
        elif st != cp.OPTIMAL and st != cp.FEASIBLE:
            break
    return tuple(sorted(geo.lit_rule[k] for k in core))


def _unstable_groups(cell: Cell, layout: Layout, verdict: Any) -> tuple[tuple[int, ...], ...]:
    """The parts named by stability violations, one group per connected structure."""
    index = {pid: i for i, pid in enumerate(layout.ids)}
    flagged = sorted({index[p] for v in verdict.violations if v.rule in LOOP_RULES
                      for p in v.parts})
    if not flagged:
        return ()
    inst = build_instance(cell, layout.with_order(None))
    comp = _components(inst.boxes, inst.eps)
    groups: dict[int, list[int]] = {}
    for i in flagged:
        groups.setdefault(int(comp[i]), []).append(i)
    return tuple(tuple(g_) for _, g_ in sorted(groups.items()))


def _key(geo: _Geo, s: Any) -> tuple[int, int, int]:
    """(parts moved, free moves, L1) of a solution."""
    return (sum(s.Value(v) for v in geo.moved.values()),
            sum(s.Value(v) for v in geo.free.values()), sum(s.Value(v) for v in geo.l1))


@dataclasses.dataclass(frozen=True)
class _Sol:
    """One cluster's answer: found or not (infeasible: proved so), proved minimal, the new
    centre (0.1 mm) and free flag of each moved part (layout indices), its cost key."""

    ok: bool
    infeasible: bool
    proved: bool
    moved: dict[int, tuple[tuple[int, ...], bool]]
    key: tuple[int, int, int]
    local: bool = False  # from the local repair (not CP-SAT over the whole cluster)
    turned: tuple[tuple[int, float], ...] = ()  # (part, new yaw) turned (--allow-rotate)


def _sub_layout(layout: Layout, parts: tuple[int, ...]) -> Layout:
    idx = np.asarray(parts, dtype=np.int64)
    return Layout(ids=tuple(layout.ids[i] for i in parts),
                  types=tuple(layout.types[i] for i in parts), pos=np.array(layout.pos[idx]),
                  size=np.array(layout.size[idx]),
                  grippers=tuple(layout.grippers[i] for i in parts), order=None,
                  path=layout.path, yaw=np.array(layout.yaw[idx]))


def _solve_cluster(cell: Cell, layout: Layout, cl: Cluster, *, keep_shape: bool,
                   grip_clear: bool, must_move: tuple[tuple[int, ...], ...], wall: float,
                   det: float | None, workers: int,
                   hint: dict[int, tuple[int, ...]] | None,
                   turns: dict[int, PartTurns] | None = None) -> _Sol:
    """Solve one cluster on its own sub-layout (its parts and context, nothing else).
    keep_shape: rigid shifts alone first (if they can repair, the optimum has no free
    move, so that smaller model's optimum is the optimum)."""
    sub = _sub_layout(layout, cl.parts)
    where = {p: k for k, p in enumerate(cl.parts)}
    mov = np.zeros(len(cl.parts), dtype=bool)
    mov[[where[p] for p in cl.movable]] = True
    anch = np.zeros(len(cl.parts), dtype=bool)
    anch[[where[p] for p in cl.anchored]] = True
    mm = tuple(t for t in (tuple(where[p] for p in grp if p in where) for grp in must_move) if t)
    h = None if hint is None else {where[p]: list(c) for p, c in hint.items() if p in where}
    t_end = time.perf_counter() + wall

    def stage(rigid: bool) -> tuple[_Geo, int, Any]:
        geo = _Geo(cell, sub, mov, assumptions=False, keep_shape=keep_shape,
                   grip_clear=grip_clear, rigid_only=rigid, hint=h, must_move=mm,
                   reach=cl.reach, anchored=anch,
                   turns={k: turns[p] for k, p in enumerate(cl.parts) if p in turns}
                   if turns else None)
        st, s = geo.solve(max(0.01, t_end - time.perf_counter()), workers, det)
        return geo, st, s

    geo, st, s = stage(keep_shape)
    if keep_shape and st not in (geo.cp.OPTIMAL, geo.cp.FEASIBLE):
        geo, st, s = stage(False)
    cp = geo.cp
    if st not in (cp.OPTIMAL, cp.FEASIBLE):
        return _Sol(False, st == cp.INFEASIBLE, st == cp.INFEASIBLE, {}, (0, 0, 0))
    moved: dict[int, tuple[tuple[int, ...], bool]] = {}
    turned = {cl.parts[k]: y for k, y in chosen(geo.turn, s.Value).items()}
    for k, mv in geo.moved.items():
        if s.Value(mv):
            c = tuple(int(s.Value(v)) for v in geo.c[k])
            if c != tuple(int(x) for x in geo.c0[k]) or cl.parts[k] in turned:
                moved[cl.parts[k]] = (c, bool(s.Value(geo.free[k])))
    return _Sol(True, False, st == cp.OPTIMAL, moved, _key(geo, s),
                turned=tuple(sorted(turned.items())))


def _greedy_cluster(cell: Cell, layout: Layout, cl: Cluster, bad: list[int],
                    c0_all: np.ndarray, wall: float) -> _Sol | None:
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
        sub = dataclasses.replace(_sub_layout(layout, parts), pos=pos.copy())
        inst = build_instance(cell, sub)
        b, eps = inst.boxes, inst.eps
        sup = exact.supports_one(inst)
        if comp_all is None:
            comp_all = _components(b, eps) if inst.shapes is None else exact.components(inst)
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
            mini = _sub_layout(sub, tuple(keep))
            mov = np.zeros(len(keep), dtype=bool)
            mov[[kk[k] for k in gl]] = True
            # a fixed part is anchored when its support does not change in this step
            an = np.array([k not in group and (anch[k] or not any(
                sup(j, k) for j in gl)) for k in keep])
            geo = _Geo(cell, mini, mov, assumptions=False, reach=cl.reach[keep], anchored=an,
                       free_only=True)
            st, s = geo.solve(max(0.01, t_end - time.perf_counter()), 1, 0.2, fast=True)
            if st in (geo.cp.OPTIMAL, geo.cp.FEASIBLE):
                break
        else:
            return None  # this cluster needs the whole CP-SAT model
        for t_, mv in geo.moved.items():
            c = tuple(int(s.Value(v)) for v in geo.c[t_])
            k = keep[t_]
            if s.Value(mv) and c != tuple(int(x) for x in geo.c0[t_]):
                pos[k] = _pos_m(c)
                moved[parts[k]] = (c, bool(s.Value(geo.free[t_])))
    l1 = sum(int(abs(np.asarray(c) - c0_all[i]).sum()) for i, (c, _) in moved.items())
    back = [i for i, (c, _) in moved.items() if tuple(int(x) for x in c0_all[i]) == c]
    for i in back:
        del moved[i]
    return _Sol(True, False, False, moved, (len(moved), sum(f for _, f in moved.values()), l1),
                local=True)


def _to_fix(cluster: Cluster, geo_bad: list[Any], index: dict[str, int],
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


def _pos_m(c01: list[int] | tuple[int, ...]) -> list[float]:
    return [float(Fraction(int(v), 10000)) for v in c01]


def _solve_all(cell: Cell, layout: Layout, clusters: list[Cluster], workers: int,
               run: Any) -> list[_Sol]:
    """Each cluster solved by ``run(cluster, workers)``; with several workers and several
    clusters, clusters run in parallel threads (one CP-SAT worker each); results are in
    cluster order either way, so the merge is fixed."""
    del cell, layout
    if workers > 1 and len(clusters) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, len(clusters))) as ex:
            return list(ex.map(lambda c: run(c, 1), clusters))
    return [run(c, workers) for c in clusters]


def _report(layout: Layout, clusters: list[Cluster], sols: list[_Sol]) -> tuple[ClusterInfo, ...]:
    return tuple(ClusterInfo(parts=tuple(layout.ids[p] for p in c.movable),
                             context=len(c.parts) - len(c.movable), moved=len(s.moved),
                             proved=s.proved) for c, s in zip(clusters, sols, strict=True))


# complexity: one pipeline (clusters, move bounds, widening, re-verification); split later
def repair(cell: Cell, layout: Layout, *,  # noqa: C901
           time_limit: float = DEFAULT_TIME_LIMIT,
           blocked: tuple[Zone, ...] | list[Zone] = (), workers: int = 1,
           keep_shape: bool = False, decompose: bool = True,
           progress: Callable[[str], None] | None = None,
           checked: Verdict | None = None,
           allow_rotate: tuple[float, ...] = ()) -> RepairResult:
    """The nearest layout that satisfies every error rule: fewest parts moved, then fewest
    free (non-rigid) moves, then least L1 displacement (``keep_shape``: fewest free moves
    first, so structures move whole where geometry allows); then the order is kept or
    re-sequenced. ``blocked`` adds keep-out zones (blocked regions).

    ``decompose`` (default): only the structures named by a violation move, each by at
    most the move bound (:mod:`.clusters`), in independent clusters solved and proved one
    by one; ``optimal`` then means minimal within that scope, every cluster proved
    (``clusters`` says which were). Anytime: the first verified repair (each cluster's
    best within a short deterministic budget) is kept, then unproved clusters are
    improved while ``time_limit`` (the whole call) allows; at the limit the best verified
    repair is returned as ``feasible``. ``decompose=False`` is the monolithic model: every
    part may move anywhere. Parallel clusters keep a fixed merge order: deterministic.

    If the minimal placement admits no assembly order, the placement is solved again with
    a sufficient grip condition (each moved part keeps one lateral axis clear of
    neighbours); that answer is at best ``feasible`` (not proved minimal).

    ``checked``: the clingo verdict of ``layout`` in ``cell`` when the caller already has it
    (the design loop checked the proposal); it is not checked again (not with ``blocked``).

    Yawed boxes and cylinders (docs/shapes.md) may be translated, keeping their yaw and
    radius: the model sees them through their enclosing boxes (apart, inside, clear of
    keep-outs: conservative) and inscribed boxes (support), :mod:`.moved_shapes`; clingo
    re-verifies the exact shapes, and only a passing layout is reported.
    ``allow_rotate`` (:func:`parse_rotate`: yaws, degrees): a moved box (plain or yawed)
    may also be turned to one of these yaws (:mod:`.rotate`); a cylinder never turns."""
    from cellspec.solver.verify import check

    t0 = time.perf_counter()
    cell = with_blocked(cell, blocked)
    reserve = min(0.2, 0.15 * time_limit)  # for building the answer and re-verifying

    def left() -> float:
        return max(0.05, time_limit - reserve - (time.perf_counter() - t0))

    def say(msg: str) -> None:
        if progress is not None:
            progress(f"repair {time.perf_counter() - t0:6.2f} s: {msg}")

    best: dict[str, Any] = {}

    def done(**kw: Any) -> RepairResult:
        return RepairResult(before=before, seconds=time.perf_counter() - t0, **kw)

    def finish(status: str) -> RepairResult:
        return done(status=status, layout=best["layout"].to_json(), moves=best["moves"],
                    reordered=best["reordered"], verdict=best["verdict"],
                    first_seconds=best["first"], clusters=best["clusters"],
                    proved_seconds=best.get("proved") if status == Status.OPTIMAL else None,
                    move_bound_m=best.get("bound"))

    before = checked if checked is not None and not blocked else \
        check(cell, layout, timeout=time_limit)
    if before.verdict == Status.PASS:
        return done(status=Status.OPTIMAL, layout=layout.to_json(), already_valid=True,
                    verdict=before)
    if before.verdict == Status.UNKNOWN:
        return done(status=Status.UNKNOWN, reason=f"verification hit a limit: {before.reason}")
    spent = time.perf_counter() - t0
    if spent >= time_limit - reserve:
        return done(status=Status.UNKNOWN, reason=f"checking the layout ({len(layout)} parts) took "
                    f"{spent:.1f} s of the {time_limit:g} s limit: no time left to repair it "
                    "(raise --time-limit)")
    orules = set(order_rule_names(cell))
    turns = part_turns(cell, layout, allow_rotate)
    geo_bad = [v for v in before.violations if v.rule not in orules]
    unknown_rules = sorted({v.rule for v in geo_bad if v.rule not in GEOMETRY_RULES
                            and v.rule not in LOOP_RULES})
    if unknown_rules:
        return done(status=Status.UNKNOWN, reason="repair does not encode the rule(s) "
                    f"{', '.join(unknown_rules)} (only {', '.join(GEOMETRY_RULES)}, "
                    f"{', '.join(LOOP_RULES)} and the order rules): not repaired")
    n = len(layout)
    index = {pid: i for i, pid in enumerate(layout.ids)}
    why: dict[str, list[str]] = {}
    for v in before.violations:
        for p in v.parts:
            why.setdefault(p, []).append(f"{v.rule}({', '.join(v.parts)})")
    inst0 = build_instance(cell, layout.with_order(None))
    c0 = ((inst0.boxes[:, 0::2] + inst0.boxes[:, 1::2]) // 2) // 2  # centres, 0.1 mm
    comp = structures(inst0)
    margin = g.relation_margin(inst0.boxes, inst0.eps, flanks=True, opening=inst0.opening,
                               depth=inst0.depth) + 2
    keepout_bad = np.zeros(n, dtype=bool)
    for v in geo_bad:
        if v.rule == "keepout":
            keepout_bad[[index[p] for p in v.parts]] = True

    def clusters_for(must_move: tuple[tuple[int, ...], ...]) -> list[Cluster]:
        if not decompose:  # every part may move
            return [Cluster(parts=tuple(range(n)), movable=tuple(range(n)), reach=(
                _full_reach(inst0, n)), anchored=())]
        involved = np.zeros(n, dtype=bool)
        involved[[index[p] for v in geo_bad for p in v.parts]] = True
        for grp in must_move:
            involved[list(grp)] = True
        mov = movable_parts(inst0, comp, involved)
        reach = reach_of(inst0, mov, bounds, unbounded=keepout_bad)
        for k in np.unique(comp[mov]).tolist():  # a structure moves whole: one reach for all
            sel = mov & (comp == k)
            reach[sel] = reach[sel].max(axis=0)
        return decompose_clusters(inst0, comp, mov, reach, margin,
                                  grow=growth(turns, n) if turns else None)

    def assemble(sols: list[_Sol], grip_clear: bool) -> tuple[str, Any]:
        """Merge the clusters' moves (fixed order), re-sequence, re-verify."""
        new_pos = np.asarray(layout.pos, dtype=np.float64).copy()
        new_yaw = np.array(layout.yaw, dtype=np.float64)
        moves: list[Move] = []
        merged = {i: mv for s_ in sols for i, mv in s_.moved.items()}
        turned = dict(t for s_ in sols for t in s_.turned)
        for i in sorted(merged):
            c_new, free = merged[i]
            dst = _pos_m(c_new)
            new_pos[i] = dst
            pid = layout.ids[i]
            reason = "; ".join(why.get(pid, [])) or (
                "moved with its structure" if not free else "moved so the rules hold together")
            if i in turned:
                new_yaw[i] = turned[i]
            kept = kept_yaw(inst0, layout, i)  # a part at another angle: moved, yaw kept
            moves.append(Move(part=pid, src=tuple(_pos_m(c0[i])),  # type: ignore[arg-type]
                              dst=tuple(dst), how="free" if free else "shift",  # type: ignore
                              why=reason, yaw=turned[i] if i in turned else kept,
                              yaw_kept=kept is not None and i not in turned))
        repaired = dataclasses.replace(layout, pos=new_pos, order=None, yaw=new_yaw)
        reordered = False
        if layout.order is not None:
            # the engineer's own order first: when every stage of it stands as repaired,
            # it is kept as written (no order search, which may hit its state limit)
            kept_order = repaired.with_order(tuple(layout.order))
            after = check(cell, kept_order, timeout=left())
            if after.verdict == "pass":
                return "checked", (kept_order, tuple(moves), False, after)
            inst = build_instance(cell, repaired)
            rank = {pid: k for k, pid in enumerate(layout.order)}
            prefer = [rank[pid] for pid in layout.ids]
            ost, steps, _, oreason, _ = solve_order(cell, inst, left(), prefer)
            if ost == Status.INFEASIBLE and not grip_clear:
                return "no_order", oreason
            if ost != Status.OPTIMAL:
                failed = "order_infeasible" if ost == Status.INFEASIBLE else "order_unknown"
                return failed, oreason
            new_order = tuple(st_.part for st_ in steps)
            reordered = new_order != tuple(layout.order)
            repaired = repaired.with_order(new_order)
        after = check(cell, repaired, timeout=left())
        return "checked", (repaired, tuple(moves), reordered, after)

    must_move = _unstable_groups(cell, layout, before)
    grip_clear = False
    rounds = 0
    cache: dict[tuple, _Sol] = {}
    no_local: set[tuple[int, ...]] = set()
    ws0 = inst0.zones["workspace"]
    assert isinstance(ws0, BoxU)
    bound_max = max(h - lo_ for lo_, h in zip(ws0.lo, ws0.hi, strict=True)) // 2 + 1
    bounds = np.full(n, MOVE_BOUND, dtype=np.int64)  # per part, widened where needed
    det1 = max(0.05, min(0.1, 0.05 * time_limit))  # first pass, per cluster (deterministic)

    def run(cl: Cluster, w: int, det: float | None, hint: Any = None,
            tag: str = "first") -> _Sol:
        key = (cl.key, tuple(t for t in must_move if set(t) & set(cl.movable)), grip_clear,
               tag)
        if key in cache:
            return cache[key]
        sol = _solve_cluster(cell, layout, cl, keep_shape=keep_shape, grip_clear=grip_clear,
                             must_move=must_move, wall=left(), det=det, workers=w, hint=hint,
                             turns=turns)
        cache[key] = sol
        return sol

    while True:
        clusters = clusters_for(must_move)
        say(f"{len(clusters)} cluster(s), {sum(len(c.movable) for c in clusters)} movable "
            f"part(s) of {n}")
        local = (decompose and not must_move and not grip_clear and not keep_shape
                 and not turns)  # the local repair does not turn parts

        def first(c: Cluster, w: int, local: bool = local,
                  skip: set[tuple[int, ...]] = no_local) -> _Sol:
            """The first pass: the local repair, or CP-SAT on a short budget."""
            if local and c.movable not in skip:
                gs = _greedy_cluster(cell, layout, c, _to_fix(c, geo_bad, index, c0), c0,
                                     left())
                if gs is not None:
                    return gs
            return run(c, w, (det1 if local else 10 * det1) if decompose else None)

        sols = _solve_all(cell, layout, clusters, workers, first)
        for k, s_ in enumerate(sols):  # nothing in the first pass: give it the time
            if not s_.ok and not s_.infeasible and left() > 0.2:
                s2 = run(clusters[k], workers, 0.6 * time_limit, tag="improve")
                if s2.ok or s2.infeasible:
                    sols[k] = s2
        bad = [k for k, s_ in enumerate(sols) if not s_.ok]
        if bad:
            s_bad = sols[bad[0]]
            if s_bad.infeasible and must_move:
                return done(status=Status.UNKNOWN, reason="no placement found that also makes "
                            "every structure stable (stability is not encoded in CP-SAT: "
                            "unstable structures are made to change, round by round)")
            if s_bad.infeasible and grip_clear:
                return done(status=Status.UNKNOWN, reason="the minimal placement admits no "
                            "assembly order, and no placement keeps a grip axis clear for "
                            "every moved part")
            if s_bad.infeasible and not decompose:
                core = _core(cell, layout, np.ones(n, dtype=bool), left, turns)
                rules_txt = ", ".join(core) if core else ", ".join(
                    r for r in GEOMETRY_RULES if any(x.name == r for x in cell.rules))
                return done(status=Status.INFEASIBLE, conflict=core, reason="no placement of "
                            f"these parts satisfies the rules together: {rules_txt}")
            wid = [clusters[k] for k in bad if sols[k].infeasible]
            if (s_bad.infeasible and decompose
                    and any(bounds[list(c.movable)].max() < bound_max for c in wid)):
                for c in wid:  # no repair within the bound: widen it for those parts
                    sel = list(c.movable)
                    bounds[sel] = np.minimum(bound_max, 3 * bounds[sel])
                say(f"{len(wid)} cluster(s) with no repair within the move bound: up to "
                    f"{int(bounds.max()) / 10000:g} m there")
                continue
            if s_bad.infeasible and n <= MONOLITHIC_FALLBACK:
                say("a cluster has no repair within the move bound: the whole layout")
                r = repair(cell, layout, time_limit=max(0.1, time_limit - (
                    time.perf_counter() - t0)), workers=workers, keep_shape=keep_shape,
                    decompose=False, allow_rotate=allow_rotate)
                return r.model_copy(update={"seconds": time.perf_counter() - t0})
            cl = clusters[bad[0]]
            names = ", ".join(layout.ids[p] for p in cl.movable[:8])
            return done(status=Status.UNKNOWN, reason=(
                f"no repair of the cluster of {names} with the parts around it fixed"
                if s_bad.infeasible else
                f"time limit ({time_limit:g} s) hit before a repair was found"))
        what, res = assemble(sols, grip_clear)
        if what == "no_order":
            grip_clear = True
            say("the placement admits no order: keeping a grip axis clear")
            continue
        if what != "checked":
            return done(status=Status.INFEASIBLE if what == "order_infeasible" else Status.UNKNOWN,
                        conflict=tuple(sorted(orules & {"support_order", "grip_access"})),
                        reason=f"positions repaired but no placement order: {res}")
        repaired, moves, reordered, after = res
        if after.verdict == Status.FAIL and any(s_.local for s_ in sols):
            # the local repair did not verify there: those clusters get CP-SAT whole (the
            # clusters of the parts named, or every local one if none is named)
            named = {index[p] for v in after.violations for p in v.parts}
            hit = {c.movable for c, s_ in zip(clusters, sols, strict=True)
                   if s_.local and named & set(c.parts)}
            no_local |= hit or {c.movable for c, s_ in zip(clusters, sols, strict=True)
                                if s_.local}
            say(f"the local repair does not re-verify in {len(hit) or 'every'} cluster(s): "
                "solving those whole")
            continue
        if (after.verdict == Status.FAIL and rounds < MAX_STABILITY_ROUNDS
                and all(v.rule in LOOP_RULES for v in after.violations)):
            rounds += 1
            must_move = must_move + _unstable_groups(cell, repaired, after)
            say(f"stability round {rounds}")
            continue
        if after.verdict != Status.PASS:
            detail = (after.reason if after.verdict == Status.UNKNOWN else
                      "; ".join(f"{v.rule}({', '.join(v.parts)})" for v in after.violations[:5]))
            return done(status=Status.UNKNOWN, reason=f"the repaired layout does not re-verify: "
                        f"{detail}")
        break
    best.update(layout=repaired, moves=moves, reordered=reordered, verdict=after,
                first=time.perf_counter() - t0, clusters=_report(layout, clusters, sols),
                key=tuple(map(sum, zip(*[s_.key for s_ in sols], strict=True))))
    proved = all(s_.proved for s_ in sols)
    exact = not must_move and not grip_clear
    say(f"first verified repair: {len(moves)} part(s) moved; "
        f"{sum(s_.proved for s_ in sols)}/{len(sols)} cluster(s) proved minimal")
    def cost(ss: list[_Sol]) -> tuple[int, int]:
        return (sum(x.key[0] for x in ss), sum(x.key[2] for x in ss))

    best["cost"] = cost(sols)
    if not proved:
        # anytime: improve the unproved clusters in the time left, hinted with their answer
        todo = [k for k, s_ in enumerate(sols) if not s_.proved]
        det2 = max(det1, 0.6 * time_limit / len(todo))
        sols2 = list(sols)
        for k in todo:
            if left() <= 0.1:
                break
            hint = {i: c for i, (c, _) in sols[k].moved.items()}
            s2 = run(clusters[k], workers, det2, hint, tag="improve")
            # proved: the cluster's optimum (the local repair's free-move count is counted
            # on its own small models, so only parts moved and L1 compare across the two)
            old = (sols[k].key[0], sols[k].key[2])
            if s2.ok and s2.proved and (s2.key[0], s2.key[2]) == old:
                sols2[k] = dataclasses.replace(sols[k], proved=True)  # it was minimal already
            elif s2.ok and (s2.proved or (s2.key[0], s2.key[2]) < old):
                sols2[k] = s2
        if any(x.moved is not y.moved for x, y in zip(sols, sols2, strict=True)):
            what, res = assemble(sols2, grip_clear)
            if what == "checked" and res[3].verdict == Status.PASS:
                repaired, moves, reordered, after = res
                best.update(layout=repaired, moves=moves, reordered=reordered, verdict=after,
                            clusters=_report(layout, clusters, sols2), cost=cost(sols2))
                say(f"improved: {len(moves)} part(s) moved")
            else:
                sols2 = [x if x.moved is y.moved else y for x, y in zip(sols2, sols, strict=True)]
        sols = sols2
        best["clusters"] = _report(layout, clusters, sols)
        proved = all(s_.proved for s_ in sols)
    if decompose:
        best["bound"] = int(bounds.min()) / 10000  # every movable part could move this far
    if proved:
        best["proved"] = time.perf_counter() - t0
    # widen the move bound while the problem is small: the proof then covers more
    widened = 0
    while (decompose and exact and proved and int(bounds.min()) < bound_max and left() > 0.3
           and widened < WIDEN_STEPS and n <= WIDEN_PARTS):
        widened += 1
        bounds = np.minimum(bound_max, 3 * bounds)
        wide = clusters_for(must_move)
        hint = {i: c for s_ in sols for i, (c, _) in s_.moved.items()}
        sw = [run(c, workers, WIDEN_DET / len(wide), hint, tag="widen") for c in wide]
        if not all(x.ok and x.proved for x in sw):
            break  # the proof stays the one within the narrower bound
        if cost(sw) < best["cost"]:
            what, res = assemble(sw, grip_clear)
            if what != "checked" or res[3].verdict != Status.PASS:
                break
            repaired, moves, reordered, after = res
            best.update(layout=repaired, moves=moves, reordered=reordered, verdict=after,
                        cost=cost(sw))
            say(f"move bound {int(bounds.min()) / 10000:g} m: {len(moves)} part(s) moved")
        best["clusters"] = _report(layout, wide, sw)
        best["bound"] = int(bounds.min()) / 10000
        clusters, sols = wide, sw
    return finish(Status.OPTIMAL if proved and exact else Status.FEASIBLE)


def _full_reach(inst: Instance, n: int) -> np.ndarray:
    """The monolithic model's reach: anywhere in the workspace (and from outside it)."""
    ws = inst.zones["workspace"]
    assert isinstance(ws, BoxU)
    b = inst.boxes
    span = [max(abs(ws.lo[k]), abs(ws.hi[k]), int(np.abs(b[:, 2 * k:2 * k + 2]).max()))
            for k in range(3)] if n else [0, 0, 0]
    return np.tile(np.asarray(span, dtype=np.int64) * 2, (n, 1))


def parse_blocked(spec: str, name: str) -> Zone:
    """A blocked region written like a keep-out zone, in metres: ``box x [a, b] y [c, d]``
    (omitted axes unbounded) or a half-space such as ``x + y > 0.7``; parsed by the cell
    grammar itself. Raises CellspecError naming the region."""
    from cellspec.core.errors import Diagnostic
    from cellspec.dsl.model import Source
    from cellspec.dsl.parser import load_cell_text

    body = spec.strip()
    if not body.startswith("box") and not body.startswith(":"):
        body = ": " + body
    text = ("cell blocked {\n    units m\n    workspace x [-1000, 1000] y [-1000, 1000] "
            f"z [-1000, 1000]\n    keepout {name} {body}\n}}\n")
    try:
        c = load_cell_text(text, "--block")
    except CellspecError as exc:
        msgs = "; ".join(dd.message for dd in exc.diagnostics)
        raise CellspecError(Diagnostic("--block", 0, 0, f"blocked region {spec!r}: "
                                       f"{msgs}")) from None
    # the parser bounds omitted axes within clingo's integers already
    return c.keepouts[0].model_copy(update={"source": Source(file="--block", line=0, col=0)})


__all__ = ["repair", "with_blocked", "parse_blocked", "parse_rotate", "BoxZone",
           "HalfSpaceZone"]
