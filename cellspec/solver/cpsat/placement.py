"""The CP-SAT placement model of repair: the parts' centres on the 0.1 mm grid, the
standard geometric rules encoded exactly, the lexicographic objective (see
:mod:`cellspec.solver.cpsat.repair` for the model's meaning and how it is used)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.severity import Severity
from cellspec.dsl.model import Cell
from cellspec.layout import Layout
from cellspec.solver.cpsat.moved_shapes import rules_of
from cellspec.solver.cpsat.rotate import PartTurns, add_turns, growth, odd_parts
from cellspec.solver.instance import BoxU, build_instance

SEED = 1
GEOMETRY_RULES = ("workspace", "no_overlap", "gravity", "keepout")


@dataclass(frozen=True, eq=False)
class GeoOptions:
    """What a placement model may do and must do beyond which parts may move (the options
    record of :class:`_Geo`; the defaults are a plain minimal-change repair)."""

    assumptions: bool = False  # one assumption literal per rule (its cores name rules)
    keep_shape: bool = False  # free moves weigh first: structures stay whole where they can
    grip_clear: bool = False  # the order-free grip condition (see _Geo._grip_clear)
    rigid_only: bool = False  # only rigid shifts of whole structures
    hint: dict[int, list[int]] | None = None  # per part, a centre to try first (0.1 mm)
    must_move: tuple[tuple[int, ...], ...] = ()  # structures unstable in earlier rounds
    # per part and axis, how far (0.1 mm) a movable part's centre may move (None: anywhere
    # in the workspace); pairs whose reaches cannot meet get no constraint
    reach: np.ndarray | None = None
    anchored: np.ndarray | None = None  # fixed parts whose support lies outside this model
    free_only: bool = False  # every move is a free one (no rigid shift, so no kept tolerance)
    # per part, the yaws it may also be turned to (--allow-rotate, .rotate: one Boolean per
    # candidate yaw; a turn counts as a move)
    turns: dict[int, PartTurns] | None = None


def _tightening(must_move: tuple[tuple[int, ...], ...]) -> dict[int, int]:
    """Per part, how many rounds (at most 4) it was unstable: each tightens its support."""
    tighten: dict[int, int] = {}
    for group in must_move:
        for i in group:
            tighten[i] = min(4, tighten.get(i, 0) + 1)
    return tighten


class _Geo:
    """The CP-SAT model of the geometric rules."""

    def __init__(self, cell: Cell, layout: Layout, movable: np.ndarray,
                 opts: GeoOptions) -> None:
        """The model, built in named stages, each adding one family of variables or
        constraints; the order of the stages is the order CP-SAT sees them in (it fixes
        the model, hence its answers)."""
        from ortools.sat.python import cp_model

        self.cp = cp_model
        self.opts = opts
        self.tighten = _tightening(opts.must_move)
        turns = {i: t for i, t in (opts.turns or {}).items() if movable[i]}
        self._setup(cell, layout, turns)
        reach = self._reach(movable)
        self._shifts(movable, reach)
        self._centres(movable, reach)
        turn_max = self._turns(turns)
        mov_idx = np.nonzero(movable)[0].tolist()
        if "workspace" in self.rules:
            self._workspace(mov_idx)
        if "keepout" in self.rules:
            self._keepouts(mov_idx)
        pairs = self._pairs(movable, reach, turns)
        if "no_overlap" in self.rules:
            self._no_overlap(pairs)
        if "gravity" in self.rules:
            self._gravity(movable, mov_idx, pairs)
        if opts.grip_clear:
            self._grip_clear(movable)
        self._must_move()
        self._objective(turn_max)
        self._hints(mov_idx)
        if opts.assumptions:
            self.m.add_assumptions(list(self.guard.values()))

    def _setup(self, cell: Cell, layout: Layout, turns: dict[int, PartTurns]) -> None:
        """The instance, the rules modelled, the empty model, the parts' sizes and centres,
        the workspace's span and the structures (connected components)."""
        inst = build_instance(cell, layout.with_order(None) if layout.order else layout)
        self.inst = inst
        # parts that may turn to a yaw not a multiple of 90 are seen as non-plain parts
        extra = odd_parts(turns, inst.n) if turns else None
        # yawed boxes and cylinders (moved_shapes): the shape rules, or the box rules when
        # every part is a plain box that stays one (chosen once, here)
        self.sr = rules_of(inst, extra)
        b = inst.boxes
        names = {r.name for r in cell.rules if r.severity == Severity.ERROR}
        from cellspec.solver.stability import DEFAULT_MARGIN

        stab_m = cell.stability_margin if cell.stability_margin is not None else DEFAULT_MARGIN
        # U units, one more than the margin: a moved part's own centre is never at the edge
        self.stab_u = g.to_u_int(stab_m) + 1 if "stability" in names else 0
        self.rules = [r for r in GEOMETRY_RULES if r in names]
        self.m = self.cp.CpModel()
        self.guard: dict[str, Any] = {}
        self.lit_rule: dict[int, str] = {}
        s2 = (b[:, 1::2] - b[:, 0::2])  # full size per axis, U (even)
        self.half = s2 // 2  # half size in U = size in 0.1 mm
        c0 = (b[:, 0::2] + b[:, 1::2]) // 2  # centre, U (even)
        self.c0 = c0 // 2  # centre in 0.1 mm
        ws = inst.zones["workspace"]
        assert isinstance(ws, BoxU)
        self.ws = ws
        self.span = [max(abs(ws.lo[k]), abs(ws.hi[k]), int(np.abs(b[:, 2 * k:2 * k + 2]).max()))
                     for k in range(3)]
        self.comp = self.sr.components()

    def _rule_guard(self, name: str) -> list:
        """The assumption literal of rule ``name`` as a list (empty without assumptions)."""
        if not self.opts.assumptions:
            return []
        if name not in self.guard:
            lit = self.m.new_bool_var(f"rule_{name}")
            self.guard[name] = lit
            self.lit_rule[lit.Index()] = name
        return [self.guard[name]]

    def _reach(self, movable: np.ndarray) -> np.ndarray:
        """Per part and axis, how far its centre may move (0 for a fixed part)."""
        reach = self.opts.reach
        if reach is None:
            reach = np.zeros((self.inst.n, 3), dtype=np.int64)
            reach[movable] = np.asarray(self.span, dtype=np.int64)[None, :] * 2
        return np.where(movable[:, None], reach, 0)

    def _shifts(self, movable: np.ndarray, reach: np.ndarray) -> None:
        """One rigid shift per structure with a movable part, and its literal."""
        m, comp = self.m, self.comp
        ncomp = int(comp.max()) + 1 if self.inst.n else 0
        mov_comp = np.zeros(ncomp, dtype=bool)
        mov_comp[comp[movable]] = True
        self.shift = {}
        self.shifted = {}
        for k in np.nonzero(mov_comp)[0].tolist():
            rk = reach[comp == k].max(axis=0)
            self.shift[k] = [m.new_int_var(-int(rk[a]), int(rk[a]), f"T{k}{a}") for a in range(3)]
            sh = m.new_bool_var(f"sh{k}")
            self.shifted[k] = sh
            for a in range(3):
                m.add(self.shift[k][a] == 0).OnlyEnforceIf(sh.Not())

    def _centres(self, movable: np.ndarray, reach: np.ndarray) -> None:
        """Every part's centre (an int when fixed; the structure's shift plus a free move
        when movable), its moved and free literals and its L1 distance terms."""
        m, span, opts = self.m, self.span, self.opts
        self.c: list[list[Any]] = []  # centre in 0.1 mm: int or var
        self.free: dict[int, Any] = {}
        self.moved: dict[int, Any] = {}
        self.l1: list[Any] = []
        for i in range(self.inst.n):
            if not movable[i]:
                self.c.append([int(self.c0[i, a]) for a in range(3)])
                continue
            k = int(self.comp[i])
            fr = m.new_bool_var(f"free{i}")
            mv = m.new_bool_var(f"mv{i}")
            self.free[i] = fr
            self.moved[i] = mv
            ci = []
            for a in range(3):
                r = int(reach[i, a])
                c0 = int(self.c0[i, a])
                f = m.new_int_var(-2 * r, 2 * r, f"f{i}{a}")
                m.add(f == 0).OnlyEnforceIf(fr.Not())
                v = m.new_int_var(max(-span[a], c0 - r), min(span[a], c0 + r), f"c{i}{a}")
                m.add(v == c0 + self.shift[k][a] + f)
                d = m.new_int_var(0, r, f"d{i}{a}")
                m.add_abs_equality(d, v - int(self.c0[i, a]))
                m.add(d == 0).OnlyEnforceIf(mv.Not())
                self.l1.append(d)
                ci.append(v)
            m.add_implication(fr, mv)
            if opts.rigid_only:
                m.add(fr == 0)
            if opts.free_only:
                m.add(fr == mv)
                for a in range(3):
                    m.add(self.shift[k][a] == 0)
            m.add_implication(self.shifted[k], mv)
            self.c.append(ci)

    def _turns(self, turns: dict[int, PartTurns]) -> int:
        """The half sizes (expressions for a part that may turn), the turn literals and
        their costs; returns the largest total turn cost."""
        n, m = self.inst.n, self.m
        self.turn: dict[int, list[tuple[Any, float]]] = {}  # (literal, new yaw) per part
        hv: list[list[Any]] = [[int(self.half[i, a]) for a in range(3)] for i in range(n)]
        self.hv = hv
        # inscribed half extents on x and y (support of non-plain parts): ints or expressions
        self.inner_v = self.sr.inner_exprs()
        turn_max = 0
        for i in sorted(turns):  # a turn costs its rank: never turned for nothing
            lits, cost, top = add_turns(m, i, turns[i], self.moved[i], hv[i],
                                        None if self.inner_v is None else self.inner_v[i])
            self.turn[i] = lits
            for t, _ in lits:  # a turn changes its structure's shape: a free move, as a
                m.add_implication(t, self.free[i])  # non-rigid move of one part is
            self.l1.extend(cost)
            turn_max += top
        return turn_max

    def lo(self, i: int, a: int) -> Any:
        """The low face of part ``i`` on axis ``a`` (U: an int or an expression)."""
        return 2 * self.c[i][a] - self.hv[i][a]

    def hi(self, i: int, a: int) -> Any:
        """The high face of part ``i`` on axis ``a`` (U: an int or an expression)."""
        return 2 * self.c[i][a] + self.hv[i][a]

    def _workspace(self, mov_idx: list[int]) -> None:
        """Every moved part inside the workspace."""
        m, sr, ws = self.m, self.sr, self.ws
        for i in mov_idx:
            if sr.any(i):
                # the enclosing box inside, exactly, once it moves
                on = self._rule_guard("workspace") + ([] if not sr.inside0(i, ws)
                                                      else [self.moved[i]])
                for a in range(3):
                    m.add(ws.lo[a] - self.lo(i, a) <= 0).OnlyEnforceIf(on)
                    m.add(self.hi(i, a) - ws.hi[a] <= 0).OnlyEnforceIf(on)
                continue
            for a in range(3):
                self.tight(ws.lo[a] - self.lo(i, a), self._rule_guard("workspace"), (i,))
                self.tight(self.hi(i, a) - ws.hi[a], self._rule_guard("workspace"), (i,))

    def _keepouts(self, mov_idx: list[int]) -> None:
        """Every moved part out of every keep-out zone (a box or a half-space)."""
        m, sr, inst = self.m, self.sr, self.inst
        for zname in inst.keepouts:
            z = inst.zones[zname]
            gl = self._rule_guard(f"keepout {zname}")
            for i in mov_idx:
                odd = sr.any(i)
                clear0 = odd and sr.clear0(i, z)
                if isinstance(z, BoxU):
                    opts = []
                    for a in range(3):
                        for expr in (self.hi(i, a) - z.lo[a], z.hi[a] - self.lo(i, a)):
                            lit = m.new_bool_var("")
                            if odd:  # the enclosing box apart, exactly
                                m.add(expr <= 0).OnlyEnforceIf(lit)
                            else:
                                self.tight(expr, [lit], (i,))
                            opts.append(lit)
                    if clear0:  # clear of it now: it may stay
                        opts.append(self.moved[i].Not())
                    m.add_bool_or(opts).OnlyEnforceIf(gl)
                elif odd:
                    self._half(i, z, 0, gl + ([self.moved[i]] if clear0 else []))
                else:
                    self._half(i, z, inst.eps, gl)

    def _pairs(self, movable: np.ndarray, reach: np.ndarray,
               turns: dict[int, PartTurns]) -> list[tuple[int, int]]:
        """The pairs (one part movable) whose reaches come within the relation margin
        (beyond it no rule relates them); sets ``close`` (every such pair, both ways)."""
        inst, n, b = self.inst, self.inst.n, self.inst.boxes
        margin = g.relation_margin(b, inst.eps, flanks=self.opts.grip_clear,
                                   opening=inst.opening, depth=inst.depth) + 2
        grow = growth(turns, n)  # how much farther a part reaches once turned
        s_lo, s_hi = b[:, 0::2] - 2 * reach - grow, b[:, 1::2] + 2 * reach + grow
        close = np.ones((n, n), dtype=bool)
        for a in range(3):
            close &= s_lo[:, None, a] - s_hi[None, :, a] <= margin
            close &= s_lo[None, :, a] - s_hi[:, None, a] <= margin
        np.fill_diagonal(close, False)
        self.close = close
        ii, jj = np.nonzero(np.triu(close, 1) & (movable[:, None] | movable[None, :]))
        return list(zip(ii.tolist(), jj.tolist(), strict=True))

    def _no_overlap(self, pairs: list[tuple[int, int]]) -> None:
        """Every close pair apart on some axis (or, apart now, its relative place kept)."""
        m, sr = self.m, self.sr
        gl = self._rule_guard("no_overlap")
        for i, j in pairs:
            odd = sr.any(i, j)
            opts = []
            for a in range(3):
                for expr in (self.hi(i, a) - self.lo(j, a), self.hi(j, a) - self.lo(i, a)):
                    lit = m.new_bool_var("")
                    if odd:  # the enclosing boxes apart, exactly
                        m.add(expr <= 0).OnlyEnforceIf(lit)
                    else:
                        self.tight(expr, [lit], (i, j))
                    opts.append(lit)
            if odd and sr.apart0(i, j):  # apart now: may stay so
                opts.append(self.same((i, j)))
            m.add_bool_or(opts).OnlyEnforceIf(gl)

    def _gravity(self, movable: np.ndarray, mov_idx: list[int],
                 pairs: list[tuple[int, int]]) -> None:
        """Every part that moves or may touch one that moves rests on a surface or on a
        part (its centre over it, with the stability margin for a new support)."""
        m, sr, inst, b, eps = self.m, self.sr, self.inst, self.inst.boxes, self.inst.eps
        tighten, stab_u, close = self.tighten, self.stab_u, self.close
        anchored = (np.zeros(inst.n, dtype=bool) if self.opts.anchored is None
                    else self.opts.anchored)
        gl = self._rule_guard("gravity")
        surf = sorted(set(inst.surfaces.values()))
        need = set(mov_idx)
        for i, j in pairs:
            need.add(i)
            need.add(j)
        for i in sorted(need):
            if anchored[i] and not tighten.get(i):
                continue  # fixed, and resting on a fixed part outside this model
            opts = []
            done = False
            for z in surf:
                lit = m.new_bool_var("")
                self.tight(z - self.lo(i, 2), [lit], (i,))
                self.tight(self.lo(i, 2) - z, [lit], (i,))
                opts.append(lit)
            for j in np.nonzero(close[i])[0].tolist():
                if j == i:
                    continue
                odd = sr.any(i, j)
                if not movable[i] and not movable[j]:
                    sup = sr.supports0(j, i) if odd else bool(
                        g.supports(b[j], b[i], eps))
                    done = done or (sup and self._centred(i, j, tighten.get(i, 0)))
                    continue
                if odd:
                    opts.extend(self._odd_support(i, j, stab_u, tighten.get(i, 0)))
                    continue
                opts.append(self._box_support(i, j))
            if done:
                continue
            m.add_bool_or(opts).OnlyEnforceIf(gl)

    def _box_support(self, i: int, j: int) -> Any:
        """A literal for "plain box j carries plain box i": i's bottom on j's top, their
        footprints overlapping, i's centre over j (with the margins of a new or a
        tightened support)."""
        m, eps, stab_u, tighten = self.m, self.inst.eps, self.stab_u, self.tighten
        lit = m.new_bool_var("")
        self.tight(self.lo(i, 2) - self.hi(j, 2), [lit], (i, j))
        self.tight(self.hi(j, 2) - self.lo(i, 2), [lit], (i, j))
        for a in range(2):
            m.add(self.hi(i, a) - self.lo(j, a) > eps).OnlyEnforceIf(lit)
            m.add(self.hi(j, a) - self.lo(i, a) > eps).OnlyEnforceIf(lit)
            ctr = 2 * self.c[i][a]
            for t in self.changed((i, j)):  # a new support: centre over it,
                # the stability margin inside its edges (every stage stands)
                m.add(ctr >= self.lo(j, a) + stab_u).OnlyEnforceIf([lit, t])
                m.add(ctr <= self.hi(j, a) - stab_u).OnlyEnforceIf([lit, t])
            if tighten.get(i):  # unstable before: centre well inside the support
                mu = tighten[i] * int(self.half[i, a]) // 4
                m.add(ctr >= self.lo(j, a) + mu).OnlyEnforceIf(lit)
                m.add(ctr <= self.hi(j, a) - mu).OnlyEnforceIf(lit)
        return lit

    def _must_move(self) -> None:
        """The structure unstable last: something in it must move."""
        m = self.m
        for group in self.opts.must_move[-1:]:
            lits = [self.moved[i] for i in group if i in self.moved]
            if lits:
                m.add_bool_or(lits)
            else:
                m.add_bool_or([m.new_constant(0)])

    def _objective(self, turn_max: int) -> None:
        """Lexicographic objective: parts moved, then free (non-rigid) moves, then L1;
        keep_shape: free moves first (structures stay whole where geometry allows)."""
        span = self.span
        max_l1 = sum(4 * span[a] for a in range(3)) * max(1, len(self.free)) + turn_max
        nf = len(self.free) + 1
        lo_w, hi_w = max_l1 + 1, (max_l1 + 1) * nf
        w_moved, w_free = (lo_w, hi_w) if self.opts.keep_shape else (hi_w, lo_w)
        self.m.minimize(w_moved * sum(self.moved.values()) + w_free * sum(self.free.values())
                        + sum(self.l1))

    def _hints(self, mov_idx: list[int]) -> None:
        """The hinted centres to try first; every other movable part hinted to stay."""
        m, hint = self.m, self.opts.hint
        for i in mov_idx:
            if hint and i in hint:
                m.add_hint(self.moved[i], 1)
                for a in range(3):
                    m.add_hint(self.c[i][a], hint[i][a])
            else:
                m.add_hint(self.moved[i], 0)

    def _grip_clear(self, movable: np.ndarray) -> None:
        """A sufficient, order-free condition for grip access: every moved part placed by
        the parallel gripper (and every fixed one that had such an axis) keeps one lateral
        axis with no flanking part at all, so any support order can grip it. Used when the
        moved layout admits no order."""
        inst, m, eps = self.inst, self.m, self.inst.eps
        n = inst.n
        op0 = None
        from cellspec.solver.cpsat.sequence import order_problem

        op0 = order_problem(inst)
        par = [gk == "parallel" for gk in inst.grippers]
        for p in range(n):
            if not par[p] or self.sr.any(p):
                continue  # a yawed box or a cylinder: its grip is left to the order
            if not movable[p] and op0.block[p][0] and op0.block[p][1]:
                continue  # fixed and already flanked on both axes: leave it to the order
            axes = []
            for a, ax in enumerate("xy"):
                o = 1 - a
                clear = m.new_bool_var("")
                axes.append(clear)
                size_a = 2 * int(self.half[p, a])
                for q in np.nonzero(self.close[p])[0].tolist():
                    if q == p or not (movable[p] or movable[q]):
                        if q != p and not movable[p] and q in op0.block[p][a]:
                            m.add(clear == 0)
                        continue
                    lits = []
                    exprs = [self.hi(q, o) - self.lo(p, o), self.hi(p, o) - self.lo(q, o),
                             self.hi(p, 2) - self.lo(q, 2)]
                    if inst.depth is None:
                        exprs.append(self.hi(q, 2) - self.lo(p, 2))
                    else:
                        exprs.append(self.hi(q, 2) - self.hi(p, 2) + inst.depth)
                    for e in exprs:
                        lit = m.new_bool_var("")
                        m.add(e <= eps).OnlyEnforceIf(lit)
                        lits.append(lit)
                    for e in (self.lo(q, a) - self.hi(p, a), self.lo(p, a) - self.hi(q, a)):
                        lit = m.new_bool_var("")
                        if inst.opening is None:
                            m.add(e > eps).OnlyEnforceIf(lit)
                        else:
                            m.add(2 * e >= inst.opening - size_a).OnlyEnforceIf(lit)
                        lits.append(lit)
                    m.add_bool_or(lits).OnlyEnforceIf(clear)
                del ax
            m.add_bool_or(axes)

    def _centred(self, i: int, j: int, level: int) -> bool:
        """For fixed i on fixed j: i's centre lies over j's footprint shrunk by
        ``level`` quarters of i's half size (level 0: always true); over j's inner box
        when i or j is a yawed box or a cylinder."""
        if not level:
            return True
        odd = self.sr.any(i, j)
        for a in range(2):
            mu = level * int(self.half[i, a]) // 4
            ctr = 2 * int(self.c[i][a])
            if odd:
                lo = 2 * int(self.c[j][a]) - int(self.sr.inner[j, a])
                hi = 2 * int(self.c[j][a]) + int(self.sr.inner[j, a])
            else:
                lo, hi = self.lo(j, a), self.hi(j, a)
            if not (lo + mu <= ctr <= hi - mu):
                return False
        return True

    def same(self, parts: tuple[int, ...]) -> Any:
        """A literal that holds only if the relative position of ``parts`` is unchanged
        (then every exact relation between them is what it was)."""
        lit = self.m.new_bool_var("")
        for t in self.changed(parts):
            self.m.add_implication(lit, t.Not())
        return lit

    def _odd_support(self, i: int, j: int, stab_u: int, level: int) -> list:
        """Options for "j carries i" when i or j is a yawed box or a cylinder
        (moved_shapes): i's bottom exactly on j's top, their inner boxes overlapping by
        more than eps on x and y, and i's centre over j's inner box, the stability margin
        (or, after an unstable round, ``level`` quarters of i's half size) inside its
        edges; or, if j carries i in the input, their relative position kept."""
        assert self.inner_v is not None
        m, eps, inner = self.m, self.inst.eps, self.inner_v
        lit = m.new_bool_var("")
        m.add(self.lo(i, 2) == self.hi(j, 2)).OnlyEnforceIf(lit)
        for a in range(2):
            ci, cj = 2 * self.c[i][a], 2 * self.c[j][a]
            ai, aj = inner[i][a], inner[j][a]  # expressions for a part that may turn
            m.add(ci + ai - (cj - aj) > eps).OnlyEnforceIf(lit)
            m.add(cj + aj - (ci - ai) > eps).OnlyEnforceIf(lit)
            mu = max(stab_u, level * int(self.half[i, a]) // 4)
            m.add(ci >= cj - aj + mu).OnlyEnforceIf(lit)
            m.add(ci <= cj + aj - mu).OnlyEnforceIf(lit)
        out = [lit]
        if not level and self.sr.supports0(j, i):
            out.append(self.same((i, j)))
        return out

    def tight(self, expr: Any, lits: list, parts: tuple[int, ...]) -> None:
        """``expr <= eps`` holds under ``lits``; a moved part gets no tolerance: ``expr <= 0``
        (repairs put faces exactly together, inside, apart)."""
        self.m.add(expr <= self.inst.eps).OnlyEnforceIf(lits)
        for t in self.changed(parts):
            self.m.add(expr <= 0).OnlyEnforceIf([*lits, t])

    def changed(self, parts: tuple[int, ...]) -> list:
        """Literals any of which means the geometry of ``parts`` changed: a part moved, or,
        for two parts of one structure, one of them left it (a rigid shift keeps their
        relation, tolerance included). A turn changes a pair with a non-plain part (whose
        input relation may be kept); a plain pair's constraints hold whether a part turns
        a quarter or not, tolerance included, as before."""
        if (len(parts) == 2 and self.comp[parts[0]] == self.comp[parts[1]]
                and all(k in self.free for k in parts)):  # a fixed member does not shift
            turned = self.sr.any(*parts)
            return [self.free[k] for k in parts if k in self.free] + [
                t for k in parts if turned for t, _ in self.turn.get(k, ())]
        return [self.moved[k] for k in parts if k in self.moved]

    def _half(self, i: int, z: g.HalfSpaceU, eps: int, gl: list) -> None:
        lo, hi = g.lin_extremes(z.coef, [self.lo(i, a) for a in range(3)],
                                [self.hi(i, a) for a in range(3)])
        slack = eps * sum(abs(c) for c in z.coef)
        if z.op in (">", ">="):
            self.m.add(hi - slack <= z.rhs).OnlyEnforceIf(gl)
        else:
            self.m.add(lo + slack >= z.rhs).OnlyEnforceIf(gl)

    def solve(self, time_limit: float, workers: int,
              det_limit: float | None = None, fast: bool = False) -> tuple[int, Any]:
        """Solve with a wall-clock limit and, when given, a deterministic-time limit (the
        one meant to bind, so answers at a limit repeat run to run); several workers
        search interleaved, deterministically."""
        s = self.cp.CpSolver()
        s.parameters.max_time_in_seconds = time_limit
        if det_limit is not None:
            s.parameters.max_deterministic_time = det_limit
        if fast:  # a tiny model (one part of the local repair): presolve costs more than it saves
            s.parameters.cp_model_presolve = False
        s.parameters.num_workers = workers
        if workers > 1:
            s.parameters.interleave_search = True
        s.parameters.random_seed = SEED
        if not fast and not self.guard:  # the LP relaxation at level 2 bounds the L1
            # objective: without it a 6-part repair proved its minimum only after ~3 700
            # solutions, one 0.1 mm apart (12 s; 0.45 s with it). Not for the cores of
            # rules (assumptions): they stay as they were
            s.parameters.linearization_level = 2
        st = s.Solve(self.m)
        return st, s
