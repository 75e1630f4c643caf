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
from typing import Any, NamedTuple

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
from cellspec.solver.cpsat.moved_shapes import box_components, kept_yaw
from cellspec.solver.cpsat.placement import GEOMETRY_RULES, GeoOptions, _Geo
from cellspec.solver.cpsat.results import ClusterInfo, Move, RepairResult
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
# why a repair of yawed boxes or cylinders is neither proved minimal nor proved impossible
CONSERVATIVE = ("the repair model sees yawed boxes and cylinders through their enclosing "
                "boxes (conservative)")
HINTED_PARTS = 300  # with a repair in hand, larger clusters get no CP-SAT model


def _core(cell: Cell, layout: Layout, movable: np.ndarray, left: Any,
          turns: dict[int, PartTurns] | None = None) -> tuple[str, ...]:
    """The rules that conflict: an unsatisfiable core over one assumption literal per rule
    (single worker), made minimal by deletion (each rule dropped in turn; kept if the rest
    becomes satisfiable), with the turns ``--allow-rotate`` allows. Empty when a limit is
    hit."""
    geo = _Geo(cell, layout, movable, GeoOptions(assumptions=True, turns=turns))
    geo.m.clear_objective()
    st, s = geo.solve(left(), 1)
    cp = geo.cp
    if st != cp.INFEASIBLE:
        return ()
    core = [k for k in s.SufficientAssumptionsForInfeasibility() if k in geo.lit_rule]
    lits = {lit.Index(): lit for lit in geo.guard.values()}
    for k in list(core):
        trial = [c for c in core if c != k]
        geo.m.clear_assumptions()
        geo.m.add_assumptions([lits[c] for c in trial])
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
    comp = box_components(inst.boxes, inst.eps)
    groups: dict[int, list[int]] = {}
    for i in flagged:
        groups.setdefault(int(comp[i]), []).append(i)
    return tuple(tuple(g_) for _, g_ in sorted(groups.items()))


@dataclasses.dataclass(frozen=True)
class PipelineOptions:
    """The options of one :func:`pipeline` call (see its docstring)."""

    time_limit: float = DEFAULT_TIME_LIMIT
    blocked: tuple[Zone, ...] | list[Zone] = ()
    workers: int = 1
    keep_shape: bool = False
    decompose: bool = True
    progress: Callable[[str], None] | None = None
    checked: Verdict | None = None
    allow_rotate: tuple[float, ...] = ()
    start_hint: dict[int, tuple[int, ...]] | None = None


class _Assembled(NamedTuple):
    """A merged, re-sequenced and re-verified placement."""

    layout: Layout
    moves: tuple[Move, ...]
    reordered: bool
    verdict: Verdict


@dataclasses.dataclass
class _Best:
    """The best verified repair so far, and what is proved about it."""

    got: _Assembled
    first: float  # seconds to the first verified repair
    clusters: tuple[ClusterInfo, ...]
    cost: tuple[int, int]
    proved: float | None = None  # seconds to the proof of minimality
    bound: float | None = None  # m: every movable part could move this far


def _cost(sols: list[_Sol]) -> tuple[int, int]:
    """Parts moved and L1 over the clusters (the two keys the local repair shares)."""
    return (sum(x.key[0] for x in sols), sum(x.key[2] for x in sols))


def pipeline(cell: Cell, layout: Layout, *,
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
    re-verifies the exact shapes, and only a passing layout is reported: ``feasible`` at
    best (minimal in a conservative model is no proof), and ``unknown``, never
    ``infeasible``, when the model has no placement.
    ``allow_rotate`` (:func:`parse_rotate`: yaws, degrees): a moved box (plain or yawed)
    may also be turned to one of these yaws (:mod:`.rotate`); a cylinder never turns.
    ``start_hint``: the new centres (0.1 mm) of the parts a valid repair moves (the
    constructive repair), the CP-SAT hint of a cluster's first solve."""
    return _Pipeline(cell, layout, PipelineOptions(
        time_limit=time_limit, blocked=blocked, workers=workers, keep_shape=keep_shape,
        decompose=decompose, progress=progress, checked=checked, allow_rotate=allow_rotate,
        start_hint=start_hint)).repair()


class _Pipeline:
    """One :func:`pipeline` call, as named stages over its run state: check the input,
    prepare the instance, find the first verified repair, improve the unproved clusters,
    widen the move bound, answer."""

    def __init__(self, cell: Cell, layout: Layout, opts: PipelineOptions) -> None:
        self.t0 = time.perf_counter()
        self.opts = opts
        self.cell = with_blocked(cell, opts.blocked)
        self.layout = layout
        self.n = len(layout)
        self.reserve = min(0.2, 0.15 * opts.time_limit)  # for the answer and re-verifying
        self.before: Verdict | None = None
        # the run state the stages share
        self.must_move: tuple[tuple[int, ...], ...] = ()
        self.grip_clear = False
        self.cache: dict[tuple, _Sol] = {}
        self.no_local: set[tuple[int, ...]] = set()
        self.pace = [0.0, 0]  # seconds in cluster models so far, and their parts
        self.asm_s = 0.0  # the longest merge, re-sequencing and re-verification so far
        self.clusters: list[Cluster] = []
        self.sols: list[_Sol] = []
        self.best: _Best | None = None

    # -- helpers -----------------------------------------------------------------------

    def left(self) -> float:
        """Seconds left for solving (the reserve kept back)."""
        return max(0.05, self.opts.time_limit - self.reserve - (time.perf_counter() - self.t0))

    def say(self, msg: str) -> None:
        """Report progress, when asked to."""
        if self.opts.progress is not None:
            self.opts.progress(f"repair {time.perf_counter() - self.t0:6.2f} s: {msg}")

    def done(self, **kw: Any) -> RepairResult:
        """The answer, timed from the start of the call."""
        return RepairResult(before=self.before, seconds=time.perf_counter() - self.t0, **kw)

    def finish(self, status: str, reason: str | None = None) -> RepairResult:
        """The answer carrying the best verified repair."""
        b = self.best
        assert b is not None
        return self.done(status=status, reason=reason, layout=b.got.layout.to_json(),
                         moves=b.got.moves,
                         reordered=b.got.reordered, verdict=b.got.verdict,
                         first_seconds=b.first, clusters=b.clusters,
                         proved_seconds=b.proved if status == Status.OPTIMAL else None,
                         move_bound_m=b.bound)

    # -- stages ------------------------------------------------------------------------

    def repair(self) -> RepairResult:
        """The stages in order; the first that answers ends the call."""
        early = self.check_input()
        if early is not None:
            return early
        self.prepare()
        early = self.first_repair()
        if early is not None:
            return early
        proved = self.improve()
        exact = not self.must_move and not self.grip_clear and not self.conservative
        proved = self.widen(proved, exact)
        if proved and self.conservative:  # minimal in the model, which is no proof
            return self.finish(Status.FEASIBLE, reason=f"{CONSERVATIVE}: minimal among "
                               "the placements it sees, not proved minimal")
        return self.finish(Status.OPTIMAL if proved and exact else Status.FEASIBLE)

    def check_input(self) -> RepairResult | None:
        """Check the layout (unless the caller did); an answer when there is nothing to
        repair, no time left, or a violated rule the model does not encode."""
        from cellspec.solver.verify import check

        opts, layout = self.opts, self.layout
        self.before = before = opts.checked if opts.checked is not None and not opts.blocked \
            else check(self.cell, layout, timeout=opts.time_limit)
        if before.verdict == Status.PASS:
            return self.done(status=Status.OPTIMAL, layout=layout.to_json(), already_valid=True,
                             verdict=before)
        if before.verdict == Status.UNKNOWN:
            return self.done(status=Status.UNKNOWN,
                             reason=f"verification hit a limit: {before.reason}")
        spent = time.perf_counter() - self.t0
        if spent >= opts.time_limit - self.reserve:
            return self.done(status=Status.UNKNOWN, reason=f"checking the layout ({len(layout)} "
                             f"parts) took {spent:.1f} s of the {opts.time_limit:g} s limit: no "
                             "time left to repair it (raise --time-limit)")
        orules = set(order_rule_names(self.cell))
        self.geo_bad = [v for v in before.violations if v.rule not in orules]
        unknown_rules = sorted({v.rule for v in self.geo_bad if v.rule not in GEOMETRY_RULES
                                and v.rule not in LOOP_RULES})
        if unknown_rules:
            return self.done(status=Status.UNKNOWN, reason="repair does not encode the rule(s) "
                             f"{', '.join(unknown_rules)} (only {', '.join(GEOMETRY_RULES)}, "
                             f"{', '.join(LOOP_RULES)} and the order rules): not repaired")
        return None

    def prepare(self) -> None:
        """The instance, structures, margins, move bounds and the reasons to move."""
        cell, layout, n = self.cell, self.layout, self.n
        assert self.before is not None
        self.turns = part_turns(cell, layout, self.opts.allow_rotate)
        self.index = {pid: i for i, pid in enumerate(layout.ids)}
        self.why: dict[str, list[str]] = {}
        for v in self.before.violations:
            for p in v.parts:
                self.why.setdefault(p, []).append(f"{v.rule}({', '.join(v.parts)})")
        inst0 = self.inst0 = build_instance(cell, layout.with_order(None))
        # the model sees a yawed box or a cylinder (or a part it may turn to such a yaw)
        # through its enclosing box: an answer it cannot find may still exist
        self.conservative = (not inst0.kernel().boxes_are_parts
                             or any(t.odd for t in self.turns.values()))
        self.c0 = ((inst0.boxes[:, 0::2] + inst0.boxes[:, 1::2]) // 2) // 2  # centres, 0.1 mm
        self.comp = structures(inst0)
        self.margin = g.relation_margin(inst0.boxes, inst0.eps, flanks=True,
                                        opening=inst0.opening, depth=inst0.depth) + 2
        self.keepout_bad = np.zeros(n, dtype=bool)
        for v in self.geo_bad:
            if v.rule == "keepout":
                self.keepout_bad[[self.index[p] for p in v.parts]] = True
        self.must_move = _unstable_groups(cell, layout, self.before)
        ws0 = inst0.zones["workspace"]
        assert isinstance(ws0, BoxU)
        self.bound_max = max(h - lo_ for lo_, h in zip(ws0.lo, ws0.hi, strict=True)) // 2 + 1
        self.bounds = np.full(n, MOVE_BOUND, dtype=np.int64)  # per part, widened where needed
        # first pass, per cluster (deterministic seconds)
        self.det1 = max(0.05, min(0.1, 0.05 * self.opts.time_limit))

    def clusters_for(self, must_move: tuple[tuple[int, ...], ...]) -> list[Cluster]:
        """The clusters to solve: the structures named by a violation (or ``must_move``)
        within their move bounds; the whole layout when not decomposing."""
        n, inst0, comp = self.n, self.inst0, self.comp
        if not self.opts.decompose:  # every part may move
            return [Cluster(parts=tuple(range(n)), movable=tuple(range(n)), reach=(
                _full_reach(inst0, n)), anchored=())]
        involved = np.zeros(n, dtype=bool)
        involved[[self.index[p] for v in self.geo_bad for p in v.parts]] = True
        for grp in must_move:
            involved[list(grp)] = True
        mov = movable_parts(inst0, comp, involved)
        reach = reach_of(inst0, mov, self.bounds, unbounded=self.keepout_bad)
        for k in np.unique(comp[mov]).tolist():  # a structure moves whole: one reach for all
            sel = mov & (comp == k)
            reach[sel] = reach[sel].max(axis=0)
        return decompose_clusters(inst0, comp, mov, reach, self.margin,
                                  grow=growth(self.turns, n) if self.turns else None)

    def assemble(self, sols: list[_Sol], grip_clear: bool) -> tuple[str, Any]:
        """Merge the clusters' moves (fixed order), re-sequence, re-verify: ``("checked",
        _Assembled)``, or a failure tag and the order search's reason."""
        from cellspec.solver.verify import check

        cell, layout, inst0 = self.cell, self.layout, self.inst0
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
            reason = "; ".join(self.why.get(pid, [])) or (
                "moved with its structure" if not free else "moved so the rules hold together")
            if i in turned:
                new_yaw[i] = turned[i]
            kept = kept_yaw(inst0, layout, i)  # a part at another angle: moved, yaw kept
            moves.append(Move(part=pid, src=tuple(_pos_m(self.c0[i])),  # type: ignore[arg-type]
                              dst=tuple(dst), how="free" if free else "shift",  # type: ignore
                              why=reason, yaw=turned[i] if i in turned else kept,
                              yaw_kept=kept is not None and i not in turned))
        repaired = dataclasses.replace(layout, pos=new_pos, order=None, yaw=new_yaw)
        reordered = False
        if layout.order is not None:
            # the engineer's own order first: when every stage of it stands as repaired,
            # it is kept as written (no order search, which may hit its state limit)
            kept_order = repaired.with_order(tuple(layout.order))
            after = check(cell, kept_order, timeout=self.left())
            if after.verdict == Status.PASS:
                return "checked", _Assembled(kept_order, tuple(moves), False, after)
            inst = build_instance(cell, repaired)
            rank = {pid: k for k, pid in enumerate(layout.order)}
            prefer = [rank[pid] for pid in layout.ids]
            ost, steps, _, oreason, _ = solve_order(cell, inst, self.left(), prefer)
            if ost == Status.INFEASIBLE and not grip_clear:
                return "no_order", oreason
            if ost != Status.OPTIMAL:
                failed = "order_infeasible" if ost == Status.INFEASIBLE else "order_unknown"
                return failed, oreason
            new_order = tuple(st_.part for st_ in steps)
            reordered = new_order != tuple(layout.order)
            repaired = repaired.with_order(new_order)
        after = check(cell, repaired, timeout=self.left())
        return "checked", _Assembled(repaired, tuple(moves), reordered, after)

    def run(self, cl: Cluster, w: int, det: float | None, hint: Any = None,
            tag: str = "first") -> _Sol:
        """One cluster's CP-SAT solve (cached by cluster, run state and stage), or an empty
        answer when it would not fit in the time left."""
        opts = self.opts
        key = (cl.key, tuple(t for t in self.must_move if set(t) & set(cl.movable)),
               self.grip_clear, tag)
        if key in self.cache:
            return self.cache[key]
        if hint is None and opts.start_hint is not None:
            hint = {i: opts.start_hint[i] for i in cl.movable if i in opts.start_hint}
        # building a cluster's model is bounded by no limit (1 000 scattered cubes: 6.5 s
        # for one cluster started at the deadline): past the deadline, or when the pace of
        # the clusters so far says this one would not fit in the time left, it is not
        # started (a time limit, never a proof; not cached)
        # With a repair in hand (``start_hint``), a cluster of more than HINTED_PARTS is
        # left to it (848 parts: 4.1 s to build on the loaded machine, and no better answer)
        pace = self.pace
        now_left = opts.time_limit - self.reserve - (time.perf_counter() - self.t0)
        if now_left <= 0.05 or (pace[1] and pace[0] / pace[1] * len(cl.parts) > now_left) \
                or (opts.start_hint is not None and len(cl.parts) > HINTED_PARTS):
            return _Sol(False, False, False, {}, (0, 0, 0))
        t_run = time.perf_counter()
        sol = _solve_cluster(self.cell, self.layout, cl, keep_shape=opts.keep_shape,
                             grip_clear=self.grip_clear, must_move=self.must_move,
                             wall=self.left(), det=det, workers=w, hint=hint, turns=self.turns)
        pace[0] += time.perf_counter() - t_run
        pace[1] += len(cl.parts)
        self.cache[key] = sol
        return sol

    def first_pass(self, c: Cluster, w: int, local: bool) -> _Sol:
        """The first pass: the local repair, or CP-SAT on a short budget."""
        if local and c.movable not in self.no_local:
            gs = _greedy_cluster(self.cell, self.layout, c,
                                 _to_fix(c, self.geo_bad, self.index, self.c0), self.c0,
                                 self.left())
            if gs is not None:
                return gs
        return self.run(c, w, (self.det1 if local else 10 * self.det1)
                        if self.opts.decompose else None)

    def solve_round(self) -> list[_Sol]:
        """Every cluster's first pass; a cluster with nothing gets the time to try again."""
        opts = self.opts
        clusters = self.clusters = self.clusters_for(self.must_move)
        self.say(f"{len(clusters)} cluster(s), {sum(len(c.movable) for c in clusters)} movable "
                 f"part(s) of {self.n}")
        local = (opts.decompose and not self.must_move and not self.grip_clear
                 and not opts.keep_shape and not self.turns)  # the local repair does not turn

        def first(c: Cluster, w: int) -> _Sol:
            return self.first_pass(c, w, local)

        sols = _solve_all(self.cell, self.layout, clusters, opts.workers, first)
        for k, s_ in enumerate(sols):  # nothing in the first pass: give it the time
            if not s_.ok and not s_.infeasible and self.left() > 0.2:
                s2 = self.run(clusters[k], opts.workers, 0.6 * opts.time_limit, tag="improve")
                if s2.ok or s2.infeasible:
                    sols[k] = s2
        return sols

    def unsolved(self, sols: list[_Sol], bad: list[int]) -> RepairResult | None:
        """A cluster with no answer: the call's answer, or None when the move bounds were
        widened (solve again)."""
        opts, clusters, n = self.opts, self.clusters, self.n
        s_bad = sols[bad[0]]
        if s_bad.infeasible and self.must_move:
            return self.done(status=Status.UNKNOWN, reason="no placement found that also makes "
                             "every structure stable (stability is not encoded in CP-SAT: "
                             "unstable structures are made to change, round by round)")
        if s_bad.infeasible and self.grip_clear:
            return self.done(status=Status.UNKNOWN, reason="the minimal placement admits no "
                             "assembly order, and no placement keeps a grip axis clear for "
                             "every moved part")
        if s_bad.infeasible and not opts.decompose:
            core = _core(self.cell, self.layout, np.ones(n, dtype=bool), self.left, self.turns)
            rules_txt = ", ".join(core) if core else ", ".join(
                r for r in GEOMETRY_RULES if any(x.name == r for x in self.cell.rules))
            if self.conservative:  # no placement in the model is no proof
                return self.done(status=Status.UNKNOWN, conflict=core, reason=(
                    f"{CONSERVATIVE}, and none of those placements satisfies the rules "
                    f"together: {rules_txt}; the exact shapes may still fit (not a proof)"))
            return self.done(status=Status.INFEASIBLE, conflict=core, reason="no placement of "
                             f"these parts satisfies the rules together: {rules_txt}")
        wid = [clusters[k] for k in bad if sols[k].infeasible]
        bounds = self.bounds
        if (s_bad.infeasible and opts.decompose
                and any(bounds[list(c.movable)].max() < self.bound_max for c in wid)):
            for c in wid:  # no repair within the bound: widen it for those parts
                sel = list(c.movable)
                bounds[sel] = np.minimum(self.bound_max, 3 * bounds[sel])
            self.say(f"{len(wid)} cluster(s) with no repair within the move bound: up to "
                     f"{int(bounds.max()) / 10000:g} m there")
            return None
        if s_bad.infeasible and n <= MONOLITHIC_FALLBACK:
            self.say("a cluster has no repair within the move bound: the whole layout")
            r = pipeline(self.cell, self.layout, time_limit=max(0.1, opts.time_limit - (
                time.perf_counter() - self.t0)), workers=opts.workers,
                keep_shape=opts.keep_shape, decompose=False, allow_rotate=opts.allow_rotate)
            return r.model_copy(update={"seconds": time.perf_counter() - self.t0})
        cl = clusters[bad[0]]
        names = ", ".join(self.layout.ids[p] for p in cl.movable[:8])
        return self.done(status=Status.UNKNOWN, reason=(
            f"no repair of the cluster of {names} with the parts around it fixed"
            if s_bad.infeasible else
            f"time limit ({opts.time_limit:g} s) hit before a repair was found"))

    def first_repair(self) -> RepairResult | None:
        """Solve, merge and re-verify, round by round (wider bounds, a grip axis kept clear,
        CP-SAT where the local repair does not verify, stability rounds) until a repair
        verifies (kept as the best, None) or the call has its answer."""
        rounds = 0
        while True:
            sols = self.solve_round()
            clusters = self.clusters
            bad = [k for k, s_ in enumerate(sols) if not s_.ok]
            if bad:
                answer = self.unsolved(sols, bad)
                if answer is not None:
                    return answer
                continue
            t_asm = time.perf_counter()
            what, res = self.assemble(sols, self.grip_clear)
            self.asm_s = max(self.asm_s, time.perf_counter() - t_asm)
            if what == "no_order":
                self.grip_clear = True
                self.say("the placement admits no order: keeping a grip axis clear")
                continue
            if what != "checked":  # one placement without an order proves nothing
                return self.done(status=Status.UNKNOWN, reason="positions repaired but no "
                                 f"placement order for that placement: {res}")
            after = res.verdict
            if after.verdict == Status.FAIL and any(s_.local for s_ in sols):
                # the local repair did not verify there: those clusters get CP-SAT whole (the
                # clusters of the parts named, or every local one if none is named)
                named = {self.index[p] for v in after.violations for p in v.parts}
                hit = {c.movable for c, s_ in zip(clusters, sols, strict=True)
                       if s_.local and named & set(c.parts)}
                self.no_local |= hit or {c.movable for c, s_ in zip(clusters, sols, strict=True)
                                         if s_.local}
                self.say(f"the local repair does not re-verify in {len(hit) or 'every'} "
                         "cluster(s): solving those whole")
                continue
            if (after.verdict == Status.FAIL and rounds < MAX_STABILITY_ROUNDS
                    and all(v.rule in LOOP_RULES for v in after.violations)):
                rounds += 1
                self.must_move = self.must_move + _unstable_groups(self.cell, res.layout, after)
                self.say(f"stability round {rounds}")
                continue
            if after.verdict != Status.PASS:
                detail = (after.reason if after.verdict == Status.UNKNOWN else "; ".join(
                    f"{v.rule}({', '.join(v.parts)})" for v in after.violations[:5]))
                return self.done(status=Status.UNKNOWN, reason="the repaired layout does not "
                                 f"re-verify: {detail}")
            break
        self.sols = sols
        self.best = _Best(got=res, first=time.perf_counter() - self.t0,
                          clusters=_report(self.layout, clusters, sols), cost=_cost(sols))
        self.say(f"first verified repair: {len(res.moves)} part(s) moved; "
                 f"{sum(s_.proved for s_ in sols)}/{len(sols)} cluster(s) proved minimal")
        return None

    def improve(self) -> bool:
        """Anytime: improve the unproved clusters in the time left, hinted with their
        answer; whether every cluster is proved minimal."""
        best, sols, clusters = self.best, self.sols, self.clusters
        assert best is not None
        proved = all(s_.proved for s_ in sols)
        if not proved:
            todo = [k for k, s_ in enumerate(sols) if not s_.proved]
            det2 = max(self.det1, 0.6 * self.opts.time_limit / len(todo))
            sols2 = list(sols)
            for k in todo:
                if self.left() <= 0.1:
                    break
                hint = {i: c for i, (c, _) in sols[k].moved.items()}
                s2 = self.run(clusters[k], self.opts.workers, det2, hint, tag="improve")
                # proved: the cluster's optimum (the local repair's free-move count is counted
                # on its own small models, so only parts moved and L1 compare across the two)
                old = (sols[k].key[0], sols[k].key[2])
                if s2.ok and s2.proved and (s2.key[0], s2.key[2]) == old:
                    sols2[k] = dataclasses.replace(sols[k], proved=True)  # minimal already
                elif s2.ok and (s2.proved or (s2.key[0], s2.key[2]) < old):
                    sols2[k] = s2
            # re-ordering and re-verifying is bounded by no limit: only when one more fits
            changed = any(x.moved is not y.moved for x, y in zip(sols, sols2, strict=True))
            accepted = False
            if changed and self.left() > self.asm_s:
                what, res = self.assemble(sols2, self.grip_clear)
                if what == "checked" and res.verdict.verdict == Status.PASS:
                    best.got, best.cost = res, _cost(sols2)
                    best.clusters = _report(self.layout, clusters, sols2)
                    self.say(f"improved: {len(res.moves)} part(s) moved")
                    accepted = True
            if changed and not accepted:
                # an answer not re-verified (no time left, or it failed) is dropped: the
                # clusters' report and the proof describe the layout that is returned
                sols2 = [x if x.moved is y.moved else y
                         for x, y in zip(sols2, sols, strict=True)]
            sols = self.sols = sols2
            best.clusters = _report(self.layout, clusters, sols)
            proved = all(s_.proved for s_ in sols)
        if self.opts.decompose:
            best.bound = int(self.bounds.min()) / 10000  # every movable part could move this far
        if proved:
            best.proved = time.perf_counter() - self.t0
        return proved

    def widen(self, proved: bool, exact: bool) -> bool:
        """Widen the move bound while the problem is small: the proof then covers more."""
        best = self.best
        assert best is not None
        widened = 0
        while (self.opts.decompose and exact and proved and int(self.bounds.min()) <
               self.bound_max and self.left() > 0.3 and widened < WIDEN_STEPS
               and self.n <= WIDEN_PARTS):
            widened += 1
            self.bounds = np.minimum(self.bound_max, 3 * self.bounds)
            wide = self.clusters_for(self.must_move)
            hint = {i: c for s_ in self.sols for i, (c, _) in s_.moved.items()}
            sw = [self.run(c, self.opts.workers, WIDEN_DET / len(wide), hint, tag="widen")
                  for c in wide]
            if not all(x.ok and x.proved for x in sw):
                break  # the proof stays the one within the narrower bound
            if _cost(sw) < best.cost:
                if self.left() <= self.asm_s:
                    break  # no time to re-verify it
                what, res = self.assemble(sw, self.grip_clear)
                if what != "checked" or res.verdict.verdict != Status.PASS:
                    break
                best.got, best.cost = res, _cost(sw)
                self.say(f"move bound {int(self.bounds.min()) / 10000:g} m: {len(res.moves)} "
                         "part(s) moved")
            best.clusters = _report(self.layout, wide, sw)
            best.bound = int(self.bounds.min()) / 10000
            self.clusters, self.sols = wide, sw
        return proved


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
