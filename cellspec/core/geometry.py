"""The numpy geometry kernel: fixed-point quantisation, broad phase, and the reference
meaning of every built-in relation.

Resolution: positions and sizes are rounded to RESOLUTION (0.1 mm). Boxes are then
held as integer corners in half-resolution units ``U`` (0.05 mm), so a centre, a
face and a size are all exact integers. Every backend (clingo, the reference
evaluator, later Z3/CP-SAT) works on these same integers; the report says when
rounding onto the grid could have changed a relation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from cellspec.core.status import Reason, SolverLimit

RESOLUTION = Fraction(1, 10000)  # metres: 0.1 mm
U = RESOLUTION / 2  # one integer unit of a box corner, metres
U_PER_M = int(1 / U)  # 20000
MAX_ABS_COORD_M = 1000.0  # absurd beyond this: a cell is metres, not kilometres
MAX_SIZE_M = 100.0

AXES = "xyz"
LO = {"x": 0, "y": 2, "z": 4}
HI = {"x": 1, "y": 3, "z": 5}


def to_u(value_m: Fraction) -> Fraction:
    """A length in metres as an exact number of units U (may be fractional)."""
    return Fraction(value_m) / U


def to_u_int(value_m: Fraction) -> int:
    """A length in metres rounded to whole units U."""
    return round(to_u(value_m))


@dataclass(frozen=True)
class Quantised:
    """Integer boxes (n, 6) in U as [x0, x1, y0, y1, z0, z1], plus rounding facts."""

    boxes: np.ndarray
    off_grid: bool  # some input coordinate was not on the 0.1 mm grid


def quantise(pos: np.ndarray, size: np.ndarray) -> Quantised:
    """Round centres and sizes to the grid and return integer box corners."""
    c = np.rint(pos / float(RESOLUTION))
    s = np.rint(size / float(RESOLUTION))
    off = bool(
        np.any(np.abs(pos / float(RESOLUTION) - c) > 1e-6)
        or np.any(np.abs(size / float(RESOLUTION) - s) > 1e-6)
    )
    c = c.astype(np.int64)
    s = s.astype(np.int64)
    boxes = np.empty((len(pos), 6), dtype=np.int64)
    boxes[:, 0::2] = 2 * c - s
    boxes[:, 1::2] = 2 * c + s
    return Quantised(boxes, off)


def olap(a: np.ndarray, b: np.ndarray, axis: str) -> np.ndarray:
    """Signed overlap length along an axis: > 0 intersect, < 0 gap (vectorised rows)."""
    lo, hi = LO[axis], HI[axis]
    return np.minimum(a[..., hi], b[..., hi]) - np.maximum(a[..., lo], b[..., lo])


def contact(a: np.ndarray, b: np.ndarray, eps: int) -> np.ndarray:
    """Boxes touch or overlap: the gap is at most eps on every axis (seed 000, eq. contact)."""
    return (olap(a, b, "x") >= -eps) & (olap(a, b, "y") >= -eps) & (olap(a, b, "z") >= -eps)


def overlaps(a: np.ndarray, b: np.ndarray, eps: int) -> np.ndarray:
    """Interiors intersect by more than eps on every axis."""
    return (olap(a, b, "x") > eps) & (olap(a, b, "y") > eps) & (olap(a, b, "z") > eps)


def footprint(a: np.ndarray, b: np.ndarray, eps: int) -> np.ndarray:
    """Footprints (x-y projections) overlap by more than eps on x and on y."""
    return (olap(a, b, "x") > eps) & (olap(a, b, "y") > eps)


def supports(a: np.ndarray, b: np.ndarray, eps: int) -> np.ndarray:
    """a supports b: a's top meets b's bottom within eps and the footprints overlap."""
    return (np.abs(b[..., 4] - a[..., 5]) <= eps) & footprint(a, b, eps)


def above(a: np.ndarray, b: np.ndarray, eps: int) -> np.ndarray:
    """a is above b: a's bottom is at or over b's top (within eps), footprints overlap."""
    return (a[..., 4] >= b[..., 5] - eps) & footprint(a, b, eps)


def near(a: np.ndarray, b: np.ndarray, d: int) -> np.ndarray:
    """The gap between the boxes is at most d on every axis."""
    return (olap(a, b, "x") >= -d) & (olap(a, b, "y") >= -d) & (olap(a, b, "z") >= -d)


def flanks(q: np.ndarray, p: np.ndarray, axis: str, opening: int | None, depth: int | None,
           eps: int) -> np.ndarray:
    """q blocks a parallel grip of p along ``axis``.

    q overlaps p's extent on the other lateral axis (> eps), overlaps p's grasp band
    [p.top - depth, p.top] in z (> eps), and the gap between them along ``axis``
    is smaller than the finger clearance (opening - p's size) / 2. Without a known
    opening the clearance is eps: a neighbour blocks when the gap is at most eps (it touches).
    """
    other = "y" if axis == "x" else "x"
    lat = olap(q, p, other) > eps
    band_lo = p[..., 4] if depth is None else p[..., 5] - depth
    zo = np.minimum(q[..., 5], p[..., 5]) - np.maximum(q[..., 4], band_lo)
    size_a = p[..., HI[axis]] - p[..., LO[axis]]
    gap2 = -2 * olap(q, p, axis)
    if opening is None:  # unknown opening: only touching neighbours (gap <= eps) block
        return lat & (zo > eps) & (gap2 <= 2 * eps)
    return lat & (zo > eps) & (gap2 < opening - size_a)


def inside_box(a: np.ndarray, lo: tuple[int, int, int], hi: tuple[int, int, int],
               eps: int) -> np.ndarray:
    """Each box lies inside [lo, hi] (eps allowed on every face)."""
    ok = np.ones(a.shape[:-1], dtype=bool)
    for k, ax in enumerate(AXES):
        ok &= (a[..., LO[ax]] >= lo[k] - eps) & (a[..., HI[ax]] <= hi[k] + eps)
    return ok


def intersects_box(a: np.ndarray, lo: tuple[int, int, int], hi: tuple[int, int, int],
                   eps: int) -> np.ndarray:
    """Each box enters [lo, hi] by more than eps on every axis."""
    ok = np.ones(a.shape[:-1], dtype=bool)
    for k, ax in enumerate(AXES):
        o = np.minimum(a[..., HI[ax]], hi[k]) - np.maximum(a[..., LO[ax]], lo[k])
        ok &= o > eps
    return ok


@dataclass(frozen=True)
class HalfSpaceU:
    """The region coef . x (op) rhs scaled to integers: coef and rhs in U units."""

    coef: tuple[int, int, int]
    op: str  # '<', '<=', '>', '>='
    rhs: int


def halfspace_u(coef: tuple[Fraction, Fraction, Fraction], op: str, rhs_m: Fraction) -> HalfSpaceU:
    """Scale a half-space to integers without rounding (multiplying by the common denominator)."""
    rhs = to_u(rhs_m)
    den = math.lcm(*(f.denominator for f in (*coef, rhs)))
    h = HalfSpaceU(tuple(int(c * den) for c in coef), op, int(rhs * den))  # type: ignore[arg-type]
    if sum(abs(c) for c in h.coef) * 2 * int(MAX_ABS_COORD_M * U_PER_M) + abs(h.rhs) >= 2**31:
        raise ValueError("half-space coefficients too fine for exact 32-bit integers")
    return h


def lin_extremes(coef: tuple[int, int, int], lo: Any, hi: Any, zero: Any = 0,
                 axpy: Any = lambda acc, x, c: acc + c * x) -> tuple[Any, Any]:
    """The least and the greatest value of ``coef . p`` over a box given by its low and high
    corner per axis (``lo[k]``, ``hi[k]``): numbers, numpy arrays or solver expressions,
    summed from ``zero`` by ``axpy(acc, x, c)`` (acc + c * x). Every backend's half-space
    relation reads the box through this."""
    mn = mx = zero
    for c, l_, h_ in zip(coef, lo, hi, strict=True):
        if c > 0:
            mn, mx = axpy(mn, l_, c), axpy(mx, h_, c)
        elif c < 0:
            mn, mx = axpy(mn, h_, c), axpy(mx, l_, c)
    return mn, mx


def _lin_extremes(a: np.ndarray, h: HalfSpaceU) -> tuple[np.ndarray, np.ndarray]:
    return lin_extremes(h.coef, [a[..., LO[ax]] for ax in AXES], [a[..., HI[ax]] for ax in AXES],
                        zero=np.zeros(a.shape[:-1], dtype=np.int64))


def intersects_half(a: np.ndarray, h: HalfSpaceU, eps: int) -> np.ndarray:
    """The box shrunk by eps on every face still meets the open region."""
    lo, hi = _lin_extremes(a, h)
    slack = eps * sum(abs(c) for c in h.coef)
    if h.op in (">", ">="):
        return hi - slack > h.rhs
    return lo + slack < h.rhs


def inside_half(a: np.ndarray, h: HalfSpaceU, eps: int) -> np.ndarray:
    """The box grown by eps on every face... lies within the closed region (eps allowed)."""
    lo, hi = _lin_extremes(a, h)
    slack = eps * sum(abs(c) for c in h.coef)
    if h.op in (">", ">="):
        return lo + slack >= h.rhs
    return hi - slack <= h.rhs


@dataclass(frozen=True)
class ReachU:
    """What ``reachable(p, r)`` reads of a robot: its base (U, rounded to the grid), its
    declared reach squared in (2U)^2 (exact, rounded down: the grasp point is on the 2U
    grid) or None, and its ``reachable`` box (U) or None."""

    base: tuple[int, int, int]
    reach2: int | None
    lo: tuple[int, int, int] | None = None
    hi: tuple[int, int, int] | None = None


def reach_u(base_m: Any, reach_m: Fraction | None, box_m: Any = None) -> ReachU:
    """A robot's reach on the integer grid (``box_m``: (lo, hi) in metres, or None)."""
    r2 = None
    if reach_m is not None:
        r2 = math.floor((2 * to_u(reach_m)) ** 2)
    lo = hi = None
    if box_m is not None:
        lo = tuple(to_u_int(v) for v in box_m[0])
        hi = tuple(to_u_int(v) for v in box_m[1])
    return ReachU(tuple(to_u_int(v) for v in base_m), r2, lo, hi)  # type: ignore[arg-type]


def reachable(a: np.ndarray, r: ReachU) -> np.ndarray:
    """Each box's grasp point (its top-face centre) is within the robot's reach of its base
    (straight-line distance) and inside its reach box, when it declares them."""
    gx = a[..., 0] + a[..., 1]  # 2U: the centre in x and y, twice the top in z
    gy = a[..., 2] + a[..., 3]
    gz = 2 * a[..., 5]
    ok = np.ones(a.shape[:-1], dtype=bool)
    if r.reach2 is not None:
        dx, dy, dz = gx - 2 * r.base[0], gy - 2 * r.base[1], gz - 2 * r.base[2]
        ok &= dx * dx + dy * dy + dz * dz <= r.reach2
    if r.lo is not None and r.hi is not None:
        for k, c in enumerate((gx, gy, gz)):
            ok &= (c >= 2 * r.lo[k]) & (c <= 2 * r.hi[k])
    return ok


def on_surface(a: np.ndarray, z: int, eps: int) -> np.ndarray:
    """The box's bottom is within eps of the surface height z."""
    return np.abs(a[..., 4] - z) <= eps


# --- broad phase ---------------------------------------------------------------------


def relation_margin(boxes: np.ndarray, eps: int, near: int = 0, flanks: bool = False,
                    opening: int | None = None, depth: int | None = None) -> int:
    """The broad-phase margin (U) beyond which no pair relation can hold on this layout:
    eps (contact, overlaps, supports), the largest ``near`` distance, and for ``flanks``
    the widest finger clearance (opening - smallest lateral size) / 2 and how far fingers
    deeper than a part reach below it (depth - smallest height). Every backend uses it."""
    m = max(eps, near)
    if flanks and len(boxes):
        if opening is not None:
            lateral = int(min((boxes[:, 1] - boxes[:, 0]).min(),
                              (boxes[:, 3] - boxes[:, 2]).min()))
            m = max(m, (opening - lateral) // 2 + 1)
        if depth is not None:
            m = max(m, depth - int((boxes[:, 5] - boxes[:, 4]).min()) + 1)
    return m


MAX_CANDIDATES = 2_000_000  # beyond this a layout is denser than anything buildable


class TooDense(SolverLimit):
    """The broad phase would produce more candidate pairs than ``limit``."""

    reason = Reason.DENSITY_LIMIT

    def __init__(self, count: int, limit: int):
        super().__init__(f"{count} candidate pairs (limit {limit})")
        self.count = count
        self.limit = limit


def _pairs_from_ranges(idx_sorted: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                       owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    counts = ends - starts
    total = int(counts.sum())
    if total == 0:
        e = np.empty(0, dtype=np.int64)
        return e, e
    i = np.repeat(owners, counts)
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    j = idx_sorted[np.repeat(starts, counts) + offs]
    return i, j


def broad_phase(boxes: np.ndarray, margin: int, columns: bool = False,
                limit: int | None = MAX_CANDIDATES) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i < j) whose boxes come within ``margin`` on every axis (x and y only when
    ``columns``), by hashing each box's low corner into a uniform grid whose cell is at
    least the largest grown box, so only the 27 (9 for columns) neighbouring cells are
    searched. Exact filtering follows; the result is sorted and deterministic. Raises
    TooDense (before building them) when the grid pairs alone would exceed ``limit``."""
    n = len(boxes)
    if n < 2:
        e = np.empty(0, dtype=np.int64)
        return e, e
    axes = "xy" if columns else "xyz"
    ext = max(int((boxes[:, HI[a]] - boxes[:, LO[a]]).max()) for a in axes) + margin + 1
    cells = np.stack([np.floor_divide(boxes[:, LO[a]], ext) for a in axes], axis=1)
    cells -= cells.min(axis=0) - 1
    dims = cells.max(axis=0) + 2
    if columns:
        keys = cells[:, 0] * dims[1] + cells[:, 1]
    else:
        keys = (cells[:, 0] * dims[1] + cells[:, 1]) * dims[2] + cells[:, 2]
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    owners = np.arange(n, dtype=np.int64)
    # the keys are dense (cells shifted to start at 1, dims = max + 2): when the grid is not
    # much larger than the layout, a table cell -> run of sorted boxes replaces the two
    # binary searches per offset (the same ranges, so the same pairs)
    size = int(np.prod(dims))
    ptr = None
    if size <= max(8 * n, 1 << 16):
        ptr = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=size), out=ptr[1:])
    offsets = []
    rng = (-1, 0, 1)
    if columns:
        offsets = [(dx * dims[1] + dy) for dx in rng for dy in rng]
    else:
        offsets = [((dx * dims[1] + dy) * dims[2] + dz) for dx in rng for dy in rng for dz in rng]
    ii, jj = [], []
    # each unordered pair of cells once: the cell itself (i < j) and the forward half
    total = 0
    cols = [(np.ascontiguousarray(boxes[:, LO[a]]), np.ascontiguousarray(boxes[:, HI[a]]))
            for a in axes]
    for off in sorted({abs(int(o)) for o in offsets}):
        target = keys + off
        if ptr is not None:
            s, e = ptr[target], ptr[target + 1]
        else:
            s = np.searchsorted(sk, target, side="left")
            e = np.searchsorted(sk, target, side="right")
        total += int((e - s).sum())
        if limit is not None and total > 2 * limit + n:
            raise TooDense(total // 2, limit)
        i, j = _pairs_from_ranges(order, s, e, owners)
        if off == 0:
            keep = i < j
            i, j = i[keep], j[keep]
        else:
            i, j = np.minimum(i, j), np.maximum(i, j)
        ok = np.ones(len(i), dtype=bool)  # the exact filter, offset by offset (less memory)
        for lo, hi in cols:
            ok &= np.minimum(hi[i], hi[j]) - np.maximum(lo[i], lo[j]) >= -margin
        ii.append(i[ok])
        jj.append(j[ok])
    i = np.concatenate(ii)
    j = np.concatenate(jj)
    srt = np.lexsort((j, i))
    return i[srt], j[srt]


def attr_2u(boxes: np.ndarray, attr: str) -> np.ndarray:
    """Twice an attribute's value in U (so centres stay integers), for every box."""
    if attr in ("x", "y", "z"):
        return boxes[:, LO[attr]] + boxes[:, HI[attr]]
    if attr.startswith("size."):
        a = attr[-1]
        return 2 * (boxes[:, HI[a]] - boxes[:, LO[a]])
    col = {"top": 5, "zmax": 5, "bottom": 4, "zmin": 4, "xmin": 0, "xmax": 1, "ymin": 2,
           "ymax": 3}[attr]
    return 2 * boxes[:, col]
