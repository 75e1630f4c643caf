"""The numpy geometry kernel: every relation at its exact tolerance boundary, the broad
phase against brute force, and quantisation onto the 0.1 mm grid."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellspec.core import geometry as g

E = 20  # the contact tolerance 1 mm, in units U = 0.05 mm
S = 1000  # a 5 cm cube, in U
AX = {"x": 0, "y": 1, "z": 2}


def box(lo=(0, 0, 0), size=(S, S, S)) -> np.ndarray:
    """An integer box [x0, x1, y0, y1, z0, z1] from its low corner and size."""
    out = np.empty(6, dtype=np.int64)
    for k in range(3):
        out[2 * k] = lo[k]
        out[2 * k + 1] = lo[k] + size[k]
    return out


def shifted(axis: str, by: int, size=(S, S, S)) -> np.ndarray:
    lo = [0, 0, 0]
    lo[AX[axis]] = by
    return box(tuple(lo), size)


def test_units():
    assert g.U == Fraction(1, 20000) and g.U_PER_M == 20000
    assert g.to_u(Fraction(1, 1000)) == 20
    assert g.to_u_int(Fraction(3, 100000)) == 1  # 0.03 mm -> 0.6 U rounds to 1
    assert g.to_u_int(Fraction(1, 100000)) == 0


# --- contact, overlaps, near ------------------------------------------------------------

@pytest.mark.parametrize("axis", "xyz")
@pytest.mark.parametrize(("gap", "expected"), [(-S, True), (-1, True), (0, True), (E - 1, True),
                                               (E, True), (E + 1, False), (10 * E, False)])
def test_contact_at_tolerance(axis, gap, expected):
    a = box()
    b = shifted(axis, S + gap)
    assert bool(g.contact(a, b, E)) is expected
    assert bool(g.contact(b, a, E)) is expected
    # the negative side too
    c = shifted(axis, -S - gap)
    assert bool(g.contact(a, c, E)) is expected


def test_contact_needs_every_axis():
    a = box()
    b = box((S + E, S + E + 1, 0))
    assert not g.contact(a, b, E)
    assert g.contact(a, box((S + E, S + E, S + E)), E)  # corner to corner, eps on all axes


@pytest.mark.parametrize("axis", "xyz")
@pytest.mark.parametrize(("olap", "expected"), [(0, False), (E - 1, False), (E, False),
                                                (E + 1, True), (S, True)])
def test_overlaps_at_tolerance(axis, olap, expected):
    a = box()
    b = shifted(axis, S - olap)
    assert bool(g.overlaps(a, b, E)) is expected
    assert bool(g.overlaps(b, a, E)) is expected


def test_overlaps_needs_every_axis():
    a = box()
    b = box((S - E - 1, S - E - 1, S - E))  # deep enough on x and y, exactly eps on z
    assert not g.overlaps(a, b, E)
    assert g.overlaps(a, box((S - E - 1, S - E - 1, S - E - 1)), E)
    assert g.overlaps(a, a, E)  # identical boxes


def test_overlaps_implies_contact_on_a_grid():
    rng = np.random.default_rng(7)
    lo = rng.integers(-60, 60, size=(300, 3)) * 10
    size = rng.integers(1, 20, size=(300, 3)) * 10
    boxes = np.stack([box(tuple(a), tuple(s)) for a, s in zip(lo, size, strict=True)])
    A, B = boxes[:, None, :], boxes[None, :, :]
    ov, co = g.overlaps(A, B, E), g.contact(A, B, E)
    assert not (ov & ~co).any()
    assert (ov == ov.T).all() and (co == co.T).all()


@pytest.mark.parametrize("d", [0, 1, E, 200])
@pytest.mark.parametrize("axis", "xyz")
def test_near_at_distance(axis, d):
    a = box()
    assert g.near(a, shifted(axis, S + d), d)
    assert not g.near(a, shifted(axis, S + d + 1), d)
    assert g.near(a, shifted(axis, -S - d), d)
    assert not g.near(a, shifted(axis, -S - d - 1), d)


# --- supports, above, footprint ----------------------------------------------------------

@pytest.mark.parametrize(("dz", "expected"), [(-E - 1, False), (-E, True), (-1, True), (0, True),
                                              (E, True), (E + 1, False)])
def test_supports_face_meeting(dz, expected):
    below = box()
    top = box((0, 0, S + dz))
    assert bool(g.supports(below, top, E)) is expected
    assert not g.supports(top, below, E)


@pytest.mark.parametrize("axis", "xy")
@pytest.mark.parametrize(("olap", "expected"), [(E, False), (E + 1, True), (S, True)])
def test_supports_footprint_at_tolerance(axis, olap, expected):
    below = box()
    lo = [0, 0, S]
    lo[AX[axis]] = S - olap
    top = box(tuple(lo))
    assert bool(g.supports(below, top, E)) is expected
    assert bool(g.footprint(below, top, E)) is expected


def test_supports_on_a_side_is_not_support():
    a = box()
    side = box((S, 0, S // 2))  # touching a's side face, higher up
    assert g.contact(a, side, E)
    assert not g.supports(a, side, E)
    assert not g.supports(side, a, E)


@pytest.mark.parametrize(("dz", "expected"), [(-E - 1, False), (-E, True), (0, True),
                                              (5 * S, True)])
def test_above(dz, expected):
    below = box()
    high = box((10, 10, S + dz))
    assert bool(g.above(high, below, E)) is expected
    assert not g.above(below, high, E)


def test_above_needs_footprint():
    below = box()
    assert not g.above(box((S - E, 0, 3 * S)), below, E)
    assert g.above(box((S - E - 1, 0, 3 * S)), below, E)


# --- flanks --------------------------------------------------------------------------

OPEN = 1400  # 0.07 m opening
DEPTH = 400  # 0.02 m finger depth
CLEAR = (OPEN - S) // 2  # 200 U of clearance per side for a 5 cm cube


@pytest.mark.parametrize("axis", "xy")
@pytest.mark.parametrize(("gap", "expected"), [(0, True), (CLEAR - 1, True), (CLEAR, False),
                                               (CLEAR + 50, False), (-S // 2, True)])
def test_flanks_gap_against_finger_clearance(axis, gap, expected):
    p = box()
    q = shifted(axis, S + gap)
    assert bool(g.flanks(q, p, axis, OPEN, DEPTH, E)) is expected
    # a neighbour along one axis never blocks the other axis
    other = "y" if axis == "x" else "x"
    assert not g.flanks(q, p, other, OPEN, DEPTH, E) or gap < 0


@pytest.mark.parametrize(("olap", "expected"), [(E, False), (E + 1, True)])
def test_flanks_needs_lateral_overlap(olap, expected):
    p = box()
    q = box((S + 10, S - olap, 0))  # beside along x, overlapping p's y extent by olap
    assert bool(g.flanks(q, p, "x", OPEN, DEPTH, E)) is expected


@pytest.mark.parametrize(("top", "expected"), [(S - DEPTH + E, False),
                                               (S - DEPTH + E + 1, True)])
def test_flanks_grasp_band(top, expected):
    """Only the band [p.top - depth, p.top] matters: a low neighbour does not block."""
    p = box()
    q = box((S + 10, 0, 0), (S, S, top))
    assert bool(g.flanks(q, p, "x", OPEN, DEPTH, E)) is expected
    # without a finger depth the whole height of p is the band
    assert g.flanks(q, p, "x", OPEN, None, E)


def test_flanks_neighbour_above_the_part_does_not_block():
    p = box()
    q = box((S + 10, 0, S + E))
    assert not g.flanks(q, p, "x", OPEN, DEPTH, E)


@pytest.mark.parametrize(("gap", "expected"), [(0, True), (E - 1, True), (E + 1, False)])
def test_flanks_without_opening_only_touching_blocks(gap, expected):
    p = box()
    assert bool(g.flanks(shifted("x", S + gap), p, "x", None, DEPTH, E)) is expected


# --- zones -------------------------------------------------------------------------------

ZLO, ZHI = (0, 0, 0), (4 * S, 4 * S, 4 * S)


@pytest.mark.parametrize("axis", "xyz")
@pytest.mark.parametrize(("out", "expected"), [(-S, True), (0, True), (E, True),
                                               (E + 1, False)])
def test_inside_box_at_tolerance(axis, out, expected):
    k = AX[axis]
    hi = list((S, S, S))
    hi[k] = 4 * S - S + out  # low corner so that the top face sticks out by `out`
    assert bool(g.inside_box(box(tuple(hi)), ZLO, ZHI, E)) is expected
    lo = [S, S, S]
    lo[k] = -out
    assert bool(g.inside_box(box(tuple(lo)), ZLO, ZHI, E)) is expected


@pytest.mark.parametrize("axis", "xyz")
@pytest.mark.parametrize(("depth", "expected"), [(-5, False), (0, False), (E, False),
                                                 (E + 1, True), (S, True)])
def test_intersects_box_at_tolerance(axis, depth, expected):
    k = AX[axis]
    lo = [S, S, S]
    lo[k] = -S + depth  # enters the zone by `depth` through its low face
    assert bool(g.intersects_box(box(tuple(lo)), ZLO, ZHI, E)) is expected


# keep-out `corner : x + 2*y > 1.2` (metres): 1.2 m = 24000 U
CORNER = g.halfspace_u((Fraction(1), Fraction(2), Fraction(0)), ">", Fraction(6, 5))


def _with_extremes(xy_hi: int) -> np.ndarray:
    """A cube whose xmax + 2 ymax equals xy_hi (its y at 6000 U)."""
    y0 = 6000
    x1 = xy_hi - 2 * (y0 + S)
    return box((x1 - S, y0, 0))


def test_halfspace_scaling_is_exact():
    assert CORNER == g.HalfSpaceU((1, 2, 0), ">", 24000)
    h = g.halfspace_u((Fraction(1, 3), Fraction(0), Fraction(-1)), "<=", Fraction(1, 10))
    # x/3 - z <= 2000 U  ->  x - 3z <= 6000
    assert h == g.HalfSpaceU((1, 0, -3), "<=", 6000)


@pytest.mark.parametrize(("d", "expected"), [(0, False), (3 * E, False), (3 * E + 1, True)])
def test_intersects_half_space_at_tolerance(d, expected):
    """Enters x + 2y > 1.2 only when the box shrunk by eps per face still does."""
    b = _with_extremes(24000 + d)
    assert bool(g.intersects_half(b, CORNER, E)) is expected


@pytest.mark.parametrize(("d", "expected"), [(0, True), (-3 * E, True), (-3 * E - 1, False)])
def test_inside_half_space_at_tolerance(d, expected):
    # xmin + 2 ymin = xmax + 2 ymax - 3 S; put it at 1.2 m + d
    b = _with_extremes(24000 + d + 3 * S)
    assert bool(g.inside_half(b, CORNER, E)) is expected


def test_half_space_less_than_and_negative_coefficients():
    h = g.halfspace_u((Fraction(1), Fraction(-1), Fraction(0)), "<", Fraction(0))  # x < y
    left = box((0, 2 * S, 0))  # far on the y > x side
    assert g.inside_half(left, h, E) and g.intersects_half(left, h, E)
    right = box((2 * S, 0, 0))
    assert not g.inside_half(right, h, E) and not g.intersects_half(right, h, E)
    # on the diagonal x == y: the box straddles the plane by S on each side
    diag = box((0, 0, 0))
    assert g.intersects_half(diag, h, E) and not g.inside_half(diag, h, E)
    # sticking out of x < y: allowed up to eps per face, i.e. 2 eps in x - y
    assert g.inside_half(box((0, S - 2 * E, 0)), h, E)  # xmax - ymin = 2 eps
    assert not g.inside_half(box((0, S - 2 * E - 1, 0)), h, E)


@pytest.mark.parametrize(("z0", "expected"), [(-E - 1, False), (-E, True), (0, True), (E, True),
                                              (E + 1, False)])
def test_on_surface(z0, expected):
    assert bool(g.on_surface(box((0, 0, 2000 + z0)), 2000, E)) is expected


def test_attr_2u():
    b = box((100, 200, 300), (40, 60, 80))[None, :]
    assert g.attr_2u(b, "x")[0] == 2 * 120
    assert g.attr_2u(b, "y")[0] == 2 * 230
    assert g.attr_2u(b, "top")[0] == 2 * 380 == g.attr_2u(b, "zmax")[0]
    assert g.attr_2u(b, "bottom")[0] == 2 * 300 == g.attr_2u(b, "zmin")[0]
    assert g.attr_2u(b, "size.y")[0] == 2 * 60
    assert g.attr_2u(b, "xmin")[0] == 200 and g.attr_2u(b, "ymax")[0] == 2 * 260


# --- broad phase -------------------------------------------------------------------------

def brute_pairs(boxes: np.ndarray, margin: int, columns: bool) -> set[tuple[int, int]]:
    axes = "xy" if columns else "xyz"
    out = set()
    for i, j in itertools.combinations(range(len(boxes)), 2):
        if all(g.olap(boxes[i], boxes[j], a) >= -margin for a in axes):
            out.add((i, j))
    return out


@st.composite
def box_sets(draw):
    n = draw(st.integers(0, 40))
    spread = draw(st.sampled_from([50, 500, 5000]))
    rows = []
    for _ in range(n):
        lo = [draw(st.integers(-spread, spread)) for _ in range(3)]
        big = draw(st.integers(0, 15)) == 0
        size = [draw(st.integers(0 if not big else 1000, 300 if not big else 8000))
                for _ in range(3)]
        rows.append(box(tuple(lo), tuple(size)))
    return np.array(rows, dtype=np.int64).reshape(n, 6)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(box_sets(), st.sampled_from([0, 1, E, 137, 2000]), st.booleans())
def test_broad_phase_matches_brute_force(boxes, margin, columns):
    i, j = g.broad_phase(boxes, margin, columns=columns)
    got = list(zip(i.tolist(), j.tolist(), strict=True))
    assert got == sorted(got), "pairs must come sorted"
    assert len(set(got)) == len(got), "no duplicate pairs"
    assert set(got) == brute_pairs(boxes, margin, columns)


def test_broad_phase_duplicates_and_tiny_inputs():
    for n in (0, 1):
        i, j = g.broad_phase(np.zeros((n, 6), dtype=np.int64), E)
        assert len(i) == len(j) == 0
    same = np.stack([box()] * 5)
    i, j = g.broad_phase(same, 0)
    assert set(zip(i.tolist(), j.tolist(), strict=True)) == set(itertools.combinations(range(5),
                                                                                        2))


# --- quantisation --------------------------------------------------------------------------

@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.tuples(*[st.integers(-10_000_000, 10_000_000)] * 3),
                          st.tuples(*[st.integers(1, 1_000_000)] * 3)), min_size=1, max_size=20))
def test_quantise_round_trip(rows):
    """Centres and sizes on the 0.1 mm grid come back exactly, and are not off-grid."""
    c = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    pos = c * float(g.RESOLUTION)
    size = s * float(g.RESOLUTION)
    q = g.quantise(pos, size)
    assert not q.off_grid
    b = q.boxes
    assert b.dtype == np.int64
    for k in range(3):
        lo, hi = b[:, 2 * k], b[:, 2 * k + 1]
        assert ((lo + hi) == 4 * c[:, k]).all()  # centre, in U, is 2 c
        assert ((hi - lo) == 2 * s[:, k]).all()  # size, in U, is 2 s
        # and back to metres
        np.testing.assert_allclose((lo + hi) / 2 * float(g.U), pos[:, k], rtol=0, atol=1e-12)


def test_quantise_flags_off_grid():
    pos = np.array([[0.40005, 0.2, 0.025]])
    size = np.array([[0.05, 0.05, 0.05]])
    assert g.quantise(pos, size).off_grid
    assert g.quantise(np.array([[0.1 + 0.2, 0.2, 0.025]]), size).off_grid is False
    assert g.quantise(np.array([[0.4, 0.2, 0.025]]), np.array([[0.05, 0.05, 0.05003]])).off_grid


def test_quantise_metre_values_land_on_integers():
    pos = np.array([[0.4255, 0.2, 0.0255]])  # on the 0.5 mm grid
    q = g.quantise(pos, np.array([[0.05, 0.08, 0.021]]))
    # centre 2c and half size s in U, where c and s are in 0.1 mm
    assert q.boxes.tolist() == [[8510 - 500, 8510 + 500, 4000 - 800, 4000 + 800,
                                 510 - 210, 510 + 210]]
