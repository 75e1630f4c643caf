"""Static stability of block structures: the meaning of ``stable(p)`` and ``placed_stable(p)``.

The model is rigid-block equilibrium (Whiting et al. 2009; the RBE of compas_cra), made
conservative where plain RBE is known to be optimistic (docs/language.md, "Stability"):

* contacts: a part's bottom on a surface (its footprint) and a part's bottom on another
  part's top (the footprint overlap, any positive width: slivers carry at their corners);
* side contacts: touching vertical faces push only and carry no friction, so they never
  clamp; they are used only where a structure fails without them (they only add
  forces), and then that structure's horizontal contacts get linearised friction
  (``friction MU``, default 0.5); elsewhere forces are vertical (:mod:`stability_lp`);
* the margin M: the structure must stand with every centre of mass moved by (+-M, +-M),
  the corners of a square that contains every horizontal shift of length M (the loads
  under which it stands are convex): at least as strict as moving every centre of mass
  by M in any horizontal direction;
* forces push only (no glue); every part is in force and moment balance under its weight
  at its box centre (uniform density); a part that rests on nothing is held fixed here
  (``gravity`` reports it).

A structure stands when such forces exist. Parts whose structure is a forest (every part
on at most one contact) are decided exactly without an LP: a part stands on its contact
when the centre of mass of the part and everything it carries lies at least M inside the
contact rectangle. Other structures are one GLOP LP each (:mod:`stability_lp`), which
maximises the shift up to M so the message says by how much it misses. ``stable(p)`` is
false for the part that topples or slides off what carries it (with whatever it
carries), so each failure is reported once, where it happens. ``placed_stable(p)``: when
the layout has an order, the structure p joins when it is placed stands (every stage).

Assumptions: rigid parts, static loads (gravity only), no sliding at the margin. Yawed boxes
and cylinders: contact polygons (:mod:`stability_shapes`), same margin and stages. Limits:
a structure that needs more than ``MAX_LP_PARTS`` parts in one LP (reason ``grounding
limit``), an LP that does not finish in ``LP_TIME_LIMIT_S`` (``time limit``) or that no
solver decides, however retried (``solver failure``: GLOP's ABNORMAL, issue 28), raises
:class:`StabilityLimit`. ``check`` asks for a tolerant report instead (the instance's
``derived.stability_tolerant``): such a structure is then :class:`UndecidedStructure` (its
parts count as standing, so no violation is claimed for them) and the others are decided as
usual, so the verdict can still be ``fail`` on what is known (cellspec/solver/verify.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, cast

import numpy as np

from cellspec.core import geometry as g
from cellspec.core.status import Reason, SolverLimit
from cellspec.solver import stability_lp as lp
from cellspec.solver.stability_contacts import Contacts, contacts

if TYPE_CHECKING:  # instance.py imports this module's Report the same way
    from cellspec.solver.instance import Instance

DEFAULT_FRICTION = Fraction(1, 2)
DEFAULT_MARGIN = Fraction(1, 1000)  # m: the smallest whole mm with 0 false passes on
# bench/physics_agreement.py (issue 14's centre-of-mass shift with side contacts, labelled
# by settle at 960 Hz: 1 000 structures, seed 0: 0 mm gives 4 false passes, 1 mm none at
# 2.9 % false fails; the 400 of seed 1: 4, then none at 4.5 %; see the README. With
# settle at 240 Hz 1 mm passed one heavy stack on the 30 mm cube per seed, which stands
# at 960 and 2400 Hz: docs/twin.md, "The settle oracle")
GRAVITY = lp.GRAVITY
MAX_LP_PARTS = 400  # parts in one structure that needs an LP
LP_TIME_LIMIT_S = 2.0
TOL = 1e-9  # m: slack on the margin comparison (float rounding, not physics)
LP_TOL = 1e-7  # m: the same for the LP's shift (GLOP's feasibility tolerance, 0.1 um)
U = float(g.U)


def _shapes():  # noqa: ANN202
    """cellspec.solver.stability_shapes, imported (with shapely) only for layouts with shapes."""
    from cellspec.solver import stability_shapes

    return stability_shapes


class StabilityLimit(SolverLimit):
    """A stability LP could not be decided within its limits (the verdict is unknown):
    ``reason`` says which (size: grounding limit; time limit; solver failure)."""

    reason = Reason.GROUNDING_LIMIT


def _limit(exc: lp.LPLimit, n: int) -> StabilityLimit:
    """The StabilityLimit of an LP of a structure of ``n`` parts that no solver decided."""
    if exc.timed_out:
        tried = ", ".join(f"{name} {status}" for name, status in exc.statuses)
        return StabilityLimit(f"the stability LP of a structure of {n} parts did not finish "
                              f"within {LP_TIME_LIMIT_S:g} s ({tried})", exc.reason)
    return StabilityLimit(f"the stability LP of a structure of {n} parts could not be "
                          f"solved: {exc.sentence()}", exc.reason)


def _size_limit(n: int) -> StabilityLimit:
    return StabilityLimit(f"a structure of {n} parts needs a stability LP (the limit is "
                          f"{MAX_LP_PARTS} parts)", Reason.GROUNDING_LIMIT)


@dataclass(frozen=True)
class UndecidedStructure:
    """A structure whose stability a limit left undecided (tolerant reports only)."""

    parts: tuple[int, ...]  # its parts (sorted)
    reason: str  # the StabilityLimit's sentence
    code: Reason
    step: int | None = None  # a stage (1-based step of the order); None: the finished layout

    def text(self, ids: tuple[str, ...]) -> str:
        """'the stability of the structure of a, b, c (3 parts) is undecided: ...'"""
        names = ", ".join(ids[p] for p in self.parts[:6])
        more = f" and {len(self.parts) - 6} more" if len(self.parts) > 6 else ""
        at = "" if self.step is None else f" after step {self.step}"
        return (f"the stability of the structure of {names}{more} ({len(self.parts)} "
                f"part{'s' if len(self.parts) != 1 else ''}){at} is undecided: {self.reason}")


@dataclass(frozen=True)
class Failure:
    """Why a part does not stand: it topples or slides off ``support`` (names)."""

    part: int
    support: tuple[str, ...]  # part ids or surface names under it
    carried: int  # parts it carries (on it, transitively)
    achieved: float  # m: how far inside the contact edges its load acts (< 0: beyond)
    margin: float  # m: what the cell asks for
    exact: bool  # True: forest analysis (centre of mass); False: LP structure
    edge: float | None = None  # m: a contact polygon's edge distance (achieved: its margin)
    rim: float = 0.0  # m: the contact's edge allowance (a cylinder's rim: stability_shapes)

    def text(self, ids: tuple[str, ...]) -> str:
        """The human sentence: how far inside or beyond the edge, against the margin (to
        0.1 mm: the default margin is 1 mm; a load less than 0.05 mm beyond an edge prints
        as on it)."""
        on = " and ".join(self.support) if self.support else "its supports"
        carry = (f", with the {self.carried} part{'s' if self.carried != 1 else ''} it "
                 "carries," if self.carried else "")
        name = ids[self.part]
        if self.exact and self.edge is not None:  # a contact polygon (shapes)
            return _shapes().forest_text(name, carry, on, self.achieved, self.edge, self.margin,
                                         self.rim)
        if self.exact:
            if self.achieved < -0.00005:
                return (f"{name} topples off {on}: its centre of mass{carry} is "
                        f"{-self.achieved:.4f} m beyond the edge")
            return (f"{name} stands with its centre of mass{carry} {max(self.achieved, 0):.4f} m "
                    f"inside the edge of {on}; the cell asks for {self.margin:.4f} m")
        if self.achieved == float("-inf"):
            return (f"{name} slides or topples off {on}: no contact forces hold its structure, "
                    "whatever common shift of its centres of mass (up to 0.05 m)")
        if self.achieved < -0.00005:
            return (f"{name} topples off {on}: its structure stands only with its centres of "
                    f"mass moved {-self.achieved:.4f} m (it misses by that much)")
        return (f"{name} does not stand on {on} with the margin: its structure stands with "
                f"every centre of mass moved by up to {max(self.achieved, 0):.4f} m in any "
                f"direction; the cell asks for {self.margin:.4f} m")


@dataclass
class Structure:
    """What :func:`analyse` needs of an instance, in metres and kilograms."""

    ids: tuple[str, ...]
    boxes: np.ndarray
    masses: np.ndarray
    friction: float
    margin: float
    con: Contacts
    undecided: list[UndecidedStructure] | None = None  # a list: limits are recorded, not raised
    step: int | None = None  # the stage being analysed (for UndecidedStructure.step)

    def undecide(self, parts: list[int], exc: StabilityLimit) -> None:
        """Record ``parts`` as undecided, or raise ``exc`` when the report is not tolerant."""
        if self.undecided is None:
            raise exc
        self.undecided.append(UndecidedStructure(tuple(sorted(parts)), str(exc), exc.reason,
                                                 self.step))

    def centre_of(self, parts: np.ndarray | list[int]) -> np.ndarray:
        """Box centres (m) of some parts."""
        b = self.boxes[np.asarray(parts, dtype=np.int64)]
        return (b[:, 0::2] + b[:, 1::2]) / 2.0 * U

    def support_names(self, p: int, placed: np.ndarray | None = None) -> tuple[str, ...]:
        out = []
        for k in self.con.by_upper[p]:
            lo = int(self.con.lower[k])
            if lo < 0:
                out.append(f"the {self.con.surf[k]}")
            elif placed is None or placed[lo]:
                out.append(self.ids[lo])
        return tuple(out)


# -- forests: exact, no LP -------------------------------------------------------------

def _edge_distance(rect_u: np.ndarray, cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
    """Signed distance (m) of points inside rectangles (U): > 0 inside, < 0 beyond."""
    r = rect_u * U
    return np.minimum.reduce([cx - r[:, 0], r[:, 1] - cx, cy - r[:, 2], r[:, 3] - cy])


def _forest(st: Structure, members: np.ndarray, active: np.ndarray) -> list[Failure]:
    """Failures in a set of parts where each part has at most one active contact below.

    ``active`` masks the contacts that exist (both ends placed). Vectorised; a small set
    gathers its own contacts, so it costs little whatever the layout's size."""
    con = st.con
    mem = np.sort(np.asarray(members, dtype=np.int64))
    m = len(mem)
    if m == 0:
        return []
    if m * 8 < len(st.boxes):
        ks = np.array([k for p in mem.tolist() for k in con.by_upper[p]], dtype=np.int64)
    else:
        ks = np.nonzero(np.isin(con.upper, mem))[0]
    ks = ks[active[ks]] if len(ks) else ks
    edge = np.full(m, -1, dtype=np.int64)
    parent = np.full(m, -1, dtype=np.int64)  # local index of the carrying part, -1: none
    if len(ks):
        lu = np.searchsorted(mem, con.upper[ks])
        edge[lu] = ks
        lo = con.lower[ks]
        ll = np.minimum(np.searchsorted(mem, lo), m - 1)
        inside = (lo >= 0) & (mem[ll] == lo)
        parent[lu[inside]] = ll[inside]
    depth = np.zeros(m, dtype=np.int64)
    for _ in range(m + 1):
        new = np.where(parent >= 0, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            break
        depth = new
    c = st.centre_of(mem)
    w = st.masses[mem].astype(np.float64).copy()
    mx = w * c[:, 0]
    my = w * c[:, 1]
    cnt = np.ones(m, dtype=np.int64)
    for d in range(int(depth.max()), 0, -1):
        idx = np.nonzero(depth == d)[0]
        np.add.at(w, parent[idx], w[idx])
        np.add.at(mx, parent[idx], mx[idx])
        np.add.at(my, parent[idx], my[idx])
        np.add.at(cnt, parent[idx], cnt[idx])
    has = np.nonzero(edge >= 0)[0]
    if not len(has):
        return []
    k = edge[has]
    rim = None
    if con.fp is None:
        dist = _edge_distance(con.rect[k], mx[has] / w[has], my[has] / w[has])
        euclid = None
    else:  # contact polygons (shapes): the same four shifts, edge distance from the polygon
        dist, euclid = _shapes().edge_distance(con, k, mx[has] / w[has], my[has] / w[has],
                                                st.margin - TOL)  # inf: surely not bad
        rim = _shapes().rim_of(con, con.upper[k], con.lower[k]) * U
    bad = np.nonzero(dist < st.margin - TOL)[0]
    out = []
    for t in bad.tolist():
        li = int(has[t])
        lo_p = int(con.lower[k[t]])
        sup = (st.ids[lo_p],) if lo_p >= 0 else (f"the {con.surf[int(k[t])]}",)
        out.append(Failure(int(mem[li]), sup, int(cnt[li]) - 1, float(dist[t]), st.margin,
                           True, None if euclid is None else float(euclid[t]),
                           0.0 if rim is None else float(rim[t])))
    return out


# -- general structures: one LP -------------------------------------------------------

def _group(st: Structure, members: list[int], active: np.ndarray,
           side_ks: np.ndarray | None = None) -> lp.Group:
    """The LP view of ``members``: their active contacts below (a lower part outside the
    set is held fixed, like a surface) and, when given, the side contacts ``side_ks``."""
    con = st.con
    pos = {p: t for t, p in enumerate(members)}
    rows, ks = [], []
    for t, p in enumerate(members):
        for k in con.by_upper[p]:
            if active[k]:
                lo = pos.get(int(con.lower[k]), -1)
                rows.append((t, lo, *con.rect[k].tolist(), int(con.z[k])))
                ks.append(k)
    hz = np.array(rows, dtype=np.float64).reshape(-1, 7)
    hz[:, 2:] *= U
    balanced = np.zeros(len(members), dtype=bool)
    if len(hz):
        balanced[hz[:, 0].astype(np.int64)] = True
    sd = np.zeros((0, 8))
    if side_ks is not None and len(side_ks):
        raw = con.sides[side_ks]
        sd = np.column_stack([[pos[int(a)] for a in raw[:, 0]], [pos[int(b)] for b in raw[:, 1]],
                              raw[:, 2], raw[:, 3:] * U]).astype(np.float64)
    grp = lp.Group(st.centre_of(members), st.masses[np.asarray(members, dtype=np.int64)],
                   balanced, hz, sd, st.friction)
    if con.fp is not None:  # forces at the contact polygons' vertices (shapes)
        grp = _shapes().with_polygons(grp, con, np.array(ks, dtype=np.int64))
    return grp


def _solve(grp: lp.Group, margin: float, n: int) -> float | None:
    try:
        return lp.solve(grp, margin, LP_TIME_LIMIT_S)
    except lp.LPLimit as exc:
        raise _limit(exc, n) from None


def _lp(st: Structure, members: list[int], active: np.ndarray, margin: float,
        side_ks: np.ndarray | None = None) -> tuple[bool, float | None]:
    """Whether ``members`` stand with every centre of mass moved by up to ``margin`` (m),
    and the largest such shift (None: not even unshifted)."""
    t = _solve(_group(st, members, active, side_ks), margin, len(members))
    return (t is not None and t >= margin - LP_TOL), t


def _lp_failures(st: Structure, members: list[int], active: np.ndarray,
                 placed: np.ndarray | None = None, explain: bool = True,
                 side_ks: np.ndarray | None = None) -> list[Failure]:
    """Failures of one LP structure: empty when it stands with the margin. Without
    ``explain`` a failing structure gives one unexplained failure (no residual LP: for
    searches that only need to know whether it stands)."""
    if len(members) > MAX_LP_PARTS:
        raise _size_limit(len(members))
    grp = _group(st, members, active, side_ks)
    t = _solve(grp, st.margin, len(members))
    if t is not None and t >= st.margin - LP_TOL:
        return []
    if not explain:
        return [Failure(members[0], ("its supports",), 0, float("nan"), st.margin, False)]
    try:
        if t is None:
            res = lp.residuals(grp, (0.0, 0.0), LP_TIME_LIMIT_S)
            beyond = lp.min_shift(grp, LP_TIME_LIMIT_S)
            achieved = -beyond if beyond is not None else float("-inf")
        else:
            m = st.margin
            res = cast(np.ndarray, sum(lp.residuals(grp, (sx * m, sy * m), LP_TIME_LIMIT_S)
                                       for sx, sy in lp.CASES))  # CASES is never empty
            achieved = t
    except lp.LPLimit as exc:
        raise _limit(exc, len(members)) from None
    worst = float(np.max(res)) if len(res) else 0.0
    culprits = sorted(members[i] for i in np.nonzero(res > max(1e-6, 0.5 * worst))[0].tolist())
    if not culprits:
        culprits = [min(members)]
    carried = _carried(st, culprits[0], set(members), active)
    return [Failure(p, st.support_names(p, placed), carried if p == culprits[0] else 0,
                    achieved, st.margin, False) for p in culprits]


def _carried(st: Structure, p: int, members: set[int], active: np.ndarray) -> int:
    seen = {p}
    stack = [p]
    while stack:
        q = stack.pop()
        for k in st.con.by_lower[q]:
            u = int(st.con.upper[k])
            if active[k] and u in members and u not in seen:
                seen.add(u)
                stack.append(u)
    return len(seen) - 1


# -- whole layouts and stages ---------------------------------------------------------

def _component_of(con: Contacts, placed: np.ndarray | None, p: int,
                  within: set[int] | None = None) -> list[int]:
    """The parts joined to p by contacts whose ends are both placed (BFS)."""
    seen = {p}
    stack = [p]
    while stack:
        q = stack.pop()
        for k in con.by_upper[q] + con.by_lower[q]:  # both lists
            lo, up = int(con.lower[k]), int(con.upper[k])
            if lo < 0:
                continue
            o = up if lo == q else lo
            if o in seen or (placed is not None and not placed[o]):
                continue
            if within is not None and o not in within:
                continue
            seen.add(o)
            stack.append(o)
    return sorted(seen)


def active_contacts(con: Contacts, placed: np.ndarray | None) -> np.ndarray:
    if placed is None:
        return np.ones(len(con.lower), dtype=bool)
    return (placed[np.maximum(con.lower, 0)] | (con.lower < 0)) & placed[con.upper]


def failures(st: Structure, members: np.ndarray, active: np.ndarray,
             placed: np.ndarray | None = None, explain: bool = True) -> list[Failure]:
    """Failures among ``members`` (a union of structures) with the ``active`` contacts."""
    con = st.con
    members = np.asarray(members, dtype=np.int64)
    if len(members) * 8 > len(st.boxes):
        ups = con.upper[active]
        nsup = np.bincount(ups, minlength=len(st.boxes))
        multi = members[nsup[members] >= 2]
    else:  # a small set: count its own contacts only
        multi = np.array([q for q in members.tolist()
                          if sum(1 for k in con.by_upper[q] if active[k]) >= 2], dtype=np.int64)
    if not len(multi):
        return _side_rescue(st, _forest(st, members, active), placed, explain)
    mset = set(members.tolist())
    in_lp: set[int] = set()
    groups: list[list[int]] = []
    for q in multi.tolist():
        if q in in_lp:
            continue
        grp = _component_of(con, placed, q, mset)
        in_lp.update(grp)
        groups.append(grp)
    rest = np.array([q for q in members.tolist() if q not in in_lp], dtype=np.int64)
    out = _forest(st, rest, active)
    for grp in groups:
        try:
            out.extend(_lp_failures(st, grp, active, placed, explain))
        except StabilityLimit as exc:
            st.undecide(grp, exc)
    return _side_rescue(st, out, placed, explain)


def _side_rescue(st: Structure, out: list[Failure], placed: np.ndarray | None,
                 explain: bool) -> list[Failure]:
    """Failures that side contacts turn into standing: for each failing part with a side
    contact, the structure joined by horizontal and side contacts (placed parts) is solved
    again with side forces (pushing only, frictionless) and friction at its horizontal
    contacts. Side contacts only add forces, so a structure that stands without them
    stands with them; this LP runs only where something failed without them."""
    sides = st.con.sides
    if not out or sides is None or not len(sides):
        return out
    n = len(st.boxes)
    pl = placed if placed is not None else np.ones(n, dtype=bool)
    active = active_contacts(st.con, placed)
    grounded = np.zeros(n, dtype=bool)  # rests on something placed
    grounded[st.con.upper[active]] = True
    ok_side = pl[sides[:, 0]] & pl[sides[:, 1]] & grounded[sides[:, 0]] & grounded[sides[:, 1]]
    sk = np.nonzero(ok_side)[0]
    if not len(sk):
        return out
    touching = set(sides[sk, 0].tolist()) | set(sides[sk, 1].tolist())
    adj: dict[int, list[int]] = {}
    for a, b in sides[sk, :2].tolist():
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    rescued: set[int] = set()
    tried: set[int] = set()
    for f in out:
        if f.part in rescued or f.part in tried or f.part not in touching:
            continue
        seen = {f.part}
        stack = [f.part]
        while stack:  # closure over horizontal and side contacts among placed parts
            q = stack.pop()
            nxt = [o for o in _component_of(st.con, placed, q) if o not in seen]
            nxt += [o for o in adj.get(q, []) if o not in seen]
            for o in nxt:
                if o not in seen:
                    seen.add(o)
                    stack.append(o)
        grp = sorted(seen)
        tried.update(grp)
        gs = set(grp)
        ks = np.array([k for k in sk.tolist() if int(sides[k, 0]) in gs], dtype=np.int64)
        try:
            if len(grp) > MAX_LP_PARTS:
                raise _size_limit(len(grp))
            stands_so = _lp(st, grp, active, st.margin, ks)[0]
        except StabilityLimit as exc:  # whether side faces hold it is not known
            st.undecide(grp, exc)
            stands_so = True  # tolerant: claim no failure in it (it is undecided)
        if stands_so:
            rescued.update(grp)
    return [f for f in out if f.part not in rescued]


@dataclass(frozen=True)
class StageFailure:
    """The first stage of construction at which a structure falls."""

    step: int  # 1-based step of the order
    placed: int  # the part placed at that step
    failure: Failure
    balanced_by: tuple[int, ...]  # parts placed later that make it stand again
    balanced_at: int | None  # the step at which it stands again

    def text(self, ids: tuple[str, ...]) -> str:
        """'after step 3 (arm placed), arm topples off p1: ...; weight, placed at step 4, ...'"""
        s = f"after step {self.step} ({ids[self.placed]} placed), {self.failure.text(ids)}"
        if self.balanced_by:
            names = ", ".join(ids[p] for p in self.balanced_by[:5])
            more = f" and {len(self.balanced_by) - 5} more" if len(self.balanced_by) > 5 else ""
            s += f"; {names}{more}, placed by step {self.balanced_at}, would balance it"
        return s


def final_structures(st: Structure) -> tuple[np.ndarray, np.ndarray]:
    """(label of each part's finished structure, per label: every stage of it trivially
    stands). A structure is trivial when it is a forest and, for every contact, the
    centres of all parts the upper part carries (itself included) lie at least M inside
    the contact rectangle: then the centre of mass of any subset of them does too, so no
    stage, whatever its order, can fall. A column of equal aligned boxes is trivial."""
    from cellspec.solver.graph import components

    con = st.con
    n = len(st.boxes)
    part = con.lower >= 0
    final = components(n, con.lower[part].tolist(), con.upper[part].tolist())
    ncomp = int(final.max()) + 1 if n else 0
    nsup = np.bincount(con.upper, minlength=n) if len(con.upper) else np.zeros(n, np.int64)
    bad = np.bincount(final, weights=(nsup > 1), minlength=ncomp) > 0
    forest = ~bad[final] & (nsup == 1)
    idx = np.nonzero(forest)[0]
    edge = np.full(n, -1, dtype=np.int64)
    first = np.full(n, -1, dtype=np.int64)
    first[con.upper[::-1]] = np.arange(len(con.upper))[::-1]
    edge[idx] = first[idx]
    parent = np.full(n, -1, dtype=np.int64)
    parent[idx] = con.lower[edge[idx]]
    c = st.centre_of(np.arange(n)) if n else np.zeros((0, 3))
    bx0, bx1, by0, by1 = c[:, 0].copy(), c[:, 0].copy(), c[:, 1].copy(), c[:, 1].copy()
    depth = np.zeros(n, dtype=np.int64)
    for _ in range(n + 1):
        new = np.where(parent >= 0, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            break
        depth = new
    for d in range(int(depth.max()) if n else 0, 0, -1):
        lvl = np.nonzero(depth == d)[0]
        par = parent[lvl]
        np.minimum.at(bx0, par, bx0[lvl])
        np.maximum.at(bx1, par, bx1[lvl])
        np.minimum.at(by0, par, by0[lvl])
        np.maximum.at(by1, par, by1[lvl])
    m = st.margin - TOL
    if con.fp is None:
        r = con.rect[edge[idx]] * U
        ok = ((bx0[idx] - r[:, 0] >= m) & (r[:, 1] - bx1[idx] >= m)
              & (by0[idx] - r[:, 2] >= m) & (r[:, 3] - by1[idx] >= m))
    else:  # the centres' box grown by the margin lies in the (convex) contact polygon
        ok = _shapes().rect_inside(con, edge[idx], bx0[idx] - m, bx1[idx] + m,
                                   by0[idx] - m, by1[idx] + m)
    trivial = ~bad
    np.logical_and.at(trivial, final[idx], ok)
    return final, trivial


def stages(st: Structure, order: list[int], finished_bad: set[int],
           final: np.ndarray, trivial: np.ndarray | None = None) -> list[StageFailure]:
    """The first failing stage of each structure of the finished layout (``final`` labels
    them; ``trivial`` ones are skipped). A structure whose only failing stage is its last
    is left to ``stable(p)``; a part placed before what carries it, to ``support_order``."""
    con = st.con
    n = len(st.boxes)
    placed = np.zeros(n, dtype=bool)
    last_step = {}
    for s, p in enumerate(order):
        last_step[int(final[p])] = s
    done: set[int] = set()
    out: list[StageFailure] = []
    pending: dict[int, tuple[int, Failure]] = {}  # final structure -> (step, failure)
    pos = {p: s for s, p in enumerate(order)}

    def early(q: int) -> bool:
        """q is placed before something that carries it: support_order's to report."""
        return any(int(con.lower[k]) >= 0 and pos.get(int(con.lower[k]), -1) > pos[q]
                   for k in con.by_upper[q])
    for s, p in enumerate(order):
        placed[p] = True
        st.step = s + 1
        fc = int(final[p])
        if fc in done or (trivial is not None and trivial[fc]):
            continue
        members = _component_of(con, placed, p)
        touched = [k for q in members for k in con.by_upper[q]]
        active = np.zeros(len(con.lower), dtype=bool)
        if touched:
            t = np.array(touched, dtype=np.int64)
            lo = con.lower[t]
            active[t] = (lo < 0) | placed[np.maximum(lo, 0)]
        if fc in pending:
            step0, fail0 = pending[fc]
            if fail0.part not in members:
                continue
            if not failures(st, np.array(members), active, placed, explain=False):
                mem0 = set(members)
                later = tuple(q for q in order[step0 + 1: s + 1] if q in mem0)
                out.append(StageFailure(step0 + 1, order[step0], fail0, later, s + 1))
                del pending[fc]
                done.add(fc)
            continue
        fs = [f for f in failures(st, np.array(members), active, placed)
              if f.support and not early(f.part)]
        if not fs:
            continue
        if s == last_step[fc] and fc in finished_bad:
            done.add(fc)  # the finished check reports it
            continue
        pending[fc] = (s, fs[0])
    st.step = None
    for _fc, (step0, fail0) in sorted(pending.items()):
        out.append(StageFailure(step0 + 1, order[step0], fail0, (), None))
    return sorted(out, key=lambda f: f.step)


@dataclass
class Report:
    """Stability of one instance: failures of the finished layout and of its stages."""

    stable: np.ndarray  # bool per part: stable(p)
    placed_stable: np.ndarray | None  # bool per part: placed_stable(p), None without order
    why: dict[int, str]
    stage_why: dict[int, str]
    undecided: tuple[UndecidedStructure, ...] = ()  # tolerant reports: structures a limit left open


def structure_of(inst: Instance, sides: bool = True) -> Structure:
    """The stability view of an instance: contacts, masses, friction, margin; without
    ``sides`` no side contacts (for proofs that must not rely on them)."""
    masses = inst.masses if inst.masses is not None else np.prod(inst.size_m, axis=1) * 1000.0
    mu = float(inst.friction if inst.friction is not None else DEFAULT_FRICTION)
    margin = inst.stability_margin if inst.stability_margin is not None else DEFAULT_MARGIN
    # footprints other than the boxes' rectangles (yawed boxes, cylinders) are polygons built
    # with shapely (solver layer), which the core kernel cannot import: the kernel says when
    fp = None if inst.kernel().boxes_are_parts else _shapes().footprints(inst)
    # the relations' broad-phase pairs (a margin >= eps), when the ASP backend found them
    con = contacts(inst.boxes, inst.eps, inst.surfaces, fp, inst.derived.near_pairs)
    if not sides:
        con.sides = np.zeros((0, 8), dtype=np.int64)
    return Structure(inst.ids, inst.boxes, np.asarray(masses, dtype=np.float64), mu,
                     float(margin), con)


def report(inst: Instance, stages_too: bool = True, sides: bool = True) -> Report:
    """Stability of the finished layout and, when it has an order, of every stage (without
    ``sides``: as if no side face carried anything, uncached)."""
    tolerant = inst.derived.stability_tolerant and sides
    cached = inst.derived.stability_report if sides else None
    if cached is not None and (cached.placed_stable is not None or not stages_too
                               or inst.order_pos is None):
        if cached.undecided and not tolerant:  # a caller that needs every structure decided
            u = cached.undecided[0]
            raise StabilityLimit(u.reason, u.code)
        return cached
    st = structure_of(inst, sides)
    if tolerant:
        st.undecided = []
    n = inst.n
    ok = np.ones(n, dtype=bool)
    why: dict[int, str] = {}
    if n:
        fs = failures(st, np.arange(n), active_contacts(st.con, None))
        for f in fs:
            ok[f.part] = False
            why[f.part] = f.text(inst.ids)
    placed_ok = None
    stage_why: dict[int, str] = {}
    if stages_too and inst.order_pos is not None and n:
        order = np.argsort(inst.order_pos, kind="stable").tolist()
        final, trivial = final_structures(st)
        bad = {int(final[p]) for p in np.nonzero(~ok)[0].tolist()}
        placed_ok = np.ones(n, dtype=bool)
        for sf in stages(st, order, bad, final, trivial):
            placed_ok[sf.placed] = False
            stage_why[sf.placed] = sf.text(inst.ids)
    rep = Report(ok, placed_ok, why, stage_why, _distinct(st.undecided or []))
    if sides:
        inst.derived.stability_report = rep
    return rep


def _distinct(us: list[UndecidedStructure]) -> tuple[UndecidedStructure, ...]:
    """One record per undecided structure (its first), the finished layout's first."""
    out: dict[tuple[int, ...], UndecidedStructure] = {}
    for u in sorted(us, key=lambda u: (u.step is not None, u.step or 0)):
        out.setdefault(u.parts, u)
    return tuple(out.values())


def instance_stable(inst: Instance) -> np.ndarray:
    """``stable(p)`` of every part of an :class:`~cellspec.solver.instance.Instance`."""
    return report(inst, stages_too=False).stable


def instance_placed_stable(inst: Instance) -> np.ndarray:
    """``placed_stable(p)`` of every part (all true when the layout has no order)."""
    rep = report(inst)
    return rep.placed_stable if rep.placed_stable is not None else np.ones(inst.n, dtype=bool)


def stands(st: Structure, placed: np.ndarray, p: int) -> Failure | None:
    """For sequencing: with ``placed`` parts down (p among them), the structure p is in
    stands (None) or the first failure (a part that topples off what carries it)."""
    members = _component_of(st.con, placed, p)
    fs = [f for f in failures(st, np.array(members), active_contacts(st.con, placed), placed)
          if f.support]
    return fs[0] if fs else None
