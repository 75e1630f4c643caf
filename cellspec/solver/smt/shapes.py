"""Yawed boxes as linear constraints over the parts' displacements (docs/shapes.md).

**Why it is linear.** Part k's footprint is ``c_k + R_k [-hx_k, hx_k] x [-hy_k, hy_k]``
with a fixed rational rotation ``R_k`` (cos = C_k/N_k, sin = S_k/N_k, the kernel's exact
rotation) and a centre ``c_k = c0_k + 2 (dx_k, dy_k)`` (U; ``dx_k, dy_k`` integer grid
steps, or constants). Every relation of two rectangles A, B is a statement about the
convex polygon B - A and a shift set E (the square [-e, e]^2, or a segment for
``flanks``), and by the separating-axis theorem it is a conjunction over finitely many
directions n, namely the edge normals of the polygons involved, all fixed by the yaws:

- ``meets`` (contact, near): B - A meets E  <=>  for every n in normals(A, B, E):
  ``|n . (c_B - c_A)| <= h_A(n) + h_B(n) + h_E(n)``;
- ``covers`` (overlaps, footprint overlap, intersects, flanks): E lies in the interior of
  B - A  <=>  for every n in normals(A, B): ``|n . (c_B - c_A)| + h_E(n) < h_A(n) + h_B(n)``;

where ``h_X(n) = hx_X |n . u_X| + hy_X |n . v_X|`` is X's support half width, a rational
*constant* (the yaw and the size do not change under a displacement). A displacement moves
a footprint rigidly, so ``n . (c_B - c_A)`` is an affine function of the four integer
variables with rational coefficients, ``|t| <= K`` is ``t <= K and -t <= K``, and
multiplying by the common denominator gives integer linear atoms: the encoding is exact
(the same rationals the kernel re-decides with), in QF_LIA. Zones are the same with a
fixed axis-aligned rectangle (``inside``: ``c +- h_X(axis)`` within the zone grown by e)
or a half-plane (``K(c) >= h_X(a, b)``, K affine). The z interval never moves.

**Cylinders.** A disc's support is its radius in every direction, so ``inside`` a box
zone (exact: ``c +- r``) and a half-space (``K >= r |(a, b)|``, whose square root is a
constant: ``K >= ceil(r |(a, b)|)`` for integer K) stay linear; every other relation of a
disc is a distance (the rounded corners of B - A) and is not. At fixed positions (``check
--backend z3``, ``explain``) those atoms are constants decided by the exact kernel; under
a displacement they are decided when the enclosing boxes already rule them out, and
otherwise refused by name (:class:`NotLinear`), never approximated silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import relations
from cellspec.core import shapes as ks
from cellspec.core.status import Reason, SolverLimit
from cellspec.solver.instance import BoxU
from cellspec.solver.smt.formula import Builder, const, lin

Affine = tuple[Fraction, dict]  # const + sum(coef * var)


class NotLinear(SolverLimit):
    """A relation of a cylinder that may move: not linear in the displacement."""

    reason = Reason.UNSUPPORTED


@dataclass(frozen=True)
class LinShapes:
    """Per part: centre (affine in the displacement, U), rotation, half extents, and the
    kernel's shapes (to decide a disc relation at fixed positions)."""

    cx: list[Affine]
    cy: list[Affine]
    c: list[Fraction]
    s: list[Fraction]
    hx: list[int]
    hy: list[int]
    cyl: list[bool]
    plain: list[bool]
    sh: ks.ShapesU
    ids: tuple[str, ...]


def lin_shapes(sh: ks.ShapesU, ids: tuple[str, ...], moving: bool) -> LinShapes:
    """The shapes of an instance, each centre moved by 2 (dx_k, dy_k) U when ``moving``."""
    n = len(sh)
    cx = [(Fraction(int(sh.cx[k])), {("dx", k): 2} if moving else {}) for k in range(n)]
    cy = [(Fraction(int(sh.cy[k])), {("dy", k): 2} if moving else {}) for k in range(n)]
    c = [Fraction(int(sh.rc[k]), int(sh.rn[k])) for k in range(n)]
    s = [Fraction(int(sh.rs[k]), int(sh.rn[k])) for k in range(n)]
    return LinShapes(cx, cy, c, s, [int(v) for v in sh.hx], [int(v) for v in sh.hy],
                     [bool(v) for v in sh.cyl], [bool(v) for v in sh.plain], sh, ids)


@dataclass(frozen=True)
class Rect:
    """A footprint for the encoding: centre (affine), axis (c, s), half extents."""

    cx: Affine
    cy: Affine
    c: Fraction
    s: Fraction
    hx: Fraction
    hy: Fraction

    def support(self, nx: Fraction, ny: Fraction) -> Fraction:
        """Half the width along the (unnormalised) direction (nx, ny)."""
        return self.hx * abs(nx * self.c + ny * self.s) + self.hy * abs(ny * self.c - nx * self.s)

    def normals(self) -> list[tuple[Fraction, Fraction]]:
        """The two edge normals."""
        return [(self.c, self.s), (-self.s, self.c)]


ONE, ZERO = Fraction(1), Fraction(0)


def square(e: int) -> Rect:
    """The shift set [-e, e]^2 (centred at the origin)."""
    return Rect((ZERO, {}), (ZERO, {}), ONE, ZERO, Fraction(e), Fraction(e))


def rect(L: LinShapes, k: int) -> Rect:
    """Part k's footprint as a rectangle (the caller has ruled out a disc)."""
    return Rect(L.cx[k], L.cy[k], L.c[k], L.s[k], Fraction(L.hx[k]), Fraction(L.hy[k]))


def _sub(a: Affine, b: Affine) -> Affine:
    t = dict(a[1])
    for v, k in b[1].items():
        t[v] = t.get(v, 0) - k
    return (a[0] - b[0], t)


def _dot(nx: Fraction, ny: Fraction, dx: Affine, dy: Affine) -> Affine:
    t: dict = {}
    for v, k in dx[1].items():
        t[v] = t.get(v, 0) + nx * k
    for v, k in dy[1].items():
        t[v] = t.get(v, 0) + ny * k
    return (nx * dx[0] + ny * dy[0], t)


def le0(b: Builder, e: Affine, strict: bool = False) -> Any:
    """``e <= 0`` (``< 0`` when strict), scaled to integers (exact) and folded."""
    const, terms = e
    den = math.lcm(const.denominator, *(Fraction(k).denominator for k in terms.values()))
    ic = int(const * den)
    it = [(v, int(k * den)) for v, k in terms.items()]
    return b.le0(lin(ic + (1 if strict else 0), *it))


def _abs_le(b: Builder, t: Affine, bound: Fraction, strict: bool) -> Any:
    """``|t| <= bound`` (``<`` when strict)."""
    neg = (-t[0], {v: -k for v, k in t[1].items()})
    return b.and_((le0(b, (t[0] - bound, t[1]), strict), le0(b, (neg[0] - bound, neg[1]), strict)))


def _dirs(*rects: Rect) -> list[tuple[Fraction, Fraction]]:
    """The distinct edge normals of the rectangles (up to sign)."""
    seen: dict = {}
    for r in rects:
        for nx, ny in r.normals():
            key = (ONE, ny / nx) if nx else (ZERO, ONE)
            seen.setdefault(key, (nx, ny))
    return list(seen.values())


def meets(b: Builder, A: Rect, B: Rect, E: Rect) -> Any:
    """B - A meets E: every normal of A, B, E keeps |n . d| <= h_A + h_B + h_E."""
    dx, dy = _sub(B.cx, A.cx), _sub(B.cy, A.cy)
    return b.and_(_abs_le(b, _dot(nx, ny, dx, dy), A.support(nx, ny) + B.support(nx, ny)
                          + E.support(nx, ny), False) for nx, ny in _dirs(A, B, E))


def covers(b: Builder, A: Rect, B: Rect, E: Rect) -> Any:
    """E in the interior of B - A: every normal of A, B keeps |n . d| + h_E < h_A + h_B."""
    dx, dy = _sub(B.cx, A.cx), _sub(B.cy, A.cy)
    return b.and_(_abs_le(b, _dot(nx, ny, dx, dy), A.support(nx, ny) + B.support(nx, ny)
                          - E.support(nx, ny), True) for nx, ny in _dirs(A, B))


def _fixed(*aff: Affine) -> bool:
    return not any(a[1] for a in aff)


def _kernel_or_refuse(L: LinShapes, rows: tuple[int, ...], what: str, decide: Any) -> bool:
    """A disc relation: decided by the kernel at fixed positions, else :class:`NotLinear`."""
    if all(_fixed(L.cx[k], L.cy[k]) for k in rows):
        return bool(decide())
    cyl = [L.ids[k] for k in rows if L.cyl[k]]
    raise NotLinear(f"{what} of cylinder part(s) {', '.join(cyl)} under a displacement is a "
                    "distance to a disc, not linear in the displacement")


def pair(b: Builder, L: LinShapes, name: str, i: int, j: int, box: Any, e: int) -> Any:
    """contact / near (e: the distance) / overlaps / supports / above of a pair with a
    non-plain part: the enclosing-box formula ``box`` (z and the implied x/y part) and the
    exact footprint relation."""
    if box is False:
        return False
    r = relations.get(name)
    if r.footprint is None:  # the enclosing boxes decide it exactly
        return box
    if L.cyl[i] or L.cyl[j]:
        fn = r.shape
        assert fn is not None, name
        ii, jj = np.array([i]), np.array([j])
        return b.and_((box, _kernel_or_refuse(L, (i, j), name,
                                              lambda: fn(L.sh, ii, jj, e)[0])))
    rel = FOOTPRINT[r.footprint]
    return b.and_((box, rel(b, rect(L, i), rect(L, j), square(e))))


def flanks(b: Builder, L: LinShapes, q: int, p: int, axis: str, zo: Any, opening: int | None,
           eps: int, depth: int | None) -> Any:
    """q blocks a parallel grip of p along p's own ``axis`` (the kernel's definition): the
    z band ``zo`` and q's footprint covering the fingers' sweep R for every shift of at most
    eps along p's other axis (R and the shift segment are fixed rectangles in p's frame)."""
    if zo is False:
        return False
    if L.cyl[q]:
        qq, pp = np.array([q]), np.array([p])
        return b.and_((zo, _kernel_or_refuse(L, (q, p), "flanks", lambda: ks.flanks(
            L.sh, qq, pp, axis, opening, depth, eps)[0])))
    P = rect(L, p)
    along = (Fraction(opening, 2) if opening is not None
             else (P.hx if axis == "x" else P.hy) + eps)
    hx, hy = (along, P.hy) if axis == "x" else (P.hx, along)
    R = Rect(P.cx, P.cy, P.c, P.s, hx, hy)
    fe = Fraction(eps)
    T = Rect((ZERO, {}), (ZERO, {}), P.c, P.s, ZERO if axis == "x" else fe,
             fe if axis == "x" else ZERO)
    return b.and_((zo, covers(b, rect(L, q), R, T)))


def _zone_rect(lo: tuple[int, int, int], hi: tuple[int, int, int]) -> Rect:
    return Rect((Fraction(lo[0] + hi[0], 2), {}), (Fraction(lo[1] + hi[1], 2), {}), ONE, ZERO,
                Fraction(hi[0] - lo[0], 2), Fraction(hi[1] - lo[1], 2))


def _support(L: LinShapes, k: int, nx: Fraction, ny: Fraction) -> Fraction:
    if L.cyl[k]:
        return Fraction(L.hx[k])  # hx is the radius (a unit direction only)
    return rect(L, k).support(nx, ny)


def inside_box(b: Builder, L: LinShapes, k: int, lo: tuple[int, int, int],
               hi: tuple[int, int, int], eps: int, zok: Any) -> Any:
    """Every point of part k within [lo, hi] grown by eps (linear for a disc too)."""
    ex, ey = _support(L, k, ONE, ZERO), _support(L, k, ZERO, ONE)
    cx, cy = L.cx[k], L.cy[k]
    out = [zok]
    for (c0, t), h, lo_, hi_ in ((cx, ex, lo[0], hi[0]), (cy, ey, lo[1], hi[1])):
        out.append(le0(b, (lo_ - eps - c0 + h, {v: -x for v, x in t.items()})))  # c-h >= lo-e
        out.append(le0(b, (c0 + h - hi_ - eps, dict(t))))  # c+h <= hi+e
    return b.and_(out)


def intersects_box(b: Builder, L: LinShapes, k: int, lo: tuple[int, int, int],
                   hi: tuple[int, int, int], eps: int, box: Any) -> Any:
    """Part k enters [lo, hi] by more than eps (the enclosing-box test ``box`` and the
    exact footprint covering)."""
    if box is False:
        return False
    if L.cyl[k]:
        kk = np.array([k])
        return b.and_((box, _kernel_or_refuse(L, (k,), "intersects", lambda: ks.intersects_box(
            L.sh, kk, lo, hi, eps)[0])))
    return b.and_((box, covers(b, rect(L, k), _zone_rect(lo, hi), square(eps))))


def _ceil_sqrt(q: int) -> int:
    r = math.isqrt(q)
    return r if r * r == q else r + 1


def half(b: Builder, L: LinShapes, k: int, coef: tuple[int, int, int], op: str, rhs: int,
         eps: int, cz: int, hz: int, inside: bool, box: Any) -> Any:
    """inside / intersects of part k and the half-space ``coef . x op rhs`` (the kernel's
    margins: K >= h_X(a, b) inside, K + h_X(a, b) > 0 intersects; a disc's h is
    r |(a, b)|, compared through its integer ceiling)."""
    if not inside and box is False:
        return False
    a, bb, c3 = coef
    cx, cy = L.cx[k], L.cy[k]
    t: dict = {}
    for v, x in cx[1].items():
        t[v] = t.get(v, 0) + a * x
    for v, x in cy[1].items():
        t[v] = t.get(v, 0) + bb * x
    lin0 = a * cx[0] + bb * cy[0] + c3 * cz
    zs = abs(c3) * hz
    slack = eps * (abs(a) + abs(bb) + abs(c3))
    sign = 1 if op in (">", ">=") else -1  # K = sign * (lin - rhs) + slack -+ zs
    K0 = sign * (lin0 - rhs) + (slack - zs if inside else zs - slack)
    Kt = {v: sign * x for v, x in t.items()}
    if L.cyl[k]:
        r = _ceil_sqrt(L.hx[k] ** 2 * (a * a + bb * bb))
        if inside:  # K >= ceil(r |n|)
            return le0(b, (Fraction(r) - K0, {v: -x for v, x in Kt.items()}))
        return b.and_((box, le0(b, (-K0 - r + 1, {v: -x for v, x in Kt.items()}))))
    h = rect(L, k).support(Fraction(a), Fraction(bb))
    if inside:  # K - h >= 0
        return le0(b, (h - K0, {v: -x for v, x in Kt.items()}))
    return b.and_((box, le0(b, (-K0 - h, {v: -x for v, x in Kt.items()}), strict=True)))


class ShapeZone:
    """Part k (not a plain box) and a zone as a zone relation's ``z3`` encoding reads them
    (cellspec/core/relations.py), the view smt/ground.BoxZoneView gives of a box: the exact
    footprint formulas (``box``: that BoxZoneView of k's enclosing box, whose z never moves)."""

    def __init__(self, b: Builder, L: LinShapes, k: int, z: Any, corners: list, box: Any):
        self.b, self.L, self.k, self.z, self.corners, self.box = b, L, k, z, corners, box

    def within(self, d: int) -> Any:
        """Every point of the part lies in the zone grown by d (linear for a disc too)."""
        b, z, c = self.b, self.z, self.corners
        if isinstance(z, BoxU):
            zok = b.and_((b.ge(c[4], const(z.lo[2]), -d), b.ge(const(z.hi[2]), c[5], -d)))
            return inside_box(b, self.L, self.k, z.lo, z.hi, d, zok)
        return self._half(d, True, None)

    def enters(self, d: int) -> Any:
        """The part enters the zone by more than d: the enclosing box's formula and the
        exact footprint's (a disc's: the kernel at fixed positions)."""
        z = self.z
        if isinstance(z, BoxU):
            return intersects_box(self.b, self.L, self.k, z.lo, z.hi, d, self.box.enters(d))
        return self._half(d, False, self.box.enters(d))

    def _half(self, d: int, inside: bool, box: Any) -> Any:
        z, c = self.z, self.corners
        z0, z1 = c[4][0], c[5][0]
        return half(self.b, self.L, self.k, z.coef, z.op, z.rhs, d, (z0 + z1) // 2,
                    (z1 - z0) // 2, inside, box)

    def all(self, fs: Any) -> Any:
        """The conjunction."""
        return self.b.and_(fs)

    def not_(self, f: Any) -> Any:
        """The negation."""
        return self.b.not_(f)


# a relation's footprint test (cellspec/core/relations.py ``footprint``)
FOOTPRINT: dict[str, Callable[[Builder, Rect, Rect, Rect], Any]] = {
    "meets": meets, "covers": covers}


class BoxEncoding:
    """Every part a plain box: each relation is the grounder's box formula."""

    def pair(self, gr: Any, name: str, i: int, j: int, extra: Any) -> Any:
        """A pair relation (``gr``: the grounder, smt/ground.py)."""
        return gr.box_rel(name, i, j, extra)

    def flanks(self, gr: Any, q: int, p: int, axis: str, lat: Any, zo: Any) -> Any:
        """flanks(q, p, axis) given its lateral overlap and z band."""
        return gr.box_flanks(q, p, axis, lat, zo)

    def zone(self, gr: Any, name: str, k: int, z: Any) -> Any:
        """A zone relation of part k and zone z."""
        return gr.box_zone_rel(name, k, z)


class ShapeEncoding(BoxEncoding):
    """Yawed boxes and cylinders: a pair or part that is not plain adds its exact footprint
    formula. The per-pair test of ``plain`` is inherent: one layout mixes plain pairs
    (box arithmetic) and shaped ones (footprint formulas), and Z3 needs each's own."""

    def __init__(self, L: LinShapes):
        self.L = L

    def pair(self, gr: Any, name: str, i: int, j: int, extra: Any) -> Any:
        """A pair relation on the shapes (the box formula for two plain boxes)."""
        L = self.L
        if L.plain[i] and L.plain[j]:  # per pair: see the class docstring
            return gr.box_rel(name, i, j, extra)
        r = relations.get(name)
        if r.param == "axis":
            return gr.flanks(i, j, extra)
        return pair(gr.b, L, name, i, j, gr.box_rel(name, i, j, extra),
                    extra if r.param == "length" else gr.p.eps)

    def flanks(self, gr: Any, q: int, p: int, axis: str, lat: Any, zo: Any) -> Any:
        """flanks refined by the footprint formula for a pair with a shaped part."""
        L = self.L
        if L.plain[q] and L.plain[p]:  # per pair: see the class docstring
            return gr.box_flanks(q, p, axis, lat, zo)
        p_ = gr.p
        return flanks(gr.b, L, q, p, axis, zo, p_.opening, p_.eps, p_.depth)

    def zone(self, gr: Any, name: str, k: int, z: Any) -> Any:
        """A shaped part adds its exact-footprint formula."""
        if self.L.plain[k]:  # per part: see the class docstring
            return gr.box_zone_rel(name, k, z)
        enc = gr.encoding(relations.get(name))  # the relation's z3, on the shape
        return enc(ShapeZone(gr.b, self.L, k, z, gr.p.corners[k], gr.box_zone(k, z)),
                   gr.p.eps)


def encoding(L: LinShapes | None) -> BoxEncoding:
    """The encoding of a problem's parts, chosen once: boxes when it has no shapes (lint's
    and diff's problems), else per pair on the shapes."""
    return BoxEncoding() if L is None else ShapeEncoding(L)
