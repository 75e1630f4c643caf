"""Exact shapes: yawed boxes and vertical cylinders (docs/shapes.md, issue 22).

A part is a footprint in the plane (a rotated rectangle or a disc) times its z interval,
all in units U = 0.05 mm. A yaw is held as an exact rational rotation: reduced modulo 90°
to [-45°, 45°] (a quarter turn swaps the half extents, so a yaw of 90° is exactly the box
with swapped sizes), then t = tan(yaw / 2) rounded to a multiple of 1 / :data:`T_DEN`,
cos = (1 - t^2) / (1 + t^2), sin = 2t / (1 + t^2): the axis (C, S) / N with integers
C^2 + S^2 = N^2, so every corner is rational. The part's own x axis is (cos, sin).

Relations take index arrays (i, j) into a :class:`ShapesU`. A pair of two plain parts
(axis-aligned boxes) is decided by cellspec/core/geometry.py on the boxes, unchanged;
every other pair is first filtered by its enclosing boxes (the relation is implied by the
enclosing-box version, except ``flanks`` and ``inside``), then decided in float64
(cellspec/core/plane.py) and re-decided in exact Fractions within :data:`plane.TOL`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core import geometry as g
from cellspec.core import plane
from cellspec.core.plane import Geo

T_DEN = 1 << 20  # tan(yaw/2) to 2^-20: the angle is off by at most 2^-20 rad < 1e-6 rad
# a normalised margin (plane.py: divided by more than a part's half diagonal) this close to
# its threshold may be decided by the rational rotation of a yaw (it moves a corner by less
# than 1e-6 of the half diagonal): such decisions are logged in ShapesU.ties
YAW_BAND = 4e-6


def axis_aligned(yaw_deg: np.ndarray) -> np.ndarray:
    """Which yaws are multiples of 90° (a box at such a yaw is plain)."""
    y = np.asarray(yaw_deg, dtype=np.float64)
    return np.mod(y, 90.0) == 0.0


def quarter_turns(yaw_deg: np.ndarray) -> np.ndarray:
    """Each yaw's nearest multiple of 90° in quarter turns (odd: the half extents swap)."""
    return np.rint(np.asarray(yaw_deg, dtype=np.float64) / 90.0).astype(np.int64)


def rational_rotation(yaw_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(C, S, N) int64 per yaw after the quarter-turn reduction: cos = C/N, sin = S/N."""
    y = np.asarray(yaw_deg, dtype=np.float64)
    r = y - 90.0 * quarter_turns(y)  # in [-45, 45]
    a = np.rint(np.tan(np.radians(r) / 2) * T_DEN).astype(np.int64)
    d2 = T_DEN * T_DEN
    return d2 - a * a, 2 * a * T_DEN, d2 + a * a


@dataclass(frozen=True)
class ShapesU:
    """Per part: centre (cx, cy, cz) and own-frame half extents (hx, hy, hz) in U (a
    cylinder: hx = hy = radius), the rotation cos = rc/rn, sin = rs/rn (cosf, sinf in
    float), ``cyl``, ``plain`` (an axis-aligned box) and ``box``, the enclosing boxes
    (n, 6) (exact for plain parts, rounded outward to whole U for the others).

    ``exact`` False: a float-only copy (centres and rotation as floats, no re-decision),
    for the rounding analysis of the exact positions and yaws as given."""

    cx: np.ndarray
    cy: np.ndarray
    cz: np.ndarray
    hx: np.ndarray
    hy: np.ndarray
    hz: np.ndarray
    rc: np.ndarray
    rs: np.ndarray
    rn: np.ndarray
    cosf: np.ndarray
    sinf: np.ndarray
    cyl: np.ndarray
    plain: np.ndarray
    box: np.ndarray
    idx: np.ndarray  # each row's part in the layout (take() permutes it)
    exact: bool = True
    # (relation, i, j) decided within YAW_BAND of the threshold on a part with a rounded
    # yaw (j = -1 for one-part relations); shared by take() copies; read by verify's
    # rounding analysis
    ties: list = field(default_factory=list, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.cx)

    def take(self, idx: np.ndarray) -> ShapesU:
        """The parts ``idx`` in that order (a placement permutation, a subset)."""
        idx = np.asarray(idx)
        kw = {f: getattr(self, f)[idx] for f in _ARRAYS}
        return replace(self, **kw)

    __getitem__ = take

    def geo(self, idx: np.ndarray, exact: bool = False) -> Geo:
        """The footprints of parts ``idx`` as float64 arrays, or (``exact``) Fractions."""
        if not exact:
            f = np.float64
            return Geo(self.cx[idx].astype(f), self.cy[idx].astype(f), self.cosf[idx],
                       self.sinf[idx], self.hx[idx].astype(f), self.hy[idx].astype(f),
                       self.cyl[idx])
        return Geo(_fr(self.cx[idx]), _fr(self.cy[idx]),
                   _obj([Fraction(int(c), int(n)) for c, n in zip(self.rc[idx], self.rn[idx],
                                                                  strict=True)]),
                   _obj([Fraction(int(s), int(n)) for s, n in zip(self.rs[idx], self.rn[idx],
                                                                  strict=True)]),
                   _fr(self.hx[idx]), _fr(self.hy[idx]), self.cyl[idx])

    def extent_xy(self) -> tuple[np.ndarray, np.ndarray]:
        """Half the world-axis extent on x and on y (float64, exact up to rounding)."""
        c, s = np.abs(self.cosf), np.abs(self.sinf)
        ex = np.where(self.cyl, self.hx, self.hx * c + self.hy * s)
        ey = np.where(self.cyl, self.hy, self.hx * s + self.hy * c)
        return ex.astype(np.float64), ey.astype(np.float64)


_ARRAYS = ("cx", "cy", "cz", "hx", "hy", "hz", "rc", "rs", "rn", "cosf", "sinf", "cyl", "plain",
           "box", "idx")


def _obj(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _fr(a: Any) -> np.ndarray:
    """An array of numbers as an object array of Fractions."""
    return _obj([Fraction(v) for v in np.asarray(a).tolist()])


def shapes_u(aligned: np.ndarray, yaw_deg: np.ndarray, cyl: np.ndarray) -> ShapesU:
    """The exact shapes from each part's box as the kernel sees it (``aligned``: (n, 6) in U,
    as geometry.quantise gives it: centre and own size on the grid, x and y sizes already
    swapped for a box at an odd multiple of 90°, as instance.shape_rows does), its yaw in
    degrees and whether it is a cylinder (its box's x and y sizes are the diameter)."""
    aligned = np.asarray(aligned, dtype=np.int64)
    yaw = np.where(cyl, 0.0, np.asarray(yaw_deg, dtype=np.float64))
    cx = (aligned[:, 0] + aligned[:, 1]) // 2
    cy = (aligned[:, 2] + aligned[:, 3]) // 2
    cz = (aligned[:, 4] + aligned[:, 5]) // 2
    hx0 = (aligned[:, 1] - aligned[:, 0]) // 2
    hy0 = (aligned[:, 3] - aligned[:, 2]) // 2
    hz = (aligned[:, 5] - aligned[:, 4]) // 2
    odd = ((quarter_turns(yaw) % 2) == 1) & ~axis_aligned(yaw)  # plain: swapped already
    hx, hy = np.where(odd, hy0, hx0), np.where(odd, hx0, hy0)
    rc, rs, rn = rational_rotation(yaw)
    plain = ~np.asarray(cyl, dtype=bool) & axis_aligned(yaw)
    box = enclosing(cx, cy, hx, hy, rc, rs, rn, np.asarray(cyl, dtype=bool))
    box[:, 4], box[:, 5] = aligned[:, 4], aligned[:, 5]
    return ShapesU(cx, cy, cz, hx, hy, hz, rc, rs, rn, rc / rn, rs / rn,
                   np.asarray(cyl, dtype=bool), plain, box, np.arange(len(cx)))


def shapes_float(pos_u: np.ndarray, half_u: np.ndarray, yaw_deg: np.ndarray,
                 cyl: np.ndarray, box: np.ndarray) -> ShapesU:
    """Float-only shapes at the exact positions and yaws as given (``pos_u``, ``half_u``:
    (n, 3) in U, unrotated half sizes): the rounding analysis compares the grid with them."""
    cyl = np.asarray(cyl, dtype=bool)
    yaw = np.where(cyl, 0.0, np.asarray(yaw_deg, dtype=np.float64))
    th = np.radians(yaw)
    ones = np.ones(len(yaw), dtype=np.int64)
    return ShapesU(pos_u[:, 0], pos_u[:, 1], pos_u[:, 2], half_u[:, 0], half_u[:, 1],
                   half_u[:, 2], ones, 0 * ones, ones, np.where(cyl, 1.0, np.cos(th)),
                   np.where(cyl, 0.0, np.sin(th)), cyl, ~cyl & axis_aligned(yaw), box,
                   np.arange(len(yaw)), exact=False)


def enclosing(cx: np.ndarray, cy: np.ndarray, hx: np.ndarray, hy: np.ndarray,
              rc: np.ndarray, rs: np.ndarray, rn: np.ndarray, cyl: np.ndarray) -> np.ndarray:
    """Each footprint's enclosing box on the grid, rounded outward to whole U (z columns
    left 0 for the caller): ceil((|C| hx + |S| hy) / N) in exact integers."""
    n = len(cx)
    # int64 is exact here: half sizes < 2^21 U (100 m), |C|, |S| <= N < 2^41
    ac, as_ = np.abs(rc), np.abs(rs)
    ex = -((-(ac * hx + as_ * hy)) // rn)
    ey = -((-(as_ * hx + ac * hy)) // rn)
    ex = np.where(cyl, hx, ex)
    ey = np.where(cyl, hy, ey)
    out = np.zeros((n, 6), dtype=np.int64)
    out[:, 0], out[:, 1] = cx - ex, cx + ex
    out[:, 2], out[:, 3] = cy - ey, cy + ey
    return out


# --- deciding: float, then exact near the threshold ----------------------------------------

def _decide(sh: ShapesU, margin: Any, strict: bool, log: tuple | None = None) -> np.ndarray:
    """Evaluate ``margin(exact, rows)`` (the margins of ``rows``, all rows when None) in
    float64 and re-decide the rows within TOL exactly. ``log`` = (relation, i, j): rows
    within YAW_BAND on a part with a rounded yaw go to ``sh.ties``."""
    v = margin(False, None)
    out = (v > 0) if strict else (v >= 0)
    if sh.exact:
        unsure = np.nonzero(np.abs(v) <= plane.TOL)[0]
        if len(unsure):
            ve = margin(True, unsure)
            out[unsure] = np.array([(x > 0) if strict else (x >= 0) for x in ve], dtype=bool)
        if log is not None:
            rel, i, j = log
            turned = sh.rs[i] != 0 if j is None else (sh.rs[i] != 0) | (sh.rs[j] != 0)
            for k in np.nonzero((np.abs(v) <= YAW_BAND) & turned)[0][:100].tolist():
                sh.ties.append((rel, int(sh.idx[i[k]]), -1 if j is None else int(sh.idx[j[k]])))
    return out


def _square(n: int, e: Any, exact: bool) -> Geo:
    """The shift set [-e, e]^2 (world axes), n rows."""
    one = np.ones(n, dtype=np.int64)
    if exact:
        E = _fr(e * one)
        return Geo(E * 0, E * 0, E * 0 + 1, E * 0, E, E, np.zeros(n, dtype=bool))
    f = np.float64(e) * one
    return Geo(0 * f, 0 * f, 0 * f + 1, 0 * f, f, f, np.zeros(n, dtype=bool))


def _plane_rel(sh: ShapesU, i: np.ndarray, j: np.ndarray, e: int, closed: bool,
               rel: str) -> np.ndarray:
    """meets (closed) or covers (strict) of the footprints of i and j with the square e."""
    fn = plane.meets if closed else plane.covers

    def margin(exact: bool, rows: np.ndarray | None) -> Any:
        ii, jj = (i, j) if rows is None else (i[rows], j[rows])
        return fn(sh.geo(ii, exact), sh.geo(jj, exact), _square(len(ii), e, exact))

    return _decide(sh, margin, strict=not closed, log=(rel, i, j))


def _refine(sh: ShapesU, i: np.ndarray, j: np.ndarray, base: np.ndarray, e: int,
            closed: bool, rel: str) -> np.ndarray:
    """``base`` (the enclosing-box verdict, implied by the exact one) refined on the pairs
    that involve a non-plain part."""
    out = base.copy()
    k = np.nonzero(base & ~(sh.plain[i] & sh.plain[j]))[0]
    if len(k):
        out[k] = _plane_rel(sh, i[k], j[k], e, closed, rel)
    return out


def contact(sh: ShapesU, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
    """z within eps, and some shift of at most eps on x and on y makes the footprints touch."""
    return _refine(sh, i, j, g.contact(sh.box[i], sh.box[j], eps), eps, True, "contact")


def near(sh: ShapesU, i: np.ndarray, j: np.ndarray, d: int) -> np.ndarray:
    """``contact`` with d for eps."""
    return _refine(sh, i, j, g.near(sh.box[i], sh.box[j], d), d, True, "near")


def overlaps(sh: ShapesU, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
    """z overlap > eps, and every shift of at most eps on x and y leaves the footprints'
    interiors intersecting."""
    return _refine(sh, i, j, g.overlaps(sh.box[i], sh.box[j], eps), eps, False, "overlaps")


def inner_half(sh: ShapesU) -> np.ndarray:
    """(n, 2) int64: per part, the half extents (U) on x and y of an axis-aligned box about
    its centre that lies inside its footprint: the box itself for a plain part; for a
    yawed box the square of half side min(hx, hy) / (|cos| + |sin|), for a disc of radius
    r the square of half side r / sqrt 2, both rounded down."""
    n = len(sh)
    out = np.zeros((n, 2), dtype=np.int64)
    for k in range(n):
        hx, hy = int(sh.hx[k]), int(sh.hy[k])
        if bool(sh.plain[k]):  # per part, the shape kernel's own: which footprint it is
            out[k] = (int(sh.box[k, 1] - sh.box[k, 0]) // 2, int(sh.box[k, 3] - sh.box[k, 2]) // 2)
        elif bool(sh.cyl[k]):
            a = math.isqrt(hx * hx // 2)
            out[k] = (a, a)
        else:
            # a corner (a, a) of the square in the part's frame: a (|C| + |S|) / N <= h
            a = min(hx, hy) * int(sh.rn[k]) // (abs(int(sh.rc[k])) + abs(int(sh.rs[k])))
            out[k] = (a, a)
    return out


def footprint(sh: ShapesU, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
    """The ``overlaps`` test in the plane only."""
    return _refine(sh, i, j, g.footprint(sh.box[i], sh.box[j], eps), eps, False, "footprint")


def supports(sh: ShapesU, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
    """i supports j: i's top meets j's bottom within eps and the footprints overlap."""
    return _refine(sh, i, j, g.supports(sh.box[i], sh.box[j], eps), eps, False, "supports")


def above(sh: ShapesU, i: np.ndarray, j: np.ndarray, eps: int) -> np.ndarray:
    """i is above j: i's bottom at or over j's top (within eps), footprints overlap."""
    return _refine(sh, i, j, g.above(sh.box[i], sh.box[j], eps), eps, False, "above")


def on_surface(sh: ShapesU, idx: np.ndarray, z: int, eps: int) -> np.ndarray:
    """The bottom is within eps of the surface height z (exact for every shape)."""
    return g.on_surface(sh.box[idx], z, eps)


def flanks(sh: ShapesU, q: np.ndarray, p: np.ndarray, axis: str, opening: int | None,
           depth: int | None, eps: int) -> np.ndarray:
    """q blocks a parallel grip of p along p's own ``axis`` (a cylinder's axes are the
    world's): q overlaps p's grasp band in z by more than eps (as for boxes), and every
    shift of q by at most eps along p's other axis leaves q's footprint meeting the
    interior of the fingers' sweep R (in p's frame: p's extent on the other axis times
    [-opening/2, opening/2] along ``axis``; without a known opening p's extent grown by
    eps along ``axis``). For two plain boxes: geometry.flanks, unchanged."""
    bq, bp = sh.box[q], sh.box[p]
    out = g.flanks(bq, bp, axis, opening, depth, eps)
    k = np.nonzero(~(sh.plain[q] & sh.plain[p]))[0]
    if not len(k):
        return out
    qk, pk = q[k], p[k]
    band_lo = bp[k, 4] if depth is None else bp[k, 5] - depth
    zo = np.minimum(bq[k, 5], bp[k, 5]) - np.maximum(bq[k, 4], band_lo)
    res = zo > eps
    z_ok = np.nonzero(res)[0]
    if not len(z_ok):
        out[k] = res
        return out
    qk, pk = qk[z_ok], pk[z_ok]

    def margin(exact: bool, rows: np.ndarray | None) -> Any:
        qq, pp = (qk, pk) if rows is None else (qk[rows], pk[rows])
        P = sh.geo(pp, exact)
        if opening is None:
            along = (P.hx if axis == "x" else P.hy) + (_fr(eps + 0 * pp) if exact else eps)
        else:
            half = Fraction(opening, 2) if exact else opening / 2
            along = P.hx * 0 + half
        hx, hy = (along, P.hy) if axis == "x" else (P.hx, along)
        R = Geo(P.cx, P.cy, P.c, P.s, hx, hy, np.zeros(len(pp), dtype=bool))
        e = _fr(eps + 0 * pp) if exact else np.full(len(pp), float(eps))
        zero = e * 0
        T = Geo(zero, zero, P.c, P.s, zero if axis == "x" else e, e if axis == "x" else zero,
                np.zeros(len(pp), dtype=bool))
        return plane.covers(sh.geo(qq, exact), R, T)

    res[z_ok] = _decide(sh, margin, strict=True, log=("flanks", qk, pk))
    out[k] = res
    return out


def _zone_geo(lo: tuple[int, int, int], hi: tuple[int, int, int], n: int, exact: bool) -> Geo:
    """A box zone's footprint as n rows of an axis-aligned rectangle."""
    vals = [Fraction(lo[0] + hi[0], 2), Fraction(lo[1] + hi[1], 2),
            Fraction(hi[0] - lo[0], 2), Fraction(hi[1] - lo[1], 2)]
    one = np.ones(n, dtype=np.int64)
    if exact:
        cx, cy, hx, hy = (_obj([v] * n) for v in vals)
        return Geo(cx, cy, cx * 0 + 1, cx * 0, hx, hy, np.zeros(n, dtype=bool))
    cx, cy, hx, hy = (float(v) * one for v in vals)
    return Geo(cx, cy, one * 1.0, one * 0.0, hx, hy, np.zeros(n, dtype=bool))


def inside_box(sh: ShapesU, idx: np.ndarray, lo: tuple[int, int, int],
               hi: tuple[int, int, int], eps: int) -> np.ndarray:
    """Every point of each shape lies in [lo, hi] grown by eps on every face."""
    out = g.inside_box(sh.box[idx], lo, hi, eps)
    k = np.nonzero(~sh.plain[idx])[0]
    if not len(k):
        return out
    ik = idx[k]
    zok = (sh.box[ik, 4] >= lo[2] - eps) & (sh.box[ik, 5] <= hi[2] + eps)

    def margin(exact: bool, rows: np.ndarray | None) -> Any:
        ii = ik if rows is None else ik[rows]
        X = sh.geo(ii, exact)
        ex, ey = plane.support(X, 1, 0), plane.support(X, 0, 1)
        m = np.minimum(np.minimum(X.cx - ex - (lo[0] - eps), hi[0] + eps - X.cx - ex),
                       np.minimum(X.cy - ey - (lo[1] - eps), hi[1] + eps - X.cy - ey))
        L = 1 + np.abs(X.cx) + np.abs(X.cy) + ex + ey + (abs(lo[0]) + abs(lo[1]) + abs(hi[0])
                                                          + abs(hi[1]) + eps)
        return m / L

    out[k] = zok & _decide(sh, margin, strict=False, log=("inside", ik, None))
    return out


def intersects_box(sh: ShapesU, idx: np.ndarray, lo: tuple[int, int, int],
                   hi: tuple[int, int, int], eps: int) -> np.ndarray:
    """Each shape enters [lo, hi] by more than eps: z overlap > eps and every shift of at
    most eps on x and y leaves the footprint meeting the zone's interior."""
    base = g.intersects_box(sh.box[idx], lo, hi, eps)
    out = base.copy()
    k = np.nonzero(base & ~sh.plain[idx])[0]
    if not len(k):
        return out
    ik = idx[k]

    def margin(exact: bool, rows: np.ndarray | None) -> Any:
        ii = ik if rows is None else ik[rows]
        return plane.covers(sh.geo(ii, exact), _zone_geo(lo, hi, len(ii), exact),
                            _square(len(ii), eps, exact))

    out[k] = _decide(sh, margin, strict=True, log=("intersects", ik, None))
    return out


def _half_margin(sh: ShapesU, h: g.HalfSpaceU, eps: int, ii: np.ndarray, exact: bool,
                 inside: bool) -> Any:
    """The half-space margin of shapes ii (see inside_half / intersects_half)."""
    X = sh.geo(ii, exact)
    a, b, c3 = h.coef
    cz = _fr(sh.cz[ii]) if exact else sh.cz[ii].astype(np.float64)
    hz = _fr(sh.hz[ii]) if exact else sh.hz[ii].astype(np.float64)
    lin = a * X.cx + b * X.cy + c3 * cz
    zs = abs(c3) * hz
    slack = eps * (abs(a) + abs(b) + abs(c3))
    gt = h.op in (">", ">=")
    if inside:
        K = (lin - zs + slack - h.rhs) if gt else (h.rhs + slack - lin - zs)
    else:
        K = (lin + zs - slack - h.rhs) if gt else (h.rhs - slack - lin + zs)
    L = 1 + np.abs(lin) + zs + slack + abs(h.rhs) + (abs(a) + abs(b)) * (X.hx + X.hy)
    r2n2 = X.hx * X.hx * (a * a + b * b)
    if inside:  # K >= the support along (a, b)
        rect = (K - plane.support(replace(X, disc=np.zeros(len(ii), dtype=bool)), a, b)) / L
        disc = np.minimum(K / L, (K * K - r2n2) / (L * L))
    else:  # K + the support > 0
        rect = (K + plane.support(replace(X, disc=np.zeros(len(ii), dtype=bool)), a, b)) / L
        disc = np.maximum(K / L, (r2n2 - K * K) / (L * L))
    return np.where(X.disc, disc, rect)


def inside_half(sh: ShapesU, idx: np.ndarray, h: g.HalfSpaceU, eps: int) -> np.ndarray:
    """Each shape lies within the closed region grown by eps (the L-infinity ball)."""
    out = g.inside_half(sh.box[idx], h, eps)
    k = np.nonzero(~sh.plain[idx])[0]
    if len(k):
        ik = idx[k]
        out[k] = _decide(sh, lambda ex, rows: _half_margin(
            sh, h, eps, ik if rows is None else ik[rows], ex, True), strict=False,
            log=("inside", ik, None))
    return out


def intersects_half(sh: ShapesU, idx: np.ndarray, h: g.HalfSpaceU, eps: int) -> np.ndarray:
    """Each shape shrunk by eps (the L-infinity ball) still meets the open region."""
    base = g.intersects_half(sh.box[idx], h, eps)
    out = base.copy()
    k = np.nonzero(base & ~sh.plain[idx])[0]
    if len(k):
        ik = idx[k]
        out[k] = _decide(sh, lambda ex, rows: _half_margin(
            sh, h, eps, ik if rows is None else ik[rows], ex, False), strict=True,
            log=("intersects", ik, None))
    return out


def flanks_margin(sh: ShapesU, eps: int, opening: int | None, depth: int | None) -> int:
    """The broad-phase margin (U) beyond which no flanks pair can hold, from the parts' own
    sizes (a yawed part's own size is smaller than its enclosing box's)."""
    m = eps
    if len(sh) and opening is not None:
        lateral = int(2 * min(sh.hx.min(), sh.hy.min()))
        m = max(m, (opening - lateral) // 2 + 1)
    if len(sh) and depth is not None:
        m = max(m, depth - int(2 * sh.hz.min()) + 1)
    return m
