"""The exact shapes kernel (cellspec/core/shapes.py) against shapely as an independent
oracle: every relation on random yawed boxes and cylinders (asserted wherever the oracle
is certain, i.e. away from a band around the threshold), exact agreement at constructed
rational ties, and the hard cases of issue 22."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shapely import affinity
from shapely.geometry import LineString, Point, Polygon
from shapely.geometry import box as sbox
from shapely.geometry.polygon import orient

from cellspec.core import geometry as g
from cellspec.core import shapes as S

BAND = 1.0  # U: the oracle's discs are polygons (error < 0.2 U at these radii)
QUAD = 64


def make(rows: list[tuple], yaw: list[float], cyl: list[bool]) -> S.ShapesU:
    """Shapes from (centre, size) rows in U (even centres, whole sizes), as the instance
    builds them (sizes swapped for a plain quarter turn)."""
    boxes = []
    for (c, s), y, cy in zip(rows, yaw, cyl, strict=True):
        s = list(s)
        if not cy and math.fmod(y, 90) == 0 and math.fmod(abs(y), 180) == 90:
            s[0], s[1] = s[1], s[0]
        boxes.append([c[0] - s[0], c[0] + s[0], c[1] - s[1], c[1] + s[1], c[2] - s[2],
                      c[2] + s[2]])
    return S.shapes_u(np.array(boxes, dtype=np.int64), np.array(yaw, float), np.array(cyl))


def poly(sh: S.ShapesU, k: int):
    """Part k's footprint as a shapely geometry, from the kernel's rotation."""
    cx, cy, hx, hy = (float(v[k]) for v in (sh.cx, sh.cy, sh.hx, sh.hy))
    if sh.cyl[k]:
        return Point(cx, cy).buffer(hx, quad_segs=QUAD)
    c, s = float(sh.cosf[k]), float(sh.sinf[k])
    pts = [(cx + a * hx * c - b * hy * s, cy + a * hx * s + b * hy * c)
           for a, b in ((1, 1), (-1, 1), (-1, -1), (1, -1))]
    return Polygon(pts)


def _ccw_from_bottom(P):
    """A convex polygon's vertices, counter-clockwise from the lowest (then leftmost)."""
    v = np.array(orient(P, 1.0).exterior.coords)[:-1]
    k = np.lexsort((v[:, 0], v[:, 1]))[0]
    return np.roll(v, -k, axis=0)


def mdiff(B, A):
    """B - A (Minkowski difference of convex footprints) as a polygon: B + (-A) by merging
    the two edge sequences by angle (linear, not the hull of every pairwise difference)."""
    pb, pa = _ccw_from_bottom(B), _ccw_from_bottom(affinity.scale(A, -1, -1, origin=(0, 0)))
    eb, ea = np.diff(pb, axis=0, append=pb[:1]), np.diff(pa, axis=0, append=pa[:1])
    e = np.concatenate([eb, ea])
    ang = np.mod(np.arctan2(e[:, 1], e[:, 0]), 2 * np.pi)
    e = e[np.argsort(ang, kind="stable")]
    pts = pb[0] + pa[0] + np.cumsum(np.vstack([[0.0, 0.0], e[:-1]]), axis=0)
    return Polygon(pts).buffer(0)


def square(e: float):
    return sbox(-e, -e, e, e) if e > 0 else Point(0, 0)


def oracle(test, lo: float, hi: float) -> bool | None:
    """test(x) at a tightened and a loosened threshold: the answer when both agree."""
    a, b = test(lo), test(hi)
    return a if a == b else None


def o_meets(A, B, e: float) -> bool | None:
    M = mdiff(B, A)
    return oracle(lambda x: M.buffer(x).intersects(square(e)), -BAND, BAND)


def o_covers(A, B, E) -> bool | None:
    M = mdiff(B, A)
    return oracle(lambda x: M.buffer(x).contains(E), -BAND, BAND)


def z_olap(sh: S.ShapesU, a: int, b: int) -> int:
    return int(min(sh.box[a, 5], sh.box[b, 5]) - max(sh.box[a, 4], sh.box[b, 4]))


def check(expected: bool | None, got: bool) -> None:
    if expected is not None:
        assert got == expected


YAWS = st.one_of(st.sampled_from([0.0, 90.0, 45.0, -45.0, 30.0, 180.0, 270.0, 360.0, 135.0]),
                 st.floats(-720, 720, allow_nan=False))
SHAPE = st.tuples(st.integers(-1500, 1500), st.integers(-1500, 1500), st.integers(0, 600),
                  st.integers(50, 900), st.integers(50, 900), st.integers(50, 500), YAWS,
                  st.booleans())


def build(a, b) -> S.ShapesU:
    rows, yaw, cyl = [], [], []
    for x, y, z, sx, sy, sz, w, c in (a, b):
        rows.append(((2 * x, 2 * y, 2 * z + sz), (sx, sx if c else sy, sz)))
        yaw.append(w)
        cyl.append(c)
    return make(rows, yaw, cyl)


I, J = np.array([0]), np.array([1])  # noqa: E741 (the pair (0, 1))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPE, SHAPE, st.sampled_from([0, 1, 20, 100]))
def test_pair_relations_match_shapely(a, b, eps):
    sh = build(a, b)
    A, B = poly(sh, 0), poly(sh, 1)
    zo = z_olap(sh, 0, 1)
    exp = o_meets(A, B, eps)
    check(None if exp is None else (zo >= -eps and exp), bool(S.contact(sh, I, J, eps)[0]))
    check(None if exp is None else (zo >= -eps and exp), bool(S.near(sh, I, J, eps)[0]))
    fp = o_covers(A, B, square(eps))
    wide = min(sh.box[:, 1] - sh.box[:, 0]) > eps and min(sh.box[:, 3] - sh.box[:, 2]) > eps
    fp = fp and wide  # as for boxes: a footprint no wider than eps overlaps nothing
    check(None if fp is None else (zo > eps and fp), bool(S.overlaps(sh, I, J, eps)[0]))
    check(fp, bool(S.footprint(sh, I, J, eps)[0]))
    sup = abs(int(sh.box[1, 4] - sh.box[0, 5])) <= eps
    check(None if fp is None else (sup and fp), bool(S.supports(sh, I, J, eps)[0]))
    ab = int(sh.box[0, 4]) >= int(sh.box[1, 5]) - eps
    check(None if fp is None else (ab and fp), bool(S.above(sh, I, J, eps)[0]))
    # symmetric relations are symmetric
    assert S.contact(sh, I, J, eps)[0] == S.contact(sh, J, I, eps)[0]
    assert S.overlaps(sh, I, J, eps)[0] == S.overlaps(sh, J, I, eps)[0]


def _sweep(sh: S.ShapesU, p: int, axis: str, opening: int | None, eps: int):
    """The fingers' sweep R and the shift segment T of p (docs/shapes.md), in shapely."""
    cx, cy, hx, hy = (float(v[p]) for v in (sh.cx, sh.cy, sh.hx, sh.hy))
    along = opening / 2 if opening is not None else (hx if axis == "x" else hy) + eps
    rx, ry = (along, hy) if axis == "x" else (hx, along)
    ang = math.degrees(math.atan2(float(sh.sinf[p]), float(sh.cosf[p])))
    R = affinity.rotate(sbox(cx - rx, cy - ry, cx + rx, cy + ry), ang, origin=(cx, cy))
    seg = ((0, -eps), (0, eps)) if axis == "x" else ((-eps, 0), (eps, 0))
    T = affinity.rotate(LineString(seg), ang, origin=(0, 0)) if eps else Point(0, 0)
    return R, T


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPE, SHAPE, st.sampled_from([0, 20]), st.sampled_from([None, 1400, 2400]),
       st.sampled_from([None, 400]), st.sampled_from("xy"))
def test_flanks_match_shapely(a, b, eps, opening, depth, axis):
    sh = build(a, b)  # q = 0 flanks p = 1
    R, T = _sweep(sh, 1, axis, opening, eps)
    Q = poly(sh, 0)
    exp = o_covers(Q, R, T)
    band_lo = sh.box[1, 4] if depth is None else sh.box[1, 5] - depth
    zo = min(sh.box[0, 5], sh.box[1, 5]) - max(sh.box[0, 4], band_lo)
    got = bool(S.flanks(sh, I, J, axis, opening, depth, eps)[0])
    if sh.plain.all():  # two plain boxes: today's formula, unchanged
        assert got == bool(g.flanks(sh.box[I], sh.box[J], axis, opening, depth, eps)[0])
        return
    check(None if exp is None else (zo > eps and exp), got)


ZONE = st.tuples(st.integers(-2000, 0), st.integers(1, 2000), st.integers(-2000, 0),
                 st.integers(1, 2000))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPE, ZONE, st.sampled_from([0, 20]))
def test_box_zones_match_shapely(a, zone, eps):
    sh = build(a, a)
    x0, x1, y0, y1 = zone
    lo, hi = (x0, y0, 0), (x1, y1, 900)
    P = poly(sh, 0)
    Z = sbox(x0, y0, x1, y1)
    zin = sh.box[0, 4] >= -eps and sh.box[0, 5] <= 900 + eps
    exp = oracle(lambda t: Z.buffer(eps + t, join_style=2).contains(P), -BAND, BAND)
    check(None if exp is None else (zin and exp), bool(S.inside_box(sh, I, lo, hi, eps)[0]))
    zo = min(sh.box[0, 5], 900) - max(sh.box[0, 4], 0)
    cov = o_covers(P, Z, square(eps))
    wide = (sh.box[0, 1] - sh.box[0, 0] > eps and sh.box[0, 3] - sh.box[0, 2] > eps
            and x1 - x0 > eps and y1 - y0 > eps)
    cov = cov and wide
    check(None if cov is None else (zo > eps and cov),
          bool(S.intersects_box(sh, I, lo, hi, eps)[0]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SHAPE, st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3),
       st.sampled_from(["<", "<=", ">", ">="]), st.integers(-4000, 4000),
       st.sampled_from([0, 20]))
def test_half_spaces_match_shapely(a, ca, cb, cc, op, rhs, eps):
    if ca == cb == cc == 0:
        return
    sh = build(a, a)
    h = g.HalfSpaceU((ca, cb, cc), op, rhs)
    pts = np.array(poly(sh, 0).exterior.coords)
    lin = pts[:, 0] * ca + pts[:, 1] * cb
    z0, z1 = float(sh.box[0, 4]), float(sh.box[0, 5])
    hi = lin.max() + max(cc * z0, cc * z1)
    lo = lin.min() + min(cc * z0, cc * z1)
    slack = eps * (abs(ca) + abs(cb) + abs(cc))
    tol = BAND * (abs(ca) + abs(cb))
    gt = op in (">", ">=")
    # inside: the shape within the region grown by eps
    v = (lo + slack - rhs) if gt else (rhs - hi + slack)
    if abs(v) > tol:
        assert bool(S.inside_half(sh, I, h, eps)[0]) == (v >= 0)
    # intersects: the shape shrunk by eps meets the open region
    w = (hi - slack - rhs) if gt else (rhs - lo - slack)
    if abs(w) > tol:
        assert bool(S.intersects_half(sh, I, h, eps)[0]) == (w > 0)


# --- plain pairs are today's kernel, byte for byte ------------------------------------------

@settings(max_examples=200, deadline=None)
@given(SHAPE, SHAPE, st.sampled_from([0, 20]))
def test_plain_pairs_are_geometry(a, b, eps):
    a = (*a[:6], 90.0 * (a[6] // 90 if math.isfinite(a[6]) else 0), False)
    b = (*b[:6], 0.0, False)
    sh = build(a, b)
    assert sh.plain.all()
    A, B = sh.box[I], sh.box[J]
    for fn, ref in ((S.contact, g.contact), (S.overlaps, g.overlaps),
                    (S.supports, g.supports), (S.above, g.above), (S.footprint, g.footprint)):
        assert (fn(sh, I, J, eps) == ref(A, B, eps)).all()


# --- exact ties, constructed on the rational rotation (cos 15/17, sin 8/17) ------------------

YAW_15_8 = math.degrees(2 * math.atan(0.25))  # t = 1/4 exactly: cos = 15/17, sin = 8/17


def test_rational_rotation_is_exact():
    c, s, n = S.rational_rotation(np.array([YAW_15_8, 0.0, 90.0, 45.0]))
    assert (c[0] * 17, s[0] * 17) == (15 * n[0], 8 * n[0])
    assert (c[1], s[1]) == (n[1], 0) and (c[2], s[2]) == (n[2], 0)
    assert (c * c + s * s == n * n).all()
    assert abs(math.atan2(s[3], c[3]) - math.pi / 4) < 1e-6


def tie_pair(gap: int) -> S.ShapesU:
    """A 510-U-half cube turned by YAW_15_8 (its rightmost corner exactly at x = 690) and a
    plain box whose left face is ``gap`` U to the right of that corner."""
    x0 = 690 + gap
    half = 300 if x0 % 2 == 0 else 301  # the centre must be even (on the 0.1 mm grid)
    return make([((0, 0, 500), (510, 510, 500)), ((x0 + half, 0, 500), (half, 400, 500))],
                [YAW_15_8, 0.0], [False, False])


@pytest.mark.parametrize("gap, eps, contact", [(0, 0, True), (1, 0, False), (1, 1, True),
                                               (21, 20, False), (20, 20, True)])
def test_corner_touching_exactly(gap, eps, contact):
    sh = tie_pair(gap)
    assert sh.box[0, 1] == 690  # the enclosing box is exact here
    assert bool(S.contact(sh, I, J, eps)[0]) is contact
    assert not S.overlaps(sh, I, J, eps)[0]


@pytest.mark.parametrize("gap, eps, overlaps", [(-21, 20, True), (-20, 20, False),
                                                (-1, 0, True), (0, 0, False)])
def test_corner_overlap_threshold_exactly(gap, eps, overlaps):
    """A corner pushed ``-gap`` U into the box: overlaps when the push exceeds eps on x
    (a shift of eps on y keeps the corner inside the wide box)."""
    sh = tie_pair(gap)
    assert bool(S.overlaps(sh, I, J, eps)[0]) is overlaps


def test_disc_tangent_exactly():
    """Two cylinders whose centres are 3-4-5 apart and radii sum to 5 k touch exactly."""
    k = 200
    rows = [((0, 0, 500), (2 * k, 2 * k, 500)), ((3 * k, 4 * k, 500), (3 * k, 3 * k, 500))]
    for eps, want in ((0, True), (1, True)):
        sh = make(rows, [0, 0], [True, True])
        assert bool(S.contact(sh, I, J, eps)[0]) is want
    assert not S.overlaps(sh, I, J, 0)[0]
    far = make([rows[0], ((3 * k + 2, 4 * k, 500), (3 * k, 3 * k, 500))], [0, 0], [True, True])
    assert not S.contact(far, I, J, 0)[0] and S.contact(far, I, J, 1)[0]


# --- the hard cases of issue 22 --------------------------------------------------------------

def test_yaw_90_is_swapped_sizes_and_360_is_0():
    a = make([((0, 0, 500), (700, 300, 500))], [90.0], [False])
    b = make([((0, 0, 500), (300, 700, 500))], [0.0], [False])
    assert a.plain.all() and (a.box == b.box).all()
    assert (a.hx, a.hy) == (b.hx, b.hy)
    for y in (360.0, -360.0, 720.0):
        c = make([((0, 0, 500), (700, 300, 500))], [y], [False])
        assert c.plain.all() and (c.box == make([((0, 0, 500), (700, 300, 500))], [0.0],
                                                [False]).box).all()
    d, e = (make([((0, 0, 500), (700, 300, 500))], [y], [False]) for y in (30.0, 390.0))
    assert (d.rc, d.rs, d.box.tolist()) == (e.rc, e.rs, e.box.tolist())
    f = make([((0, 0, 500), (700, 300, 500))], [120.0], [False])  # 120 = 30 + a quarter turn
    assert (f.hx[0], f.hy[0]) == (300, 700) and (f.box == d.box[:, [2, 3, 0, 1, 4, 5]]).all()


def test_45_degree_boxes_in_a_row():
    """Cubes (0.05 m) at 45° on a row, corners 0.1 mm apart: each touches its neighbours
    within 1 mm, none overlaps, and their enclosing boxes overlap heavily."""
    half = 500
    pitch = 2 * round(half * math.sqrt(2)) + 2  # tip-to-tip 2 U apart
    n = 6
    sh = make([((k * pitch, 0, 500), (half, half, 500)) for k in range(n)], [45.0] * n,
              [False] * n)
    i, j = np.arange(n - 1), np.arange(1, n)
    assert S.contact(sh, i, j, 20).all() and not S.contact(sh, i, j, 0).any()
    assert not S.overlaps(sh, i, j, 20).any()
    # face to face along the diagonal: 1.3 U apart, enclosing boxes overlapping by 40 %
    diag = make([((708 * k, 708 * k, 500), (half, half, 500)) for k in range(n)], [45.0] * n,
                [False] * n)
    assert S.contact(diag, i, j, 20).all() and not S.contact(diag, i, j, 0).any()
    assert not S.overlaps(diag, i, j, 20).any() and g.overlaps(diag.box[i], diag.box[j], 20).all()
    assert not S.contact(diag, i[:-1], j[1:], 20).any()  # next but one: apart
    # a plain cube on top of two neighbours' tips rests on both
    top = make([((k * pitch, 0, 500), (half, half, 500)) for k in range(2)]
               + [((pitch // 2, 0, 1500), (half, half, 500))], [45.0, 45.0, 0.0], [False] * 3)
    assert S.supports(top, np.array([0, 1]), np.array([2, 2]), 20).all()


def test_cylinder_across_two_boxes():
    """A cylinder lying on two blocks 2 cm apart (a vertical can here: a disc bridging the
    gap) is supported by both; moved off one, only by the other."""
    blocks = [((-700, 0, 500), (500, 500, 500)), ((700, 0, 500), (500, 500, 500))]
    sh = make(blocks + [((0, 0, 1500), (600, 600, 500))], [30.0, -30.0, 0.0],
              [False, False, True])
    sup = S.supports(sh, np.array([0, 1]), np.array([2, 2]), 20)
    assert sup.all()
    off = make(blocks + [((3000, 0, 1500), (600, 600, 500))], [30.0, -30.0, 0.0],
               [False, False, True])
    assert not S.supports(off, np.array([0, 1]), np.array([2, 2]), 20).any()


def test_aabb_corner_is_not_support():
    """A plain cube whose footprint meets a 45° block only inside the block's enclosing box
    (beyond its tip) is not supported, though the enclosing boxes overlap."""
    sh = make([((0, 0, 500), (500, 500, 500)), ((1100, 1100, 1500), (500, 500, 500))],
              [45.0, 0.0], [False, False])
    assert g.supports(sh.box[I], sh.box[J], 20)[0]
    assert not S.supports(sh, I, J, 20)[0]


def test_take_permutes():
    sh = make([((0, 0, 500), (500, 500, 500)), ((2000, 0, 500), (300, 300, 500))],
              [30.0, 0.0], [False, True])
    t = sh.take(np.array([1, 0]))
    assert (t.box == sh.box[[1, 0]]).all() and t.cyl.tolist() == [True, False]
    assert len(t) == 2 and t[np.array([0])].cyl.tolist() == [True]
