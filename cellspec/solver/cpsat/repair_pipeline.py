"""Minimal-change repair on the integer grid with CP-SAT: the cluster pipeline.

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
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.status import Status
from cellspec.dsl.model import BoxZone, Cell, HalfSpaceZone, Zone
from cellspec.layout import Layout
from cellspec.solver.cpsat.blocked import parse_blocked, with_blocked
from cellspec.solver.cpsat.cluster_solve import Sol as _Sol
from cellspec.solver.cpsat.cluster_solve import greedy_cluster as _greedy_cluster
from cellspec.solver.cpsat.cluster_solve import pos_m as _pos_m
from cellspec.solver.cpsat.cluster_solve import report as _report
from cellspec.solver.cpsat.cluster_solve import solve_all as _solve_all
from cellspec.solver.cpsat.cluster_solve import solve_cluster as _solve_cluster
from cellspec.solver.cpsat.cluster_solve import to_fix as _to_fix
from cellspec.solver.cpsat.clusters import (
    MOVE_BOUND,
    Cluster,
    movable_parts,
    reach_of,
    structures,
)
from cellspec.solver.cpsat.clusters import decompose as decompose_clusters
from cellspec.solver.cpsat.moved_shapes import kept_yaw
from cellspec.solver.cpsat.placement import GEOMETRY_RULES, GeoOptions, _components, _Geo
from cellspec.solver.cpsat.results import Move, RepairResult
from cellspec.solver.cpsat.rotate import PartTurns, growth, parse_rotate, part_turns
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
HINTED_PARTS = 300  # with a repair in hand, larger clusters get no CP-SAT model


def _core(cell: Cell, layout: Layout, movable: np.ndarray, left: Any,
          turns: dict[int, PartTurns] | None = None) -> tuple[str, ...]:
    """The rules that conflict: an unsatisfiable core over one assumption literal per rule
    (single worker), made minimal by deletion (each rule dropped in turn; kept if the rest
    becomes satisfiable), with the turns ``--allow-rotate`` allows. Empty when a limit is
    hit."""
    geo = _Geo(cell, layout, movable, GeoOptions(assumptions=True, turns=turns))
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


# complexity: one pipeline (clusters, move bounds, widening, re-verification); split later
def pipeline(cell: Cell, layout: Layout, *,  # noqa: C901
           time_limit: float = DEFAULT_TIME_LIMIT,
           blocked: tuple[Zone, ...] | list[Zone] = (), workers: int = 1,
           keep_shape: bool = False, decompose: bool = True,
           progress: Callable[[str], None] | None = None,
           checked: Verdict | None = None,
           allow_rotate: tuple[float, ...] = (),
           start_hint: dict[int, tuple[int, ...]] | None = None) -> RepairResult:
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
    may also be turned to one of these yaws (:mod:`.rotate`); a cylinder never turns.
    ``start_hint``: the new centres (0.1 mm) of the parts a valid repair moves (the
    constructive repair), the CP-SAT hint of a cluster's first solve."""
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
            if after.verdict == Status.PASS:
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

    pace = [0.0, 0]  # seconds in cluster models so far, and their parts
    asm_s = 0.0  # the longest merge, re-sequencing and re-verification so far

    def run(cl: Cluster, w: int, det: float | None, hint: Any = None,
            tag: str = "first") -> _Sol:
        key = (cl.key, tuple(t for t in must_move if set(t) & set(cl.movable)), grip_clear,
               tag)
        if key in cache:
            return cache[key]
        if hint is None and start_hint is not None:
            hint = {i: start_hint[i] for i in cl.movable if i in start_hint}
        # building a cluster's model is bounded by no limit (1 000 scattered cubes: 6.5 s
        # for one cluster started at the deadline): past the deadline, or when the pace of
        # the clusters so far says this one would not fit in the time left, it is not
        # started (a time limit, never a proof; not cached)
        # With a repair in hand (``start_hint``), a cluster of more than HINTED_PARTS is
        # left to it (848 parts: 4.1 s to build on the loaded machine, and no better answer)
        now_left = time_limit - reserve - (time.perf_counter() - t0)
        if now_left <= 0.05 or (pace[1] and pace[0] / pace[1] * len(cl.parts) > now_left) \
                or (start_hint is not None and len(cl.parts) > HINTED_PARTS):
            return _Sol(False, False, False, {}, (0, 0, 0))
        t_run = time.perf_counter()
        sol = _solve_cluster(cell, layout, cl, keep_shape=keep_shape, grip_clear=grip_clear,
                             must_move=must_move, wall=left(), det=det, workers=w, hint=hint,
                             turns=turns)
        pace[0] += time.perf_counter() - t_run
        pace[1] += len(cl.parts)
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
                r = pipeline(cell, layout, time_limit=max(0.1, time_limit - (
                    time.perf_counter() - t0)), workers=workers, keep_shape=keep_shape,
                    decompose=False, allow_rotate=allow_rotate)
                return r.model_copy(update={"seconds": time.perf_counter() - t0})
            cl = clusters[bad[0]]
            names = ", ".join(layout.ids[p] for p in cl.movable[:8])
            return done(status=Status.UNKNOWN, reason=(
                f"no repair of the cluster of {names} with the parts around it fixed"
                if s_bad.infeasible else
                f"time limit ({time_limit:g} s) hit before a repair was found"))
        t_asm = time.perf_counter()
        what, res = assemble(sols, grip_clear)
        asm_s = max(asm_s, time.perf_counter() - t_asm)
        if what == "no_order":
            grip_clear = True
            say("the placement admits no order: keeping a grip axis clear")
            continue
        if what != "checked":  # one placement without an order proves nothing (issue 28.2)
            return done(status=Status.UNKNOWN, reason="positions repaired but no placement "
                        f"order for that placement: {res}")
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
        # re-ordering and re-verifying is bounded by no limit: only when one more fits
        if any(x.moved is not y.moved for x, y in zip(sols, sols2, strict=True)) \
                and left() > asm_s:
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
            if left() <= asm_s:
                break  # no time to re-verify it
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


__all__ = ["pipeline", "with_blocked", "parse_blocked", "parse_rotate", "BoxZone",
           "HalfSpaceZone"]
